"""The statement schema (version 2) refuses anything that could name a person, wherever a future path would put
it: every string is an id, a commitment, a time, a tombstone id or a word of `tombstones.vocabulary`."""
import copy
import uuid

import pytest

from tombstones.errors import TombstoneError
from tombstones.services.statement import statement_complete

from .factories import statement_make

NAME = "carol@example.com"
CLOSED_ID = "0b9e1c52-5f3a-4d2e-9a61-7c0f3e8d2b14"
LEAKS = [
    (("scope", "target"), {"scope": f"user:{NAME}"}, "scope.target"),
    (("scope", "target"), {"tag": f"patient-{NAME}"}, "scope.target"),
    (("scope", "target"), {"subject": NAME}, "scope.target"),
    (("scope", "target"), {"subject_ids": [NAME]}, "scope.target"),
    (("scope", "target"), {"scope_id": "12", "record_ids": ["1"]}, "scope.target"),
    (("scope", "target"), {"tag_commitment": "A" * 64}, "scope.target"),
    (("scope", "note"), NAME, "scope.note"),
    (("request", "actor"), "token:ab12cd34", "request.actor"),
    (("request", "actor"), f"admin:{NAME}", "request.actor"),
    (("request", "actor"), "sweep:carol", "request.actor"),
    (("request", "reason"), f"{NAME} asked by phone", "request.reason"),
    (("request", "authority"), f"contract with {NAME}", "request.authority"),
    (("request", "authority"), "retention_rule:carol", "request.authority"),
    (("request", "path"), NAME, "request.path"),
    (("execution", "path"), NAME, "execution.path"),
    (("execution", "note"), NAME, "execution.note"),
    (("execution", "handle"), NAME, "execution.handle"),
    (("execution", "records", 0, "record_id"), NAME, "execution.records[0].record_id"),
    (("execution", "records", 0, "tier"), NAME, "execution.records[0].tier"),
    (("execution", "records", 0, "outcome"), NAME, "execution.records[0].outcome"),
    (("execution", "records", 0, "reason"), NAME, "execution.records[0].reason"),
    (("propagation", "derivatives", 0, "holder"), NAME, "propagation.derivatives[0].holder"),
    (("propagation", "derivatives", 0, "kind"), NAME, "propagation.derivatives[0].kind"),
    (("propagation", "deferred", 0, "holder"), f"agent-of-{NAME}", "propagation.deferred[0].holder"),
    (("propagation", "deferred", 0, "item"), f"copy held by {NAME}", "propagation.deferred[0].item"),
    (("propagation", "deferred", 0, "action"), NAME, "propagation.deferred[0].action"),
    # A fixed id: the test ids are made from these values, and pytest-xdist's processes must collect the same ones.
    (("propagation", "closes"), [{"tombstone_id": CLOSED_ID, "action": "erase", "items": [NAME]}],
     "propagation.closes[0].items"),
    (("propagation", "closes"), [{"tombstone_id": NAME, "action": "erase", "items": ["record:1"]}],
     "propagation.closes[0].tombstone_id"),
    (("propagation", "note"), NAME, "propagation.note"),
]


@pytest.mark.parametrize("path, value, field", LEAKS, ids=[f"{'.'.join(map(str, p))}={str(v)[:30]}" for p, v, _ in LEAKS])
def test_a_statement_that_could_name_someone_is_refused_naming_the_field(path, value, field):
    statement, _ = statement_make()
    target = statement
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = copy.deepcopy(value)
    with pytest.raises(TombstoneError) as refused:
        statement_complete(tombstone_id=uuid.uuid4(), statement=statement, log_origin="ledger.test/tombstones")
    assert refused.value.code == "statement_invalid" and refused.value.extra["field"] == field


@pytest.mark.parametrize("target", [{"record_ids": ["1", "2"]}, {"subject_ids": ["7"]}, {"artifact_ids": ["9"]},
                                    {"scope_id": "12"}, {"tag_commitment": "ab" * 32}])
@pytest.mark.parametrize("actor", ["token:12", "user:3", "request:7", "sweep:compaction", "system:unspecified"])
def test_ids_commitments_and_words_are_accepted(target, actor):
    statement, _ = statement_make()
    statement["scope"] = {"tenant_id": "1", "target": target}
    statement["request"]["actor"] = actor
    statement["request"]["authority"] = "retention_conflict:4"
    complete, _ = statement_complete(tombstone_id=uuid.uuid4(), statement=statement, log_origin="x")
    assert complete["version"] == 2
