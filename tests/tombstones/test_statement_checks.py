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
    for path, remove, value in changes:  # a copy: hypothesis may draw one object twice, and a cycle is no JSON
        statement = _mutate(statement, path, remove, copy.deepcopy(value))
    salts = {"valid": salts, "none": None, "foreign": {"9999": "00" * 16}, "bad": {"1000": salts_value}}[salts_kind]
    assert _outcome(fast, statement, salts) == _outcome(reference, statement, salts)


@pytest.mark.parametrize("salt", ["0" * 32, "aB" * 16, "A" * 32, "0" * 31, "0" * 33, "g" * 32, " " + "0" * 31,
                                  "0" * 31 + "\n", "٣" * 32, 12, None, "0a " * 10 + "00", "0a" * 15 + "\t0"])
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
                                        "٣" * 64, " " * 64, "ab " * 21 + "a", "ab" * 31 + " a", "aB" * 32])
def test_commitment_fast_test_agrees_with_the_pattern(commitment):
    statement, _ = statement_make()
    statement["execution"]["records"][0]["commitment"] = commitment
    assert _outcome(fast, statement, None)[:3] == _outcome(reference, statement, None)[:3]


def _long_statement():
    """A statement with lists long enough for the whole-list tests (`statement.COMMON_MIN_ITEMS`)."""
    count = fast.COMMON_MIN_ITEMS + 4
    statement, salts = statement_make([f"note {i}" for i in range(count)])
    statement["propagation"]["derivatives"] = [{"artifact_id": str(i), "kind": "summary", "outcome": "deleted"}
                                               for i in range(count)]
    return statement, salts


# Paths into the long statement's lists: the first, a middle and the last item, and new keys on them.
LONG_PATHS = [(part, index, *rest) for part in (("execution", "records"), ("propagation", "derivatives"))
              for index in (0, 10, fast.COMMON_MIN_ITEMS + 3)
              for rest in [(), ("record_id",), ("commitment",), ("outcome",), ("reason",), ("artifact_id",),
                           ("kind",), ("content",), ("salt",), ("extra",)]]
LONG_PATHS = [(*part, *rest) for part, *rest in LONG_PATHS]
long_mutations = st.lists(st.tuples(st.sampled_from(LONG_PATHS), st.booleans(), values), min_size=1, max_size=3)


@given(long_mutations, st.sampled_from(["valid", "bad"]), values)
@settings(max_examples=1500, deadline=None)
def test_mutated_long_statements_get_the_same_answer_and_bytes_as_before(changes, salts_kind, salts_value):
    """The whole-list tests (`_records_common`, `_derivatives_common`, `_salts_common`) say yes only when the
    item-by-item checks would have accepted, and the refusal then names the same field."""
    statement, salts = _long_statement()
    for path, remove, value in changes:
        statement = _mutate(statement, path, remove, copy.deepcopy(value))
    if salts_kind == "bad":
        salts[sorted(salts)[10]] = salts_value
    assert _outcome(fast, statement, salts) == _outcome(reference, statement, salts)
    assert _payload_outcome(fast, statement) == _payload_outcome(reference, statement)


class _Text(str):
    pass


@pytest.mark.parametrize("path, value", [
    (("execution", "records", 10, "commitment"), "a" * 63 + "A"), (("execution", "records", 10, "commitment"), "a" * 63),
    (("execution", "records", 10, "tier"), 3), (("execution", "records", 10, "reason"), None),
    (("execution", "records", 10, "tier"), _Text("hot")), (("execution", "records", 10), OrderedDict(record_id="1")),
    (("propagation", "derivatives", 10, "content"), "x"), (("propagation", "derivatives", 10), ["not", "a", "dict"]),
    (("propagation", "derivatives", 10, "artifact_id"), 77), (("propagation", "derivatives", 10, "kind"), _Text("x")),
    (("propagation", "derivatives", 10, _Text("kind")), "x"),
])
def test_one_odd_item_in_a_long_list_gets_the_same_answer_as_before(path, value):
    statement, salts = _long_statement()
    statement = _mutate(statement, path, False, value)
    assert _outcome(fast, statement, salts) == _outcome(reference, statement, salts)
    assert _payload_outcome(fast, statement) == _payload_outcome(reference, statement)


def test_a_long_typical_statement_takes_the_whole_list_tests():
    statement, salts = _long_statement()
    records = statement["execution"]["records"]
    assert fast._records_common(records) and fast._derivatives_common(statement["propagation"]["derivatives"])
    assert fast._salts_common(list(salts.values()))
    assert _payload_outcome(fast, statement) == _payload_outcome(reference, statement)


@pytest.mark.parametrize("first, second", [("a" * 63, "a" * 65), ("a" * 64, "a" * 63 + "A"), ("a" * 64, " " + "a" * 63),
                                           ("ab " * 21 + "a", "a" * 64), ("a" * 64, "a" * 64)])
def test_commitments_tested_together_agree_with_the_pattern_one_by_one(first, second):
    """`_records_common` tests all the commitments in one `bytes.fromhex`: lengths that add up, an uppercase or
    a space in one of them must still be refused, on the field of the one that is wrong."""
    statement, _ = _long_statement()
    statement["execution"]["records"][0]["commitment"] = first
    statement["execution"]["records"][10]["commitment"] = second
    assert _outcome(fast, statement, None)[:3] == _outcome(reference, statement, None)[:3]


@pytest.mark.parametrize("first, second", [("0" * 31, "0" * 33), ("0" * 32, "0a " * 10 + "00"), ("0" * 32, 12),
                                           ("0" * 32, ["0"] * 32), ("0" * 32, "0" * 32)])
def test_salts_tested_together_agree_with_the_pattern_one_by_one(first, second):
    """`_salts_common` tests all the salts at once: a wrong one among right ones is still refused, naming it."""
    statement, salts = _long_statement()
    salts.update({"1000": first, "1010": second})
    assert _outcome(fast, statement, salts) == _outcome(reference, statement, salts)


def test_accepted_statement_bytes_are_rfc8785():
    statement, _ = statement_make()
    complete, _ = fast.statement_complete(tombstone_id=TOMBSTONE_ID, statement=statement, log_origin=ORIGIN)
    assert fast.statement_bytes(complete) == rfc8785.dumps(complete)


def _payload_outcome(module, statement):
    """What the issuer signs (or the refusal): `statement_payload` now, `statement_bytes(statement_complete())`
    before it checked and walked in one pass."""
    statement = copy.deepcopy(statement)
    try:
        if module is fast:
            payload, records = fast.statement_payload(tombstone_id=TOMBSTONE_ID, statement=statement, log_origin=ORIGIN)
        else:
            complete, records = reference.statement_complete(tombstone_id=TOMBSTONE_ID, statement=statement,
                                                             log_origin=ORIGIN)
            payload = reference.statement_bytes(complete)
    except TombstoneError as refused:
        return ("refused", refused.code, refused.extra.get("field"))
    return ("accepted", payload, records)


# Forbidden keys and odd values also where the one-pass walk looks part by part.
PAYLOAD_PATHS = PATHS + [("request", "salts"), ("request", "extra"), ("execution", "salt"), ("execution", "path"),
                         ("propagation", "derivatives", 0, "content"), ("propagation", "deferred", 0, "item"),
                         ("scope", "target", "subject"), ("propagation", "extra")]
payload_mutations = st.lists(st.tuples(st.sampled_from(PAYLOAD_PATHS), st.booleans(), values), min_size=1, max_size=3)


@given(payload_mutations)
@settings(max_examples=2500, deadline=None)
def test_mutated_statements_get_the_same_signed_bytes_or_refusal_as_before(changes):
    statement, _ = statement_make()
    for path, remove, value in changes:  # a copy: hypothesis may draw one object twice, and a cycle is no JSON
        statement = _mutate(statement, path, remove, copy.deepcopy(value))
    assert _payload_outcome(fast, statement) == _payload_outcome(reference, statement)


def test_a_typical_statement_is_canonicalized_without_a_second_walk_or_search(monkeypatch):
    """The checks judge it plain JSON on their way: canonicalization's own walk and the search for forbidden keys
    must not run again (they cost ~4 µs of a tombstone's ~60)."""
    from tombstones import canonical

    def walked_again(*args):
        raise AssertionError("walked again")

    monkeypatch.setattr(canonical, "_plain", walked_again)
    monkeypatch.setattr(fast, "_no_forbidden_keys", walked_again)
    monkeypatch.setattr(fast, "FORBIDDEN_MARKS", ())  # the search would find nothing, but it must not matter
    statement, _ = statement_make()
    payload, records = fast.statement_payload(tombstone_id=TOMBSTONE_ID, statement=statement, log_origin=ORIGIN)
    complete, _ = reference.statement_complete(tombstone_id=TOMBSTONE_ID, statement=statement, log_origin=ORIGIN)
    assert payload == rfc8785.dumps(complete) and records == statement["execution"]["records"]


@pytest.mark.parametrize("path, value, plain", [
    (("execution", "records", 0, "tier"), _Text("hot"), False), (("request", "path"), _Text("api"), False),
    (("propagation", "deferred", 0), OrderedDict(item="fleet_copy:79", action="acknowledge",
                                                 deadline="2026-03-01T00:00:00Z"), False),
    (("scope", "target"), OrderedDict(record_ids=["1000"]), False), (("scope", "target", "subject_ids"), ["42"], True),
])
def test_anything_but_plain_json_leaves_the_one_pass_path(path, value, plain):
    """str and dict subclasses, where the schema takes their value: the one-pass path must hand them to
    canonicalization's walk, which serializes them as it always did."""
    statement, _ = statement_make()
    statement = _mutate(statement, path, False, value)
    assert fast._complete(TOMBSTONE_ID, copy.deepcopy(statement), ORIGIN)[2] is plain
    assert _payload_outcome(fast, statement) == _payload_outcome(reference, statement)


@pytest.mark.parametrize("path, value", [
    (("request", "count"), 1.5), (("scope", "target", "subject"), uuid.UUID(int=7)),
    (("execution", "records", 0, "tier"), ("hot",)), (("propagation", "deferred", 0, "note"), OrderedDict(a="b")),
    (("execution", "mode"), 2**60), (("execution", "records", 0, "reason"), None),
    (("request", "reason"), "\ud800"),
])
def test_values_outside_the_schema_are_refused_as_before(path, value):
    """Floats, UUIDs, tuples, unknown fields, large integers, lone surrogates: refused by the schema's checks,
    naming the same field as the reference checks."""
    statement, _ = statement_make()
    statement = _mutate(statement, path, False, value)
    outcome = _payload_outcome(fast, statement)
    assert outcome[:2] == ("refused", "statement_invalid") and outcome == _payload_outcome(reference, statement)
