"""The statement checks as they were before they were made faster (commit e368a4c), kept as the oracle
that `test_statement_checks.py` compares `tombstones.services.statement` with; extended, in the same plain
style, with version 2's checks (nothing personal: `tombstones.vocabulary`).

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
from tombstones.vocabulary import (
    ARTIFACT_KINDS,
    AWAITING,
    CLOSE_ACTIONS,
    DEFERRED_ACTIONS,
    DERIVATIVE_OUTCOMES,
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
)
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
        if not is_id(record["record_id"]):
            raise _invalid(f"execution.records[{index}].record_id", "must be a record id (a string of digits)")
        commitment = record["commitment"]
        if not isinstance(commitment, str) or not HEX64.fullmatch(commitment):
            raise _invalid(f"execution.records[{index}].commitment", "must be a lowercase hex SHA-256")
        if not _word(record["outcome"], OUTCOMES):
            raise _invalid(f"execution.records[{index}].outcome", "an outcome")
        if "tier" in record and not _word(record["tier"], TIERS):
            raise _invalid(f"execution.records[{index}].tier", "a tier")
        if "reason" in record and not _word(record["reason"], REFUSAL_CODES):
            raise _invalid(f"execution.records[{index}].reason", "a refusal code")
    return records


def _word(value, words) -> bool:
    return isinstance(value, str) and value in words


def _fields(value: dict, allowed: set, field: str) -> None:
    for key in sorted(value, key=str):
        if key not in allowed:
            raise _invalid(f"{field}.{key}", "is not a field of the statement")


def _request(request: dict) -> None:
    if not is_authority(request.get("authority")):
        raise _invalid("request.authority", "an authority from the list")
    if not is_actor(request.get("actor")):
        raise _invalid("request.actor", "role:id")
    if not is_path(request.get("path")):
        raise _invalid("request.path", "a path")
    _fields(request, {"actor", "authority", "path"}, "request")


def _scope(scope: dict) -> None:
    if "tenant_id" in scope and not is_id(scope["tenant_id"]):
        raise _invalid("scope.tenant_id", "an id")
    if not is_target(scope.get("target")):
        raise _invalid("scope.target", "ids or a commitment")
    _fields(scope, {"tenant_id", "target"}, "scope")


def _execution(execution: dict) -> None:
    if not _word(execution.get("mode"), MODES):
        raise _invalid("execution.mode", "a mode")
    if not is_path(execution.get("path")):
        raise _invalid("execution.path", "a path")
    if "handle" in execution and not is_id(execution["handle"]):
        raise _invalid("execution.handle", "an id")
    _fields(execution, {"mode", "path", "handle", "records"}, "execution")


def _propagation(propagation: dict) -> None:
    for index, item in enumerate(_list(propagation.get("derivatives", []), "propagation.derivatives")):
        if type(item) is not dict:
            _dict(item, f"propagation.derivatives[{index}]")
        if not is_id(item.get("artifact_id")):
            raise _invalid(f"propagation.derivatives[{index}].artifact_id", "must be an id")
        if not _word(item.get("kind"), ARTIFACT_KINDS):
            raise _invalid(f"propagation.derivatives[{index}].kind", "a kind")
        if not _word(item.get("outcome"), DERIVATIVE_OUTCOMES):
            raise _invalid(f"propagation.derivatives[{index}].outcome", "an outcome")
        _fields(item, {"artifact_id", "kind", "outcome"}, f"propagation.derivatives[{index}]")
    for index, item in enumerate(_list(propagation.get("deferred", []), "propagation.deferred")):
        if type(item) is not dict:
            _dict(item, f"propagation.deferred[{index}]")
        # An item waiting on an event with no date (a legal hold's release) names it instead of a deadline.
        deadline = item.get("deadline")
        if deadline is None and "awaiting" in item:
            if not _word(item["awaiting"], AWAITING):
                raise _invalid(f"propagation.deferred[{index}].awaiting", "an event")
        elif not _is_time(deadline):
            raise _time_invalid(f"propagation.deferred[{index}].deadline")
        elif "awaiting" in item:
            raise _invalid(f"propagation.deferred[{index}].awaiting", "no deadline")
        if "items" in item:
            if "item" in item or not are_items(item["items"]):
                raise _invalid(f"propagation.deferred[{index}].items", "names")
        elif not is_item(item.get("item")):
            raise _invalid(f"propagation.deferred[{index}].item", "a name")
        if not _word(item.get("action"), DEFERRED_ACTIONS):
            raise _invalid(f"propagation.deferred[{index}].action", "an action")
        _fields(item, {"item", "items", "action", "deadline", "awaiting"}, f"propagation.deferred[{index}]")
    for index, item in enumerate(_list(propagation.get("closes", []), "propagation.closes")):
        if type(item) is not dict:
            _dict(item, f"propagation.closes[{index}]")
        if not is_uuid(item.get("tombstone_id")):
            raise _invalid(f"propagation.closes[{index}].tombstone_id", "a tombstone id")
        if "handle" in item and not is_id(item["handle"]):
            raise _invalid(f"propagation.closes[{index}].handle", "an id")
        if not _word(item.get("action"), CLOSE_ACTIONS):
            raise _invalid(f"propagation.closes[{index}].action", "an action")
        if not are_items(item.get("items")):
            raise _invalid(f"propagation.closes[{index}].items", "names")
        _fields(item, {"tombstone_id", "handle", "action", "items"}, f"propagation.closes[{index}]")
    _fields(propagation, {"derivatives", "deferred", "closes"}, "propagation")


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
    _request(statement["request"])
    _scope(statement["scope"])
    records = _records(statement["execution"])
    _execution(statement["execution"])
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
