"""`receipts_build`: many tombstones' receipts against one checkpoint, with one query per table; each
receipt is genuine on its own, for the server and for the offline verifier."""
import uuid

import pytest

from tombstones.errors import TombstoneError
from tombstones.services import checkpoint_sign, receipt_build, receipts_build, tombstone_verify
from tombstones.verification import GENUINE

from .factories import TenantFactory, tombstone_make
from .test_verification import offline

pytestmark = pytest.mark.django_db


def test_each_receipt_of_a_batch_is_genuine_and_carries_its_own_salts():
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant, contents=[f"content {i}", "shared"]) for i in range(4)]

    receipts = receipts_build(tombstone_ids=[tombstones[2].id, tombstones[0].id, str(tombstones[1].id)])

    assert sorted(receipts) == sorted(str(t.id) for t in tombstones[:3])
    for tombstone in tombstones[:3]:
        receipt = receipts[str(tombstone.id)]
        for report in (tombstone_verify(document=receipt), offline(receipt)):
            assert report.code == GENUINE, report.message
        # The salts prove the subject's own content, and only this tombstone's.
        salt = receipt["salts"][sorted(receipt["salts"])[0]]
        assert offline(receipt, content="content " + str(tombstones.index(tombstone)), salt=salt).coverage.covered
    assert len({r["checkpoint"] for r in receipts.values()}) == 1
    # The one checkpoint is the earliest that covers the last of them: the receipt_build of that one.
    last = receipt_build(tombstone_id=tombstones[2].id)
    assert receipts[str(tombstones[2].id)] == last


def test_a_batch_costs_one_query_per_table_whatever_its_size(django_assert_num_queries):
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant) for _ in range(6)]
    checkpoint_sign()

    with django_assert_num_queries(4):  # tombstones with their keys, the checkpoint, the proofs' nodes, salts
        receipts = receipts_build(tombstone_ids=[t.id for t in tombstones])

    assert len(receipts) == 6


def test_an_unknown_tombstone_fails_the_batch_as_it_fails_one_receipt():
    tombstone = tombstone_make()
    for wrong in (uuid.uuid4(), "not-a-uuid"):
        with pytest.raises(TombstoneError) as missing:
            receipts_build(tombstone_ids=[tombstone.id, wrong])
        assert missing.value.code == "tombstone_not_found"
    assert receipts_build(tombstone_ids=[]) == {}
