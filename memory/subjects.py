"""Subject references: the one normal form every path compares, and the lookups by it.

A tenant names a data subject by an opaque reference (`Subject.ref`). Two spellings that a person or a
system cannot tell apart must reach the same subject, or an erasure request, a forget or a legal hold
silently misses records written under the other spelling. So every path that takes a reference (record
writes, forget targets, holds, subject requests, restores, admin searches) passes it through
`subject_ref_normalize` before it stores or compares it:

  - Unicode NFC: "José" typed on macOS (NFD: "e" + U+0301) and on Windows (NFC: "é") are one reference.
    Canonical equivalence only, not NFKC: compatibility folding maps distinct characters together
    ("ﬁ" -> "fi", fullwidth "Ａ" -> "A", "²" -> "2"), which could merge two different opaque ids.
  - whitespace (`str.isspace`: spaces, tabs, line breaks, no-break and ideographic spaces...) is stripped at
    both ends, and each run of it inside becomes one space;
  - case is kept. A reference may be an opaque id where case is significant (base64, a hash, a customer
    number from another system): folding case would make two people one, and then an erasure for one
    destroys the other's records. Not folding can only miss records when a caller varies the case of an
    id it owns, which it controls; the opposite error cannot be undone.
  - refused (`invalid_subject`): anything but a string, control characters other than the whitespace
    ones (NUL, ESC, DEL, U+001C..U+001F...), lone surrogates (not text: UTF-8 cannot encode them), and a
    normalized reference that is empty or longer than 200 characters.

Subjects that existing rows spelled two ways were merged by memory migration 0011: the younger rows
point at the oldest (`Subject.merged_into`) and are never found by a reference again.

No model is imported at module level: models and every app may import this module.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memory import errors

if TYPE_CHECKING:
    from memory.models import Subject, Tenant

SUBJECT_REF_MAX_CHARS = 200

# The control characters (Unicode category Cc: U+0000..U+001F, U+007F..U+009F) that are not whitespace, and
# the surrogates (Cs). Tab, line feed, vertical tab, form feed, carriage return and U+0085 are whitespace:
# they fold into a space.
_REFUSED = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")


def subject_ref_normalize(ref: object) -> str:
    """The normal form of a subject reference (NFC, whitespace trimmed and collapsed, case kept), or
    `invalid_subject` (400). See the module's docstring for why these rules."""
    if not isinstance(ref, str):
        raise errors.invalid("invalid_subject", "subject must be a string.")
    if _REFUSED.search(ref):
        raise errors.invalid("invalid_subject", "subject must not contain control characters.")
    normal = " ".join(unicodedata.normalize("NFC", ref).split())
    if not 0 < len(normal) <= SUBJECT_REF_MAX_CHARS:
        raise errors.invalid("invalid_subject", f"subject must be a reference of 1 to {SUBJECT_REF_MAX_CHARS} "
                                                "characters.")
    return normal


def subject_ids_find(*, tenant: Tenant, refs: Iterable[str]) -> dict[str, int]:
    """The ids of the tenant's subjects by normalized reference (a reference the tenant does not know is
    absent). Every reference is normalized first; an invalid one raises `invalid_subject`."""
    normal = {subject_ref_normalize(ref) for ref in refs}
    if not normal:
        return {}
    # any_of: one array parameter on PostgreSQL (memory/lookups.py), not one literal per reference.
    return dict(tenant.subjects.filter(ref__any_of=sorted(normal), merged_into__isnull=True)
                .values_list("ref", "pk"))


def subject_find(*, tenant: Tenant, ref: str) -> Subject | None:
    """The tenant's subject with this reference (normalized first: `invalid_subject` if it cannot be), or None."""
    return tenant.subjects.filter(ref=subject_ref_normalize(ref), merged_into__isnull=True).first()


__all__ = ["SUBJECT_REF_MAX_CHARS", "subject_find", "subject_ids_find", "subject_ids_search", "subject_ref_normalize"]


# A subject search (the admin's: memory.admin, dsr.admin) lists at most this many subjects' ids: a search that
# matches more is too broad to be useful, and the ids go into an IN list.
SUBJECT_SEARCH_LIMIT = 1000
# Under this many characters a term is searched as a prefix: a trigram index has no use for "contains 'c'".
SUBJECT_SEARCH_CONTAINS_FROM = 3


def subject_ids_search(term: str, *, limit: int = SUBJECT_SEARCH_LIMIT) -> list[int]:
    """The ids of (unmerged) subjects whose reference contains `term`, case folded ("cust-100" finds cust-1001
    and CUST-1002), of any tenant; a term under three characters is a prefix. Normalized first, as the
    references are; a term with no normal form finds nothing. Answered by the trigram index of memory
    migration 0015 on PostgreSQL."""
    from memory.models import Subject

    try:
        term = subject_ref_normalize(term)
    except errors.ApplicationError:
        return []
    lookup = "ref__icontains" if len(term) >= SUBJECT_SEARCH_CONTAINS_FROM else "ref__istartswith"
    return list(Subject.objects.filter(**{lookup: term}, merged_into__isnull=True).order_by()
                .values_list("pk", flat=True)[:limit])
