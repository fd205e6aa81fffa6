"""The statement checks as they were before they were made faster (commit e368a4c), kept as the oracle
that `test_statement_checks.py` compares `tombstones.services.statement` with.

The tombstone statement: what the caller gives, checked against the schema, completed, canonicalized.

No content, no floats, integers small enough for every JSON reader (larger ones as strings); record
ids are strings and commitments are hex SHA-256. The caller gives `request`, `scope`, `execution`,
`propagation` and `time`; this module adds `version`, `log_origin` and `tombstone_id`.
"""
from __future__ import annotations

import re
import uuid
from typing import Any

from tombstones.canonical import CanonicalizationError, canonical_json
from tombstones.errors import TombstoneError
from tombstones.jwk import parse_time

STATEMENT_VERSION = 1
CALLER_FIELDS = ("request", "scope", "execution", "propagation", "time")
ADDED_FIELDS = ("version", "log_origin", "tombstone_id")
RECORD_FIELDS = {"record_id", "commitment", "tier", "outcome", "reason"}
RECORD_REQUIRED = {"record_id", "commitment", "outcome"}
HEX64 = re.compile(r"[0-9a-f]{64}")
SALT = re.compile(r"[0-9a-fA-F]{32}")
FORBIDDEN_KEYS = {"content", "salt", "salts"}
STATEMENT_FIELDS = frozenset(CALLER_FIELDS + ADDED_FIELDS)
# The byte strings that may announce a forbidden key in canonical JSON (see `statement_bytes`).
FORBIDDEN_MARKS = tuple(b'"%s":' % key.encode() for key in sorted(FORBIDDEN_KEYS))


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


def _records(execution: dict) -> list[dict]:
    """The execution's records, checked; field names are built only for the error (this runs per tombstone)."""
    records = _list(execution.get("records", []), "execution.records")
    for index, record in enumerate(records):
        if type(record) is not dict:
            _dict(record, f"execution.records[{index}]")
        if not RECORD_REQUIRED <= record.keys() <= RECORD_FIELDS:
            raise _invalid(f"execution.records[{index}]",
                           f"a record has {sorted(RECORD_REQUIRED)} and may have tier and reason")
        if not isinstance(record["record_id"], str):
            raise _invalid(f"execution.records[{index}].record_id", "must be a string")
        commitment = record["commitment"]
        if not isinstance(commitment, str) or not HEX64.fullmatch(commitment):
            raise _invalid(f"execution.records[{index}].commitment", "must be a lowercase hex SHA-256")
    return records


def _propagation(propagation: dict) -> None:
    for index, item in enumerate(_list(propagation.get("derivatives", []), "propagation.derivatives")):
        if type(item) is not dict:
            _dict(item, f"propagation.derivatives[{index}]")
        if not isinstance(item.get("artifact_id"), str):
            raise _invalid(f"propagation.derivatives[{index}].artifact_id", "must be a string")
    for index, item in enumerate(_list(propagation.get("deferred", []), "propagation.deferred")):
        if type(item) is not dict:
            _dict(item, f"propagation.deferred[{index}]")
        # An item waiting on an event with no date (a legal hold's release) names it instead of a deadline.
        deadline = item.get("deadline")
        if deadline is None and isinstance(item.get("awaiting"), str):
            continue
        if not _is_time(deadline):
            raise _time_invalid(f"propagation.deferred[{index}].deadline")


def _is_time(value: Any) -> bool:
    try:
        return value is not None and parse_time(value) is not None
    except (TypeError, ValueError):
        return False


def _time_invalid(field: str) -> TombstoneError:
    return _invalid(field, "must be an RFC 3339 time with a zone, such as 2025-12-02T10:00:00Z")


def statement_complete(*, tombstone_id: uuid.UUID, statement: Any, log_origin: str) -> tuple[dict, list[dict]]:
    """The full statement (with `version`, `log_origin`, `tombstone_id`) and its execution records."""
    _dict(statement, "statement")
    if not statement.keys() <= STATEMENT_FIELDS:
        raise _invalid(sorted(statement.keys() - STATEMENT_FIELDS)[0], "is not a statement field")
    for name in CALLER_FIELDS[:4]:
        if type(statement.get(name)) is not dict:
            _dict(statement.get(name), name)
    if not _is_time(statement.get("time")):
        raise _time_invalid("time")
    authority = statement["request"].get("authority")
    if not isinstance(authority, str) or not authority:
        raise _invalid("request.authority", "say on what authority (GDPR Art. 17, a pact clause, a sweep...)")
    records = _records(statement["execution"])
    _propagation(statement["propagation"])
    added = {"version": STATEMENT_VERSION, "log_origin": log_origin, "tombstone_id": str(tombstone_id)}
    if not statement.keys().isdisjoint(ADDED_FIELDS):
        for name, value in added.items():
            if name in statement and statement[name] != value:
                raise _invalid(name, f"is set by the tombstone service (would be {value!r})")
    return {**statement, **added}, records


def statement_bytes(statement: dict) -> bytes:
    """The canonical bytes, refused if any object in the statement has a content or salt field.

    In canonical JSON an unescaped `"` only delimits strings and a key is the only string followed by
    `:`, so a byte search for `"content":` finds exactly the keys named `content`, at C speed; the
    walk then names where it is.
    """
    try:
        payload = canonical_json(statement)
    except CanonicalizationError as exc:
        raise _invalid(exc.path.removeprefix("(root)"), exc.problem) from None
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
    for record_id, salt in salts.items():
        if record_id not in known:
            raise TombstoneError("salts_invalid", f"Salt for record {record_id!r}, which the statement does not list.",
                                 {"record_id": record_id})
        if not isinstance(salt, str) or not SALT.fullmatch(salt):
            raise TombstoneError("salts_invalid", "A salt is 16 random bytes as 32 hex characters.",
                                 {"record_id": record_id})
    return salts
