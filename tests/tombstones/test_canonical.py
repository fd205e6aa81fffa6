"""The statement bytes are RFC 8785: the fast path must never differ from the `rfc8785` package."""
from contextlib import contextmanager
from unittest import mock

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tombstones import canonical
from tombstones.canonical import MAX_SAFE_INTEGER, CanonicalizationError, _check, _plain, canonical_json

scalars = (st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
           | st.text(st.characters(exclude_categories=["Cs"])))
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"]), max_size=6), children, max_size=5),
    max_leaves=30,
)


@given(documents)
@settings(max_examples=400, deadline=None)
def test_fast_canonical_form_never_differs_from_rfc8785(document):
    assert canonical_json(document) == rfc8785.dumps(document)


@given(st.dictionaries(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E)), scalars, max_size=8))
def test_ascii_keys_with_control_and_unicode_values_match_rfc8785(document):
    document["v"] = "tab\tnl\nquote\"back\\ctl\x01del\x7f\u2028é😀"
    assert canonical_json(document) == rfc8785.dumps(document)


def test_keys_outside_the_bmp_sort_by_utf16_code_units_not_code_points():
    document = {"\ue000": 1, "\U0001f600": 2, "a": 3}
    assert canonical_json(document) == rfc8785.dumps(document)
    assert canonical_json(document).index("😀".encode()) < canonical_json(document).index("\ue000".encode())


@pytest.mark.parametrize("value, path", [
    ({"execution": {"records": [{"score": 0.5}]}}, "execution.records[0].score"),
    ({"n": 2**53}, "n"),
    ({"n": -(2**53)}, "n"),
    ({"s": "\ud800"}, "s"),
    ({1: "non-string key"}, "(root)"),
    ({"b": b"bytes"}, "b"),
])
def test_values_outside_the_statement_domain_are_refused_with_their_path(value, path):
    with pytest.raises(CanonicalizationError) as caught:
        canonical_json(value)
    assert caught.value.path == path


# Wider than the domain: floats, integers past ±(2**53 - 1), tuples, non-string keys, bytes, lone surrogates.
wild_scalars = (scalars | st.floats(allow_nan=False) | st.integers() | st.binary(max_size=3)
                | st.text(st.characters(), max_size=3))
wild_documents = st.recursive(
    wild_scalars,
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=4) | st.integers(-3, 3) | st.booleans() | st.none(), children, max_size=4),
    max_leaves=20,
)


@given(wild_documents)
@settings(max_examples=600, deadline=None)
def test_fast_path_accepts_nothing_the_domain_walk_refuses(document):
    """`canonical_json` refuses exactly what `_check` refuses, at the same path, and otherwise is RFC 8785."""
    try:
        _check(document, "")
    except CanonicalizationError as refused:
        with pytest.raises(CanonicalizationError) as caught:
            canonical_json(document)
        assert caught.value.path == refused.path
    else:
        assert canonical_json(document) == rfc8785.dumps(document)


@pytest.mark.parametrize("document", [
    {"n": 2**53 - 1, "m": -(2**53 - 1), "l": [True, False, None, "", 0]},
    [{"a": {"b": [[], {}]}}],
])
def test_plain_documents_take_the_fast_path(document):
    assert _plain(document)
    assert canonical_json(document) == rfc8785.dumps(document)


@pytest.mark.parametrize("document", [
    {"n": 2**53}, {"f": 1.0}, {"t": (1,)}, {1: "a"}, {"b": b""}, [{"deep": [{"x": 0.5}]}],
])
def test_documents_outside_plain_json_types_go_to_the_domain_walk(document):
    assert not _plain(document)


REAL_RFC8785_DUMPS = rfc8785.dumps


@contextmanager
def orjson_only():
    """canonical_json with its fallbacks (json.dumps, the rfc8785 package) made to fail: what it answers
    then is orjson's output, so comparing it with the real `rfc8785.dumps` tests orjson's bytes."""
    def unexpected(*args, **kwargs):
        raise AssertionError("left the orjson path")

    with mock.patch.object(canonical, "_dumps", unexpected), mock.patch.object(canonical.rfc8785, "dumps", unexpected):
        yield


any_text = st.text(st.characters(exclude_categories=["Cs"]))  # every code point but the surrogates
ascii_keys = st.text(st.characters(max_codepoint=0x7F))  # control characters included
statement_like = st.recursive(
    st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | any_text
    | st.sampled_from(["\x00\x1f\x7f", "\b\t\n\f\r\x0b", "\"\\/", "\u2028\u2029", "é😀\ufeff\uffff"]),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(ascii_keys, children, max_size=6),
    max_leaves=40,
)


@given(st.dictionaries(ascii_keys, statement_like, max_size=8))
@settings(max_examples=300, deadline=None)
def test_orjson_bytes_are_rfc8785_for_ascii_keys_and_any_strings(document):
    """orjson's escaping and key order, checked against the rfc8785 package: control characters as \\uXXXX
    in lowercase hex except \\b \\t \\n \\f \\r, `"` and `\\` escaped, `/` and non-ASCII as they are, no
    whitespace, keys in UTF-16 order (ASCII: byte order), integers at the edges of the safe range."""
    with orjson_only():
        payload = canonical_json(document)
    assert payload == REAL_RFC8785_DUMPS(document)


@pytest.mark.parametrize("document", [
    {"n": MAX_SAFE_INTEGER, "m": -MAX_SAFE_INTEGER, "z": 0, "t": True, "f": False, "nil": None},
    {"ctl": "".join(map(chr, range(0x20))) + "\x7f", "q": "\"\\/", "u": "é\u2028😀", "k\x01": [[], {}]},
    {"b": {"a": [{"d": 1, "c": [2, {"f": None, "e": ""}]}]}, "a": "z", "A": "Z", "_": "", "0": ""},
])
def test_typical_and_edge_documents_go_through_orjson_and_match_rfc8785(document):
    with orjson_only():
        payload = canonical_json(document)
    assert payload == REAL_RFC8785_DUMPS(document)


def test_non_ascii_keys_never_take_the_orjson_order():
    """orjson orders keys by code points, RFC 8785 by UTF-16 code units: they differ past the BMP."""
    document = {"\ue000": "x", "\U0001f600": "y"}
    assert canonical_json(document) == rfc8785.dumps(document)
    assert canonical_json(document) != canonical.orjson.dumps(document, option=canonical._ORJSON_OPTIONS)
