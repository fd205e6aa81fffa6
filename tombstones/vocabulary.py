"""What a tombstone statement may say, word by word (statement version 2). Pure: no Django.

A tombstone is public forever, so nothing in it may name a person (DESIGN.md invariant 6): every string a
version 2 statement holds is an internal id (ASCII digits), a lowercase hex commitment, a time, a tombstone id
(a UUID), or a word of the fixed lists below. A scope path, a tag, a subject reference, a token or free text
(an agent's reason, a rule's authority as legal typed it) never is: those stay in the tenant's private audit
(`memory.ForgetEvent`: target, actor, reason). The issuer refuses anything else
(`tombstones.services.statement`), whatever path built the statement; the verification page shows only these.

Version 1 statements (signed before) may carry a scope path, a tag, free text and a token's first characters in
`request` and `scope`: they keep verifying, as signed; the page's summary shows their words only when they are
in these lists.
"""
from __future__ import annotations

STATEMENT_VERSION = 2

# `request.actor`: who asked, as `role:id` (an API token's, an admin user's or a subject request's internal id),
# or one of the service's own actors by name.
ACTOR_ID_ROLES = frozenset({"token", "user", "request"})
ACTOR_NAMES = {
    "sweep": frozenset({"compaction", "pact_expiry", "deferred_erasures", "confirmations"}),
    "system": frozenset({"queryset_delete", "management_command", "unspecified"}),
}
# An actor given in no public form (a test's "someone", a command line's free text) is published as this.
ACTOR_UNSPECIFIED = "system:unspecified"

# `request.path` and `execution.path`: how the forget was asked for. A path outside the list goes out as
# "other" (memory.services.forget): the readable one stays on the forget event.
PATHS = frozenset({"api", "admin", "management_command", "queryset_delete", "erasure_workflow", "deferred_erasure",
                   "legal_override", "compaction", "pact_expiry", "fleet_ack", "mcp", "other"})
PATH_OTHER = "other"

# `request.authority`: a legal citation or a fixed phrase, or a reference to the tenant's signed retention
# table (`retention_rule:12`, whose authority legal wrote there) or to legal's decision on a retention conflict
# (`retention_conflict:7`). Subject requests cite these (dsr.services.workflow._authority).
AUTHORITIES = frozenset({
    "GDPR Art. 15", "GDPR Art. 17", "GDPR Art. 18",
    "CCPA §1798.105", "CCPA §1798.110", "CCPA §1798.120",
    "Erasure request", "Access request", "Restriction request",
    "memory forget",
    "compaction of hidden records (their retention ended)",
})
AUTHORITY_MEMORY_FORGET = "memory forget"
AUTHORITY_REFERENCES = frozenset({"retention_rule", "retention_conflict"})

MODES = frozenset({"soft", "redact", "hard"})
OUTCOMES = frozenset({"hidden", "redacted", "deleted", "refused"})
DERIVATIVE_OUTCOMES = frozenset({"hidden", "redacted", "deleted"})
TIERS = frozenset({"hot", "warm", "cold"})
REFUSAL_CODES = frozenset({"retention_lock", "legal_hold"})
ARTIFACT_KINDS = frozenset({"summary", "embedding", "cache", "archive", "fleet_copy"})
# What a deferred item waits for (`propagation.deferred[].action`), and what a later tombstone did to close it
# (`propagation.closes[].action`: a deferred erasure erases what a subject request had to keep).
DEFERRED_ACTIONS = frozenset({"acknowledge", "purge_content"})
CLOSE_ACTIONS = frozenset({"acknowledge", "purge_content", "erase"})
AWAITING = frozenset({"legal_hold_release"})
# A deferred thing is named `kind:id` (`record:12`, `fleet_copy:7`).
ITEM_KINDS = frozenset({"record", "fleet_copy"})

# `scope.target`: exactly one of these. Lists of ids, one scope id, or a tag's salted commitment
# (sha256(salt || UTF-8 tag), the salt kept with the tag on the tenant's forget event).
TARGET_ID_LISTS = frozenset({"record_ids", "subject_ids", "artifact_ids"})
TARGET_KINDS = TARGET_ID_LISTS | {"scope_id", "tag_commitment"}

MAX_ID_DIGITS = 20


def is_id(value) -> bool:
    """An internal id as a statement writes it: 1 to 20 ASCII digits."""
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_DIGITS and value.isascii() and value.isdigit()


def are_ids(values) -> bool:
    """A non-empty list of ids (one join and one test for the lot, in C: the common case of 10,000 ids)."""
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        return False
    joined = "".join(values)
    return (joined.isascii() and joined.isdigit() and all(values)
            and max(map(len, values)) <= MAX_ID_DIGITS)


def _hex_bytes(text: str) -> int:
    """How many bytes `text` is as hex digits (-1 when it is not): `bytes.fromhex` also skips whitespace, so only
    2n hex digits make n bytes."""
    try:
        return len(bytes.fromhex(text))
    except ValueError:
        return -1


def is_hex64(value) -> bool:
    return (isinstance(value, str) and len(value) == 64 and value.isascii() and value == value.lower()
            and _hex_bytes(value) == 32)


def is_item(value) -> bool:
    """A deferred thing's name: `record:12`, `fleet_copy:7`."""
    if not isinstance(value, str):
        return False
    kind, _, number = value.partition(":")
    return kind in ITEM_KINDS and is_id(number)


def are_items(values) -> bool:
    return isinstance(values, list) and bool(values) and all(map(is_item, values))


def is_uuid(value) -> bool:
    """A tombstone id as a statement writes it: the canonical lowercase UUID form."""
    if not isinstance(value, str) or len(value) != 36 or not value.isascii() or value != value.lower():
        return False
    return ([len(p) for p in value.split("-")] == [8, 4, 4, 4, 12]
            and _hex_bytes(value.replace("-", "")) == 16)


def is_actor(value) -> bool:
    """`role:id` or one of the service's named actors."""
    if not isinstance(value, str):
        return False
    role, _, name = value.partition(":")
    if role in ACTOR_ID_ROLES:
        return is_id(name)
    return name in ACTOR_NAMES.get(role, ())


def is_authority(value) -> bool:
    if not isinstance(value, str):
        return False
    if value in AUTHORITIES:
        return True
    kind, _, number = value.partition(":")
    return kind in AUTHORITY_REFERENCES and is_id(number)


def is_path(value) -> bool:
    return isinstance(value, str) and value in PATHS


def is_word(value, words: frozenset) -> bool:
    return isinstance(value, str) and value in words


def is_target(value) -> bool:
    """`scope.target`: an object with exactly one target kind and its value."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    (kind, item), = value.items()
    if not isinstance(kind, str) or kind not in TARGET_KINDS:
        return False
    if kind in TARGET_ID_LISTS:
        return are_ids(item)
    return is_id(item) if kind == "scope_id" else is_hex64(item)
