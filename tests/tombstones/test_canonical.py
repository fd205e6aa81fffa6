"""The statement bytes are RFC 8785: the fast path must never differ from the `rfc8785` package."""
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tombstones.canonical import MAX_SAFE_INTEGER, CanonicalizationError, canonical_json

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
