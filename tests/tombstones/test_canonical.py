"""The statement bytes are RFC 8785: the fast path must never differ from the `rfc8785` package."""
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

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
