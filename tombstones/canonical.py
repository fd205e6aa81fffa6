"""RFC 8785 canonical JSON for tombstone statements (pure: no Django).

The statement domain is restricted: no floats, integers within ±(2**53 - 1) (larger ones travel as
strings), string keys, valid Unicode. In that domain, RFC 8785 is `json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)` as long as every key is ASCII (RFC 8785 sorts keys by UTF-16
code units, Python by code points; the two orders agree on ASCII), and that is ~8× faster than the
`rfc8785` package on a typical statement. Keys with non-ASCII characters go through `rfc8785.dumps`.
`tests/tombstones/test_canonical.py` checks the two agree on generated documents.

The domain check itself is cheap on the common path: one walk over the containers that only looks at
exact types (`str` keys; `str`, `int` within range, `bool`, `None`, `dict`, `list` values), building no
path strings, and then `json.dumps` in C. Anything else (a float, a large integer, a tuple, a subclass, a
non-string key) or text that is not pure ASCII sends the value to the Python walk `_check`: to name the
offending path, or to find out whether every key is ASCII. `test_canonical.py` also checks that the fast
path accepts exactly what `_check` accepts.
"""
from __future__ import annotations

import json
from typing import Any

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


_LEAVES = frozenset({str, bool, type(None)})


def _plain(value: Any) -> bool:
    """True when `value` is a dict or list made only of exact JSON types (str keys; str, bool, None, int within
    ±(2**53 - 1), dict, list values): then it is in the domain. False means "ask `_check`", not "out of it"."""
    if type(value) is dict:
        for key in value:
            if type(key) is not str:
                return False
        items = value.values()
    elif type(value) is list:
        items = value
    else:
        return False
    for item in items:
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if (kind is dict or kind is list) and _plain(item):
            continue
        return False
    return True


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 serialization of `value`, as UTF-8 bytes."""
    if _plain(value):
        text = _dumps(value)
        if text.isascii():  # every key ASCII, so Python's key order is RFC 8785's; no lone surrogates
            return text.encode("ascii")
    if _check(value, ""):  # raises CanonicalizationError with the path when out of the domain
        return _dumps(value).encode("utf-8")
    return rfc8785.dumps(value)
