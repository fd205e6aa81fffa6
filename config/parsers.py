"""The API's one JSON parser: DRF's, with the refusals every endpoint needs before a view sees the body.

- Nesting is bounded. Python's decoder recurses once per level: a body nested ~1,000 deep raises
  `RecursionError` (a 500), and one a little shallower parses but overflows the stack later, in a
  serializer or an encoder. No request of this API nests more than a few levels, so anything deeper than
  `MAX_DEPTH` is `malformed_json`, whatever the endpoint.
- No string holds a NUL character or a lone surrogate (`"\\ud800"`, valid JSON). PostgreSQL's text and
  jsonb cannot store a NUL (`DataError`) and psycopg cannot encode a surrogate (`UnicodeEncodeError`):
  both were 500s wherever such a string reached the database through a field DRF's `CharField` does not
  check (a forget target, a confirm-erasure handle). So either one, in a key or a value at any depth, is
  400 `invalid`, with `errors` naming where it is, as a serializer would.
"""
from __future__ import annotations

import re
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

MAX_DEPTH = 32  # objects and arrays, one inside the other
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_MESSAGE = "NUL and surrogate characters are not allowed."


def _first_problem(data: Any) -> tuple[str, list[str]] | None:
    """Something wrong in a parsed body, found without recursion: ("depth", path) or ("unstorable", path).
    A path holds only keys already found clean (a bad key is reported at its object's path)."""
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, (dict, list)) and len(path) >= MAX_DEPTH:  # the (MAX_DEPTH + 1)th container
            return "depth", path
        if isinstance(value, str):
            if UNSTORABLE.search(value):
                return "unstorable", path
        elif isinstance(value, dict):
            for key, item in value.items():
                if UNSTORABLE.search(key):
                    return "unstorable", path
                stack.append((item, [*path, key]))
        elif isinstance(value, list):
            stack.extend((item, [*path, str(index)]) for index, item in enumerate(value))
    return None


def _nested(path: list[str], message: str) -> dict:
    """{"target": {"subject": [message]}} for the path target.subject, as DRF nests field errors."""
    errors: Any = [message]
    for key in reversed(path or ["non_field_errors"]):
        errors = {key: errors}
    return errors


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        too_deep = f"JSON parse error - nested deeper than {MAX_DEPTH} levels."
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep) from None
        problem = _first_problem(data)
        if problem is not None:
            kind, path = problem
            if kind == "depth":
                raise ParseError(too_deep)
            raise ValidationError(_nested(path, UNSTORABLE_MESSAGE))
        return data
