"""The log: stored nodes give the RFC 9162 root and proofs; appends are serialized and O(log n)."""
import threading
import uuid

import pytest
from django.db import connection, transaction

from tombstones import merkle
from tombstones.dsse import pae
from tombstones.models import LogHead, LogNode, Tombstone
from tombstones.selectors import consistency_proof_get, inclusion_proof_get, log_root_at
from tombstones.services import TombstoneRequest, log_lock, tombstone_issue, tombstones_issue_many

from .factories import TenantFactory, statement_make
from .test_merkle import mth


def leaves_in_log() -> list[bytes]:
    return [pae(t.payload_type, bytes(t.payload)) for t in Tombstone.objects.order_by("leaf_index")]


def issue_many(tenant, count: int) -> None:
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(count)]
    with transaction.atomic():
        tombstones_issue_many(requests=requests)


@pytest.mark.django_db
def test_head_root_and_every_stored_prefix_root_match_the_rfc_definition(tenant):
    issue_many(tenant, 37)
    leaves = leaves_in_log()
    head = LogHead.objects.get(pk=1)
    assert head.size == 37 and bytes(head.root) == mth(leaves)
    for size in (1, 2, 3, 8, 16, 31, 37):
        assert log_root_at(tree_size=size) == mth(leaves[:size])


@pytest.mark.django_db
def test_stored_nodes_are_about_one_per_entry_and_no_leaves(tenant):
    """The leaves are the tombstones' own hashes: storing them again as nodes was a row per tombstone more."""
    issue_many(tenant, 64)
    assert LogNode.objects.count() == 63  # a perfect tree of 64 leaves: every inner node once
    assert not LogNode.objects.filter(level=0).exists()
    stored = {(level, index): bytes(hash_) for level, index, hash_ in LogNode.objects.values_list(
        "level", "node_index", "hash")}
    leaves = [merkle.leaf_hash(leaf) for leaf in leaves_in_log()]
    assert stored == {(level, index): merkle.range_hash(index << level, (index + 1) << level, _leaves_as_nodes(leaves))
                      for level in range(1, 7) for index in range(64 >> level)}


def _leaves_as_nodes(leaf_hashes: list[bytes]) -> dict:
    """Every node of the tree over these leaf hashes, as `merkle.range_hash` reads them."""
    nodes, frontier = {}, []
    for index, leaf in enumerate(leaf_hashes):
        created, frontier = merkle.append(index, frontier, leaf)
        nodes.update({(level, node): hash_ for level, node, hash_ in created})
    return nodes


@pytest.mark.django_db
def test_a_log_that_still_holds_level_0_nodes_gives_the_same_proofs(tenant):
    """Logs written before the leaves were left out hold level-0 rows; proofs now read the leaves from the
    tombstones, so a wrong or stale level-0 row cannot change a proof."""
    issue_many(tenant, 5)
    leaves = leaves_in_log()
    LogNode.objects.bulk_create([LogNode(level=0, node_index=index, hash=b"\xee" * 32) for index in range(5)])
    root = mth(leaves)
    for index in range(5):
        proof = inclusion_proof_get(leaf_index=index, tree_size=5)
        assert merkle.verify_inclusion(index, 5, merkle.leaf_hash(leaves[index]), proof, root)
    assert log_root_at(tree_size=5) == root and log_root_at(tree_size=3) == mth(leaves[:3])


@pytest.mark.django_db
def test_every_inclusion_and_consistency_proof_from_storage_verifies(tenant):
    issue_many(tenant, 21)
    leaves = leaves_in_log()
    for size in range(1, 22):
        root = mth(leaves[:size])
        for index in range(size):
            proof = inclusion_proof_get(leaf_index=index, tree_size=size)
            assert merkle.verify_inclusion(index, size, merkle.leaf_hash(leaves[index]), proof, root)
        for first in range(1, size + 1):
            proof = consistency_proof_get(first=first, second=size)
            assert merkle.verify_consistency(first, size, mth(leaves[:first]), root, proof)


@pytest.mark.django_db
def test_a_proof_reads_the_stored_nodes_and_its_leaves_in_one_query(tenant, django_assert_num_queries):
    issue_many(tenant, 300)
    with django_assert_num_queries(2):  # the log size, then the nodes
        inclusion_proof_get(leaf_index=123, tree_size=300)
    with django_assert_num_queries(2):
        consistency_proof_get(first=77, second=300)


@pytest.mark.django_db(transaction=True)
def test_locking_the_log_outside_a_transaction_is_refused():
    """Outside a transaction the lock would end at once and two appends could take the same index."""
    with pytest.raises(RuntimeError):
        log_lock()


@pytest.mark.django_db
def test_append_recreates_the_head_of_a_flushed_database(tenant):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE tombstones_loghead DISABLE TRIGGER USER")
        cursor.execute("DELETE FROM tombstones_loghead")
        cursor.execute("ALTER TABLE tombstones_loghead ENABLE TRIGGER USER")
    issue_many(tenant, 2)
    assert LogHead.objects.get(pk=1).size == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_issues_get_gapless_unique_indices_and_one_consistent_tree():
    tenant = TenantFactory()
    errors = []

    def worker():
        try:
            for _ in range(5):
                statement, salts = statement_make()
                with transaction.atomic():
                    tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                    subject_salts=salts)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert list(Tombstone.objects.order_by("leaf_index").values_list("leaf_index", flat=True)) == list(range(30))
    assert bytes(LogHead.objects.get(pk=1).root) == mth(leaves_in_log())
