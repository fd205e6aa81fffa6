"""The tombstone statement: what the caller gives, checked against the schema, completed, canonicalized.

No content, no floats, integers small enough for every JSON reader (larger ones as strings); record
ids are strings and commitments are hex SHA-256. The caller gives `request`, `scope`, `execution`,
`propagation` and `time`; this module adds `version`, `log_origin` and `tombstone_id`.

Nothing personal (statement version 2, `tombstones.vocabulary`): every string is an id, a commitment, a time, a
tombstone id or a word of a fixed list, and every object has only the fields the schema names. A scope path, a
tag, a subject reference, a token fragment or free text (a reason, an authority as someone typed it) is refused
here, whichever path built the statement: the tenant's private audit keeps the readable form.
"""
from __future__ import annotations

import functools
import operator
import re
import uuid
from itertools import chain, repeat
from typing import Any

from ..canonical import CanonicalizationError, canonical_json, plain_without_keys
from ..errors import TombstoneError
from ..jwk import parse_time
from ..vocabulary import (
    ARTIFACT_KINDS,
    AWAITING,
    CLOSE_ACTIONS,
    DEFERRED_ACTIONS,
    DERIVATIVE_OUTCOMES,
    MAX_ID_DIGITS,
    MODES,
    OUTCOMES,
    REFUSAL_CODES,
    STATEMENT_VERSION,
    TIERS,
    are_items,
    is_actor,
    is_authority,
    is_id,
    is_item,
    is_path,
    is_target,
    is_uuid,
    is_word,
)

CALLER_FIELDS = ("request", "scope", "execution", "propagation", "time")
ADDED_FIELDS = ("version", "log_origin", "tombstone_id")
RECORD_FIELDS = {"record_id", "commitment", "tier", "outcome", "reason"}
RECORD_REQUIRED = {"record_id", "commitment", "outcome"}
REQUEST_FIELDS = frozenset({"actor", "authority", "path"})
SCOPE_FIELDS = frozenset({"tenant_id", "target"})
EXECUTION_FIELDS = frozenset({"mode", "path", "handle", "records"})
PROPAGATION_FIELDS = frozenset({"derivatives", "deferred", "closes"})
DERIVATIVE_FIELDS = frozenset({"artifact_id", "kind", "outcome"})
DEFERRED_FIELDS = frozenset({"item", "items", "action", "deadline", "awaiting"})
CLOSE_FIELDS = frozenset({"tombstone_id", "handle", "action", "items"})
HEX64 = re.compile(r"[0-9a-f]{64}")
SALT = re.compile(r"[0-9a-fA-F]{32}")
FORBIDDEN_KEYS = frozenset({"content", "salt", "salts"})
STATEMENT_FIELDS = frozenset(CALLER_FIELDS + ADDED_FIELDS)
# Byte strings that every forbidden key's canonical JSON contains (see `statement_bytes`): `"salt` covers
# `"salt":` and `"salts":`, one search instead of two over the ~1 KB payload.
FORBIDDEN_MARKS = (b'"content":', b'"salt')
assert all(any(mark in b'"%s":' % key.encode() for mark in FORBIDDEN_MARKS) for key in FORBIDDEN_KEYS)


# Fast tests, in C, for the common case of `HEX64` and `SALT` (the patterns decide when these say no):
# `bytes.fromhex` takes only ASCII hex digits and whitespace, so N characters give N / 2 bytes only when all
# are hex digits. ~0.2 µs a test less than `str.strip` of the digits, three commitments and three salts a
# tombstone.
def _is_lower_hex64(value: Any) -> bool:
    try:
        return type(value) is str and len(value) == 64 and value == value.lower() and len(bytes.fromhex(value)) == 32
    except ValueError:
        return False


def _is_hex32(value: Any) -> bool:
    try:
        return type(value) is str and len(value) == 32 and len(bytes.fromhex(value)) == 16
    except ValueError:
        return False


def _invalid(field: str, detail: str) -> TombstoneError:
    return TombstoneError("statement_invalid", f"{field}: {detail}", {"field": field})


def _dict(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise _invalid(field, "must be an object")
    return value


def _list(value: Any, field: str) -> list:
    if not isinstance(value, list):
        raise _invalid(field, "must be a list")
    return value


def _no_forbidden_keys(value: Any, field: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in FORBIDDEN_KEYS:
                raise _invalid(f"{field}.{key}", "a statement never carries content or salts")
            _no_forbidden_keys(item, f"{field}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_forbidden_keys(item, f"{field}[{index}]")


def _extra_field(value: dict, allowed: frozenset, field: str) -> None:
    """Refuse a field the schema does not name: where free text would go."""
    extra = value.keys() - allowed
    if extra:
        raise _invalid(f"{field}.{sorted(extra, key=str)[0]}",
                       "is not a field of the statement (free text stays in the tenant's private audit)")


def _request_check(request: dict) -> None:
    if not is_authority(request.get("authority")):
        raise _invalid("request.authority", "say on what authority, from the fixed list (GDPR Art. 17, memory forget, "
                                            "...) or as a reference (retention_rule:12): never free text")
    if not is_actor(request.get("actor")):
        raise _invalid("request.actor", "must be role:id (token:12, user:3, request:7) or a named actor "
                                        "(sweep:compaction): never a name or a token")
    if not is_path(request.get("path")):
        raise _invalid("request.path", "must be one of the fixed paths (api, admin, erasure_workflow, ...)")
    _extra_field(request, REQUEST_FIELDS, "request")


def _scope_check(scope: dict) -> None:
    if "tenant_id" in scope and not is_id(scope["tenant_id"]):
        raise _invalid("scope.tenant_id", "must be the tenant's id")
    if not is_target(scope.get("target")):
        raise _invalid("scope.target", "exactly one of record_ids, subject_ids, artifact_ids (lists of ids), scope_id "
                                       "(an id) or tag_commitment (a salted hex SHA-256): never a scope path, tag or "
                                       "subject reference")
    _extra_field(scope, SCOPE_FIELDS, "scope")


def _execution_check(execution: dict) -> None:
    if not is_word(execution.get("mode"), MODES):
        raise _invalid("execution.mode", f"must be one of {sorted(MODES)}")
    if not is_path(execution.get("path")):
        raise _invalid("execution.path", "must be one of the fixed paths (api, admin, erasure_workflow, ...)")
    if "handle" in execution and not is_id(execution["handle"]):
        raise _invalid("execution.handle", "must be the forget's sequence number")
    _extra_field(execution, EXECUTION_FIELDS, "execution")


def _records(execution: dict, judge_plain: bool = True) -> tuple[list[dict], bool]:
    """The execution's records, checked, and whether they are plain JSON (`canonical.plain_without_keys`);
    field names are built only for the error (this runs per tombstone).

    Each check has a fast test for the common case (exact types, `_is_lower_hex64`) and, when that fails,
    the full test that decides (subclasses, `HEX64`) and names the field."""
    records = execution.get("records", [])
    plain = type(records) is list
    if plain and len(records) >= COMMON_MIN_ITEMS and _records_common(records):
        return records, judge_plain
    if not plain:
        records = _list(records, "execution.records")
    plain = plain and judge_plain
    for index, record in enumerate(records):
        if type(record) is not dict:
            _dict(record, f"execution.records[{index}]")
        if not RECORD_REQUIRED <= record.keys() <= RECORD_FIELDS:
            raise _invalid(f"execution.records[{index}]",
                           f"a record has {sorted(RECORD_REQUIRED)} and may have tier and reason")
        if not is_id(record["record_id"]):
            raise _invalid(f"execution.records[{index}].record_id", "must be a record id (a string of digits)")
        commitment = record["commitment"]
        if not _is_lower_hex64(commitment) and (not isinstance(commitment, str) or not HEX64.fullmatch(commitment)):
            raise _invalid(f"execution.records[{index}].commitment", "must be a lowercase hex SHA-256")
        if not is_word(record["outcome"], OUTCOMES):
            raise _invalid(f"execution.records[{index}].outcome", f"must be one of {sorted(OUTCOMES)}")
        if "tier" in record and not is_word(record["tier"], TIERS):
            raise _invalid(f"execution.records[{index}].tier", f"must be one of {sorted(TIERS)}")
        if "reason" in record and not is_word(record["reason"], REFUSAL_CODES):
            raise _invalid(f"execution.records[{index}].reason", f"must be a refusal code: {sorted(REFUSAL_CODES)}")
        if plain:  # a record's keys are RECORD_FIELDS: only its values can be other than plain
            for value in record.values():
                if type(value) is not str:
                    plain = plain_without_keys(record, FORBIDDEN_KEYS)
                    break
    return records, plain


# The common case of the per-item checks below, tested for a whole list at once with C iterators (`map`,
# `set`, `chain`): a sweep's statement of 5,000 records and 10,000 derivatives is checked in ~17 ms instead of
# ~29 (salts included). The iterators' set-up costs more than the loops over a few items (a forget's three
# records), so shorter lists go straight to the loops. When a test says no, the loop runs, decides and names.
COMMON_MIN_ITEMS = 16
_DICT_ONLY = {dict}
_STR_ONLY = {str}
_LENGTH_64 = {64}
_LENGTH_32 = {32}
_LENGTH_3 = {3}
_TIERS_OR_NONE = TIERS | {None}
_REASONS_OR_NONE = REFUSAL_CODES | {None}


def _values_are_strings(items: list[dict]) -> bool:
    """Every value of these (exact) dicts is an exact string."""
    return set(map(type, chain.from_iterable(map(dict.values, items)))) <= _STR_ONLY


def _records_common(records: list) -> bool:
    """Every record a dict of record fields (the required ones among them) whose values are all exact strings
    (so it is plain JSON with no forbidden key), every record id digits, every outcome, tier and reason a word
    of its list, and every commitment 64 lowercase hex digits: one `bytes.fromhex` over them all, which takes
    only hex digit pairs and whitespace, so 64 * n characters give 32 * n bytes only when all are hex digits."""
    if not (set(map(type, records)) <= _DICT_ONLY and set().union(*records) <= RECORD_FIELDS
            and all(map(operator.le, repeat(RECORD_REQUIRED), map(dict.keys, records)))  # each has the required
            and _values_are_strings(records)
            and _ids_common(list(map(_RECORD_ID, records)))
            and set(map(_OUTCOME, records)) <= OUTCOMES
            and set(map(dict.get, records, repeat("tier"))) <= _TIERS_OR_NONE
            and set(map(dict.get, records, repeat("reason"))) <= _REASONS_OR_NONE):
        return False
    commitments = list(map(_COMMITMENT, records))
    joined = "".join(commitments)
    try:
        return (set(map(len, commitments)) <= _LENGTH_64 and joined == joined.lower()
                and len(bytes.fromhex(joined)) == 32 * len(commitments))
    except ValueError:
        return False


_COMMITMENT = operator.itemgetter("commitment")
_RECORD_ID = operator.itemgetter("record_id")
_OUTCOME = operator.itemgetter("outcome")
_ARTIFACT_ID = operator.itemgetter("artifact_id")
_KIND = operator.itemgetter("kind")


def _ids_common(ids: list[str]) -> bool:
    """Exact strings (the caller checked), each 1 to MAX_ID_DIGITS ASCII digits: one join and one test."""
    joined = "".join(ids)
    return joined.isascii() and joined.isdigit() and all(ids) and max(map(len, ids)) <= MAX_ID_DIGITS


def _derivatives_common(derivatives: list) -> bool:
    """Every derivative a dict of exactly artifact_id, kind and outcome, all exact strings (no key a forbidden
    one: plain JSON), the ids digits, the kind and outcome words of their lists: valid, and plain JSON."""
    return (set(map(type, derivatives)) <= _DICT_ONLY and set().union(*derivatives) <= DERIVATIVE_FIELDS
            and set(map(len, derivatives)) <= _LENGTH_3 and _values_are_strings(derivatives)
            and _ids_common(list(map(_ARTIFACT_ID, derivatives)))
            and set(map(_KIND, derivatives)) <= ARTIFACT_KINDS
            and set(map(_OUTCOME, derivatives)) <= DERIVATIVE_OUTCOMES)


def _derivatives_check(derivatives: Any) -> None:
    for index, item in enumerate(derivatives if type(derivatives) is list
                                 else _list(derivatives, "propagation.derivatives")):
        if type(item) is not dict:
            _dict(item, f"propagation.derivatives[{index}]")
        if not is_id(item.get("artifact_id")):
            raise _invalid(f"propagation.derivatives[{index}].artifact_id", "must be an artifact id (digits)")
        if not is_word(item.get("kind"), ARTIFACT_KINDS):
            raise _invalid(f"propagation.derivatives[{index}].kind", f"must be one of {sorted(ARTIFACT_KINDS)}")
        if not is_word(item.get("outcome"), DERIVATIVE_OUTCOMES):
            raise _invalid(f"propagation.derivatives[{index}].outcome",
                           f"must be one of {sorted(DERIVATIVE_OUTCOMES)}")
        _extra_field(item, DERIVATIVE_FIELDS, f"propagation.derivatives[{index}]")


def _deferred_check(deferred: Any) -> None:
    for index, item in enumerate(deferred if type(deferred) is list else _list(deferred, "propagation.deferred")):
        if type(item) is not dict:
            _dict(item, f"propagation.deferred[{index}]")
        # An item waiting on an event with no date (a legal hold's release) names it instead of a deadline.
        deadline = item.get("deadline")
        if deadline is None and "awaiting" in item:
            if not is_word(item["awaiting"], AWAITING):
                raise _invalid(f"propagation.deferred[{index}].awaiting", f"must be one of {sorted(AWAITING)}")
        elif not _is_time(deadline):
            raise _time_invalid(f"propagation.deferred[{index}].deadline")
        elif "awaiting" in item:
            raise _invalid(f"propagation.deferred[{index}].awaiting", "only an item with no deadline awaits an event")
        if "items" in item:
            if "item" in item or not are_items(item["items"]):
                raise _invalid(f"propagation.deferred[{index}].items",
                               "a non-empty list of names such as record:12 (and no `item` beside it)")
        elif not is_item(item.get("item")):
            raise _invalid(f"propagation.deferred[{index}].item", "must name one thing, such as fleet_copy:7")
        if not is_word(item.get("action"), DEFERRED_ACTIONS):
            raise _invalid(f"propagation.deferred[{index}].action", f"must be one of {sorted(DEFERRED_ACTIONS)}")
        _extra_field(item, DEFERRED_FIELDS, f"propagation.deferred[{index}]")


def _closes_check(closes: Any) -> None:
    for index, item in enumerate(closes if type(closes) is list else _list(closes, "propagation.closes")):
        if type(item) is not dict:
            _dict(item, f"propagation.closes[{index}]")
        if not is_uuid(item.get("tombstone_id")):
            raise _invalid(f"propagation.closes[{index}].tombstone_id", "must be the earlier tombstone's id")
        if "handle" in item and not is_id(item["handle"]):
            raise _invalid(f"propagation.closes[{index}].handle", "must be the earlier forget's sequence number")
        if not is_word(item.get("action"), CLOSE_ACTIONS):
            raise _invalid(f"propagation.closes[{index}].action", f"must be one of {sorted(CLOSE_ACTIONS)}")
        if not are_items(item.get("items")):
            raise _invalid(f"propagation.closes[{index}].items", "a non-empty list of names such as record:12")
        _extra_field(item, CLOSE_FIELDS, f"propagation.closes[{index}]")


def _propagation(propagation: dict, judge_plain: bool = True) -> bool:
    """Check the propagation; answer whether it is plain JSON with no forbidden key (False without looking when
    not `judge_plain`)."""
    derivatives = propagation.get("derivatives", [])
    derivatives_plain = (type(derivatives) is list and len(derivatives) >= COMMON_MIN_ITEMS
                         and _derivatives_common(derivatives))
    if not derivatives_plain:
        _derivatives_check(derivatives)
    _deferred_check(propagation.get("deferred", []))
    _closes_check(propagation.get("closes", []))
    _extra_field(propagation, PROPAGATION_FIELDS, "propagation")
    if not judge_plain:
        return False
    return _plain_but(propagation, "derivatives") if derivatives_plain else plain_without_keys(propagation,
                                                                                             FORBIDDEN_KEYS)


def _is_time(value: Any) -> bool:
    if type(value) is str:  # the common case, and a batch repeats its times and deadlines: remembered
        return _is_time_text(value)
    try:
        return value is not None and parse_time(value) is not None
    except (TypeError, ValueError):
        return False


@functools.lru_cache(maxsize=4096)
def _is_time_text(text: str) -> bool:
    try:
        return parse_time(text) is not None
    except ValueError:
        return False


def _time_invalid(field: str) -> TombstoneError:
    return _invalid(field, "must be an RFC 3339 time with a zone, such as 2025-12-02T10:00:00Z")


def statement_complete(*, tombstone_id: uuid.UUID | str, statement: Any, log_origin: str) -> tuple[dict, list[dict]]:
    """The full statement (with `version`, `log_origin`, `tombstone_id`: a UUID or its string) and its
    execution records."""
    completed, records, _plain = _complete(tombstone_id, statement, log_origin, judge_plain=False)
    return completed, records


def statement_payload(*, tombstone_id: uuid.UUID | str, statement: Any, log_origin: str) -> tuple[bytes, list[dict]]:
    """`statement_bytes(statement_complete(...))`, and the execution records: what the issuer signs.

    The checks note, part by part as they go, whether the statement is plain JSON (exact types, no forbidden
    key): then the canonical bytes are orjson's at once, without canonicalization's own walk over the whole
    statement and the search for forbidden keys in the bytes (~4 µs a tombstone of ~12). Anything else goes
    through `statement_bytes` as it is, which decides and names what it refuses."""
    completed, records, plain = _complete(tombstone_id, statement, log_origin, judge_plain=True)
    return statement_bytes(completed, plain=plain), records


def _complete(tombstone_id: uuid.UUID | str, statement: Any, log_origin: str, *,
              judge_plain: bool = True) -> tuple[dict, list[dict], bool]:
    """`statement_complete`, and whether the completed statement is plain JSON with no forbidden key (False
    without looking when not `judge_plain`)."""
    if type(statement) is not dict:
        _dict(statement, "statement")
    keys = statement.keys()
    if not keys <= STATEMENT_FIELDS:
        raise _invalid(sorted(keys - STATEMENT_FIELDS)[0], "is not a statement field")
    get = statement.get
    request, scope, execution, propagation = get("request"), get("scope"), get("execution"), get("propagation")
    if not (type(request) is dict and type(scope) is dict and type(execution) is dict
            and type(propagation) is dict):
        for name in CALLER_FIELDS[:4]:  # in this order, the first that is not an object is named
            _dict(get(name), name)
    time = get("time")
    if not _is_time(time):
        raise _time_invalid("time")
    _request_check(request)
    _scope_check(scope)
    records, plain = _records(execution, judge_plain)
    _execution_check(execution)
    plain = _propagation(propagation, judge_plain) and plain
    tombstone_id = str(tombstone_id)
    if not keys.isdisjoint(ADDED_FIELDS):
        added = {"version": STATEMENT_VERSION, "log_origin": log_origin, "tombstone_id": tombstone_id}
        for name, value in added.items():
            if name in statement and statement[name] != value:
                raise _invalid(name, f"is set by the tombstone service (would be {value!r})")
    # The added fields replace any the caller gave (equal, as checked). Keys are left to orjson: a str
    # subclass as a key makes it refuse, and `canonical_json` then falls back to its own walk.
    plain = (plain and type(time) is str and type(log_origin) is str and _plain_but(execution, "records")
             and plain_without_keys(request, FORBIDDEN_KEYS) and plain_without_keys(scope, FORBIDDEN_KEYS))
    completed = {**statement, "version": STATEMENT_VERSION, "log_origin": log_origin, "tombstone_id": tombstone_id}
    return completed, records, plain


def _plain_but(value: dict, judged: str) -> bool:
    """`value` but its `judged` key (judged plain already, on the way of its checks) is plain JSON with no
    forbidden key."""
    rest = dict(value)  # a copy in C
    rest.pop(judged, None)
    return plain_without_keys(rest, FORBIDDEN_KEYS)


def statement_bytes(statement: dict, *, plain: bool = False) -> bytes:
    """The canonical bytes, refused if any object in the statement has a content or salt field.

    In canonical JSON an unescaped `"` only delimits strings and a key is the only string followed by
    `:`, so a byte search for `"content":` finds every key named `content`, at C speed (and `"salt` every
    `salt` and `salts`, with some strings that merely start so); the walk then decides, and names where.
    `plain=True`: the caller's walk found only exact JSON types and no forbidden key (`statement_payload`):
    neither canonicalization's walk nor the search is needed.
    """
    try:
        payload = canonical_json(statement, plain=plain)
    except CanonicalizationError as exc:
        raise _invalid(exc.path.removeprefix("(root)"), exc.problem) from None
    if plain:
        return payload
    for mark in FORBIDDEN_MARKS:
        if mark in payload:
            _no_forbidden_keys(statement, "statement")
            break
    return payload


def salts_check(salts: dict[str, str] | None, records: list[dict]) -> dict[str, str]:
    if not salts:
        return {}
    if not isinstance(salts, dict):
        raise TombstoneError("salts_invalid", "subject_salts maps record ids to salts.")
    known = {record["record_id"] for record in records}
    if len(salts) >= COMMON_MIN_ITEMS and salts.keys() <= known and _salts_common(salts.values()):
        return salts
    for record_id, salt in salts.items():
        if record_id not in known:
            raise TombstoneError("salts_invalid", f"Salt for record {record_id!r}, which the statement does not list.",
                                 {"record_id": record_id})
        if _is_hex32(salt):  # fast: what `SALT` matches
            continue
        if not isinstance(salt, str) or not SALT.fullmatch(salt):
            raise TombstoneError("salts_invalid", "A salt is 16 random bytes as 32 hex characters.",
                                 {"record_id": record_id})
    return salts


def _salts_common(salts) -> bool:
    """The common case of `salts_check`'s per-salt test, for all the salts at once: each 32 characters, and
    together 16 bytes each by one `bytes.fromhex` (see `_records_common`). False means "test salt by salt"."""
    try:
        return set(map(len, salts)) <= _LENGTH_32 and len(bytes.fromhex("".join(salts))) == 16 * len(salts)
    except (TypeError, ValueError):  # a salt that is not a string (`len` or `join` refuse it), or not hex
        return False

