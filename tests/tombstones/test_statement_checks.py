"""The statement and salts checks refuse exactly what they refused before they were made faster, naming the
same field: hypothesis mutates valid statements (any field set to any value, or removed) and compares
`tombstones.services.statement` with the earlier implementation kept in `statement_reference.py`."""
import copy
import uuid
from collections import OrderedDict

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tombstones.errors import TombstoneError
from tombstones.services import statement as fast

from . import statement_reference as reference
from .factories import statement_make

ORIGIN = "ledger.test/tombstones"
TOMBSTONE_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")

# Paths that exist in `statement_make()`'s statement, plus some that do not (new keys).
PATHS = [
    (), ("request",), ("request", "authority"), ("request", "actor"), ("scope",), ("scope", "target"),
    ("execution",), ("execution", "records"), ("execution", "records", 0), ("execution", "records", 1),
    ("execution", "records", 0, "record_id"), ("execution", "records", 0, "commitment"),
    ("execution", "records", 1, "outcome"), ("execution", "records", 0, "tier"), ("execution", "records", 0, "reason"),
    ("execution", "records", 1, "extra"), ("execution", "mode"), ("propagation",), ("propagation", "derivatives"),
    ("propagation", "derivatives", 0), ("propagation", "derivatives", 0, "artifact_id"), ("propagation", "deferred"),
    ("propagation", "deferred", 0), ("propagation", "deferred", 0, "deadline"),
    ("propagation", "deferred", 0, "awaiting"), ("time",), ("version",), ("log_origin",), ("tombstone_id",),
    ("extra",), ("scope", "target", "content"), ("execution", "records", 0, "salt"),
]
hexes = st.text("0123456789abcdefABCDEF", min_size=30, max_size=66)
# Values at the edges of what the checks allow, drawn about half of the time.
edges = st.sampled_from(["", "2025-12-02T10:00:00Z", "2025-12-02T10:00:00", "2025-12-02", "GDPR Art. 17", "a" * 64,
                         "A" * 64, "0" * 32, "1000", "1001", 0, 1, None, [], {}, ORIGIN, str(TOMBSTONE_ID)])
values = edges | st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False) | st.text(max_size=8)
    | hexes | edges,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    | st.builds(OrderedDict, st.dictionaries(st.text(max_size=3), children, max_size=2)),
    max_leaves=8,
)
mutations = st.lists(st.tuples(st.sampled_from(PATHS), st.booleans(), values), min_size=1, max_size=3)


def _mutate(document, path, remove, value):
    if not path:
        return None if remove else value
    target = document
    for part in path[:-1]:
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and isinstance(part, int) and part < len(target):
            target = target[part]
        else:
            return document
    last = path[-1]
    if isinstance(target, dict):
        if remove:
            target.pop(last, None)
        else:
            target[last] = value
    elif isinstance(target, list) and isinstance(last, int) and last < len(target):
        if remove:
            del target[last]
        else:
            target[last] = value
    return document


def _outcome(module, statement, salts):
    try:
        complete, records = module.statement_complete(tombstone_id=TOMBSTONE_ID, statement=copy.deepcopy(statement),
                                                      log_origin=ORIGIN)
        checked = module.salts_check(copy.deepcopy(salts), records)
    except TombstoneError as refused:
        return ("refused", refused.code, refused.extra.get("field"), refused.extra.get("record_id"))
    return ("accepted", complete, records, checked)


@given(mutations, st.sampled_from(["valid", "none", "foreign", "bad"]), values)
@settings(max_examples=2500, deadline=None)
def test_mutated_statements_get_the_same_answer_as_before(changes, salts_kind, salts_value):
    statement, salts = statement_make()
    for path, remove, value in changes:
        statement = _mutate(statement, path, remove, value)
    salts = {"valid": salts, "none": None, "foreign": {"9999": "00" * 16}, "bad": {"1000": salts_value}}[salts_kind]
    assert _outcome(fast, statement, salts) == _outcome(reference, statement, salts)


@pytest.mark.parametrize("salt", ["0" * 32, "aB" * 16, "A" * 32, "0" * 31, "0" * 33, "g" * 32, " " + "0" * 31,
                                  "0" * 31 + "\n", "٣" * 32, 12, None])
def test_salts_fast_test_agrees_with_the_pattern(salt):
    records = [{"record_id": "1000"}]
    try:
        reference.salts_check({"1000": salt}, records)
        refused_before = False
    except TombstoneError:
        refused_before = True
    try:
        fast.salts_check({"1000": salt}, records)
        refused_now = False
    except TombstoneError:
        refused_now = True
    assert refused_now == refused_before


@pytest.mark.parametrize("commitment", ["a" * 64, "A" * 64, "a" * 63, "a" * 65, "g" * 64, "a" * 63 + "\n",
                                        "٣" * 64, " " * 64])
def test_commitment_fast_test_agrees_with_the_pattern(commitment):
    statement, _ = statement_make()
    statement["execution"]["records"][0]["commitment"] = commitment
    assert _outcome(fast, statement, None)[:3] == _outcome(reference, statement, None)[:3]


def test_accepted_statement_bytes_are_rfc8785():
    statement, _ = statement_make()
    complete, _ = fast.statement_complete(tombstone_id=TOMBSTONE_ID, statement=statement, log_origin=ORIGIN)
    assert fast.statement_bytes(complete) == rfc8785.dumps(complete)
