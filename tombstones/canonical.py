"""RFC 8785 canonical JSON for tombstone statements (pure: no Django).

The statement domain is restricted: no floats, integers within ±(2**53 - 1) (larger ones travel as
strings), string keys, valid Unicode. In that domain, RFC 8785 is `orjson.dumps` with sorted keys as long as
every key is ASCII: RFC 8785 sorts keys by UTF-16 code units, orjson by code points (UTF-8 bytes), and the two orders agree
on ASCII; orjson escapes strings exactly as RFC 8785 does (`"`, `\\`, and the control characters below
U+0020, as `\\b \\t \\n \\f \\r` or `\\u00xx` in lowercase hex; `/`, DEL and everything else as
UTF-8), with no whitespace. That is ~4× faster than `json.dumps(sort_keys=True)` and ~25× faster than the
`rfc8785` package on a typical statement. Keys with non-ASCII characters go through `rfc8785.dumps`.
`tests/tombstones/test_canonical.py` checks orjson's bytes against the `rfc8785` package on generated
documents (control characters, any Unicode outside the surrogates, nested lists and objects).

The domain check is one walk over the containers that only looks at exact types (`str` keys; `str`, `int`
within range, `bool`, `None`, `dict`, `list` values), building no path strings; orjson itself refuses lone
surrogates (and, with `OPT_STRICT_INTEGER`, integers past ±(2**53 - 1)). Anything else (a float, a large
integer, a tuple, a subclass, a non-string key, a lone surrogate) sends the value to the Python walk `_check`:
to name the offending path, or, when the domain allows it (tuples, subclasses), to serialize it with
`json.dumps`. `test_canonical.py` also checks that the fast path accepts exactly what `_check` accepts.
"""
from __future__ import annotations

import json
from typing import Any

import orjson
import rfc8785

MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalizationError(ValueError):
    """The value is outside the statement domain; `path` says where (`execution.records[0].tier`)."""

    def __init__(self, path: str, problem: str):
        self.path = path or "(root)"
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _check(value: Any, path: str) -> bool:
    """Raise on values outside the domain; return True when every key met is ASCII."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise CanonicalizationError(path, "strings must be valid Unicode (no lone surrogates)") from None
        return True
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return True
        raise CanonicalizationError(path, "integers beyond ±(2**53 - 1) must be given as strings")
    if isinstance(value, float):
        raise CanonicalizationError(path, "floats are not allowed in a statement")
    if isinstance(value, dict):
        ascii_keys = True
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError(path, "object keys must be strings")
            ascii_keys = _check(key, path) and key.isascii() and ascii_keys
            ascii_keys = _check(item, f"{path}.{key}" if path else key) and ascii_keys
        return ascii_keys
    if isinstance(value, (list, tuple)):
        ascii_keys = True
        for index, item in enumerate(value):
            ascii_keys = _check(item, f"{path}[{index}]") and ascii_keys
        return ascii_keys
    raise CanonicalizationError(path, f"values of type {type(value).__name__} are not JSON")


def _plain(value: Any) -> bool:
    """True when `value` is a dict or list made only of exact JSON types (str keys; str, bool, None, int within
    ±(2**53 - 1), dict, list values): then it is in the domain. False means "ask `_check`", not "out of it"."""
    kind = type(value)
    return _plain_dict(value) if kind is dict else kind is list and _plain_list(value)


def plain_without_keys(value: dict, refused_keys: frozenset[str]) -> bool:
    """`_plain` for a dict, and also False when any object in it has a key among `refused_keys`: a caller
    that walks its document part by part (the statement's checks) says with this that `canonical_json`
    need not walk it again (`plain=True`)."""
    return type(value) is dict and _plain_dict(value, refused_keys)


_NO_KEYS: frozenset[str] = frozenset()


# `_plain`'s walk runs once per tombstone: the exact-type tests go in the order values are common in a
# statement (strings, containers, then the rest), and dicts and lists each have their own loop.
def _plain_dict(value: dict, refused_keys: frozenset[str] = _NO_KEYS) -> bool:
    for key in value:
        if type(key) is not str or key in refused_keys:
            return False
    for item in value.values():
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is dict:
            if _plain_dict(item, refused_keys):
                continue
            return False
        if kind is list:
            if _plain_list(item, refused_keys):
                continue
            return False
        if kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            continue
        return False
    return True


def _plain_list(items: list, refused_keys: frozenset[str] = _NO_KEYS) -> bool:
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is dict:
            if _plain_dict(item, refused_keys):
                continue
            return False
        if kind is list:
            if _plain_list(item, refused_keys):
                continue
            return False
        if kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            continue
        return False
    return True


def _keys_ascii(value: Any) -> bool:
    """Every key ASCII, in a value `_plain` accepted (asked only when the bytes are not all ASCII)."""
    if type(value) is dict:
        return all(key.isascii() and _keys_ascii(item) for key, item in value.items())
    if type(value) is list:
        return all(_keys_ascii(item) for item in value)
    return True


_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any, *, plain: bool = False) -> bytes:
    """The RFC 8785 serialization of `value`, as UTF-8 bytes. `plain=True`: the caller has walked `value` and
    found only exact JSON types (`plain_without_keys`, or a check of its own as strict), so it is not walked
    again here."""
    if plain or _plain(value):
        try:
            payload = orjson.dumps(value, option=_ORJSON_OPTIONS)
        except orjson.JSONEncodeError:  # a lone surrogate: `_check` names where
            pass
        else:
            if payload.isascii() or _keys_ascii(value):  # then orjson's key order is RFC 8785's
                return payload
    if _check(value, ""):  # raises CanonicalizationError with the path when out of the domain
        return _dumps(value).encode("utf-8")
    return rfc8785.dumps(value)
