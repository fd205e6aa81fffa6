"""Issuing: what reaches storage, what is refused before anything is stored, and what stays private."""
import base64
import copy
import json
import re
import uuid

import psycopg
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import other_connection
from tombstones.dsse import PAYLOAD_TYPE, pae
from tombstones.errors import TombstoneError
from tombstones.jwk import thumbprint
from tombstones.models import LogHead, LogNode, SigningKey, Tombstone, TombstoneSalts
from tombstones.services import IssuedTombstone, TombstoneRequest, tombstone_issue, tombstones_issue_many
from tombstones.services import keys as keys_service
from tombstones.services.rows import INSERT_MAX_ROWS

from .factories import TenantFactory, statement_make, tombstone_make

pytestmark = pytest.mark.django_db


def issue(tenant, statement, salts=None, tombstone_id=None):
    with transaction.atomic():
        return tombstone_issue(tombstone_id=tombstone_id or uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                               subject_salts=salts)


def test_stored_payload_is_the_rfc8785_form_of_the_completed_statement(tenant, settings):
    statement, salts = statement_make()
    tombstone_id = uuid.uuid4()
    issue(tenant, statement, salts, tombstone_id)
    stored = Tombstone.objects.get(pk=tombstone_id)
    expected = {**statement, "version": 2, "log_origin": settings.LEDGER_LOG_ORIGIN, "tombstone_id": str(tombstone_id)}
    assert bytes(stored.payload) == rfc8785.dumps(expected)
    assert stored.payload_type == PAYLOAD_TYPE
    key = SigningKey.objects.get(pk=stored.key_id)
    assert key.kid == thumbprint(bytes(key.public_key))


def test_signature_covers_the_dsse_pae_of_the_stored_payload(tenant):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    tombstone = tombstone_make(tenant)
    stored = Tombstone.objects.select_related("key").get(pk=tombstone.pk)
    Ed25519PublicKey.from_public_bytes(bytes(stored.key.public_key)).verify(
        bytes(stored.signature), pae(stored.payload_type, bytes(stored.payload)))


def test_salts_are_stored_apart_and_never_in_the_signed_payload(tenant):
    statement, salts = statement_make()
    tombstone = issue(tenant, statement, salts)
    payload = bytes(Tombstone.objects.get(pk=tombstone.pk).payload)
    for salt in salts.values():
        assert salt.encode() not in payload
    assert TombstoneSalts.objects.get(tombstone=tombstone).salts == salts


def test_content_never_reaches_the_payload(tenant):
    tombstone = tombstone_make(tenant, contents=["secret-content-7f3a"])
    assert b"secret-content-7f3a" not in bytes(Tombstone.objects.get(pk=tombstone.pk).payload)


def _set(statement, path, value):
    target = statement
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


@pytest.mark.parametrize("path, value, field", [
    (("execution", "records", 0, "score"), 0.5, "execution.records[0]"),
    (("execution", "size"), 0.5, "execution.size"),
    (("execution", "count"), 2**60, "execution.count"),
    (("execution", "records", 0, "content"), "the data itself", "execution.records[0]"),
    (("scope", "target", "content"), "the data itself", "scope.target"),
    (("scope", "target"), {"scope": "user:carol@example.com"}, "scope.target"),
    (("request", "reason"), "Carol asked us by phone", "request.reason"),
    (("request", "actor"), "token:abcd1234", "request.actor"),
    (("execution", "records", 0, "commitment"), "not-hex", "execution.records[0].commitment"),
    (("execution", "records", 0, "record_id"), 12, "execution.records[0].record_id"),
    (("request", "authority"), "", "request.authority"),
    (("time",), "yesterday", "time"),
    (("time",), "2025-12-02T10:00:00", "time"),
    (("tombstone_id",), "00000000-0000-0000-0000-000000000000", "tombstone_id"),
    (("log_origin",), "another.log/x", "log_origin"),
    (("version",), 1, "version"),
    (("extra",), "field", "extra"),
    (("propagation", "deferred", 0, "deadline"), "soon", "propagation.deferred[0].deadline"),
    (("propagation", "derivatives", 0, "artifact_id"), 77, "propagation.derivatives[0].artifact_id"),
])
def test_statement_outside_the_schema_is_refused_before_anything_is_stored(tenant, path, value, field):
    statement, salts = statement_make()
    _set(statement, path, value)
    with pytest.raises(TombstoneError) as caught:
        issue(tenant, statement, salts)
    assert caught.value.code == "statement_invalid"
    assert caught.value.extra["field"] == field
    assert caught.value.status_code == 400
    assert not Tombstone.objects.exists() and not LogNode.objects.exists()


@pytest.mark.parametrize("salts", [{"9999": "00" * 16}, {"1000": "short"}, {"1000": "zz" * 16}])
def test_bad_subject_salts_are_refused(tenant, salts):
    statement, _ = statement_make()
    with pytest.raises(TombstoneError) as caught:
        issue(tenant, statement, salts)
    assert caught.value.code == "salts_invalid"


def test_forget_rolled_back_after_issue_leaves_no_tombstone_and_no_log_entry(tenant):
    statement, salts = statement_make()
    with pytest.raises(RuntimeError), transaction.atomic():
        tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement, subject_salts=salts)
        raise RuntimeError("the forget's destructive statement failed")
    assert not Tombstone.objects.exists()
    assert not LogNode.objects.exists()
    assert LogHead.objects.get(pk=1).size == 0


def test_reissuing_the_same_statement_returns_the_stored_tombstone_not_a_second_entry(tenant):
    statement, salts = statement_make()
    tombstone_id = uuid.uuid4()
    first = issue(tenant, statement, salts, tombstone_id)
    again = issue(tenant, copy.deepcopy(statement), salts, tombstone_id)
    assert again.pk == first.pk and again.leaf_index == first.leaf_index
    assert Tombstone.objects.count() == 1 and LogHead.objects.get(pk=1).size == 1


def test_the_same_id_twice_in_one_call_is_a_conflict_and_nothing_is_stored(tenant):
    statement, _ = statement_make()
    tombstone_id = uuid.uuid4()
    requests = [TombstoneRequest(tombstone_id=tombstone_id, tenant_id=tenant.id, statement=statement)] * 2
    with pytest.raises(TombstoneError) as caught:
        tombstones_issue_many(requests=requests)
    assert caught.value.code == "tombstone_conflict" and not Tombstone.objects.exists()


def test_reissuing_an_id_with_another_statement_is_a_conflict(tenant):
    statement, salts = statement_make()
    tombstone_id = uuid.uuid4()
    issue(tenant, statement, salts, tombstone_id)
    statement["execution"]["records"][0]["outcome"] = "hidden"
    with pytest.raises(TombstoneError) as caught:
        issue(tenant, statement, salts, tombstone_id)
    assert (caught.value.code, caught.value.status_code) == ("tombstone_conflict", 409)
    assert LogHead.objects.get(pk=1).size == 1


def test_issue_outside_a_transaction_still_stores_and_logs_atomically(tenant):
    statement, salts = statement_make()
    tombstone = tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                subject_salts=salts)
    assert Tombstone.objects.filter(pk=tombstone.pk, leaf_index=0).exists()


def test_issue_many_appends_in_order_with_gapless_indices(tenant):
    tombstone_make(tenant)
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(5)]
    with transaction.atomic():
        issued = tombstones_issue_many(requests=requests)
    assert [t.leaf_index for t in issued] == [1, 2, 3, 4, 5]
    assert list(Tombstone.objects.order_by("leaf_index").values_list("leaf_index", flat=True)) == list(range(6))


def test_issue_is_a_constant_number_of_queries_whatever_the_log_size(tenant, django_assert_num_queries):
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(300)]
    with transaction.atomic():
        tombstones_issue_many(requests=requests)
    statement, salts = statement_make()
    # the head's lock, with the checks that the id is new and the key still current; then nodes, head,
    # tombstone and salts in one query (SQLite, in-process with no round trips to save: one per table)
    with django_assert_num_queries(2 if connection.vendor == "postgresql" else 5):
        tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement, subject_salts=salts)


def test_payload_decodes_to_the_statement_with_records_as_given(tenant):
    statement, salts = statement_make()
    tombstone = issue(tenant, statement, salts)
    decoded = json.loads(base64.b64decode(base64.b64encode(bytes(tombstone.payload))))
    assert decoded["execution"]["records"] == statement["execution"]["records"]


def test_statement_in_the_shape_the_memory_forget_writes_is_accepted(tenant):
    """Extra context (tenant id, handle), refusal reasons, held items without a deadline, a microsecond time."""
    statement, salts = statement_make()
    statement["scope"]["tenant_id"] = str(tenant.pk)
    statement["execution"]["handle"] = "17"
    statement["execution"]["records"][1].update(outcome="refused", reason="legal_hold")
    statement["propagation"]["deferred"].append(
        {"item": "record:1001", "action": "purge_content", "deadline": None, "awaiting": "legal_hold_release"})
    statement["time"] = "2025-12-02T10:00:00.123456+00:00"
    tombstone = issue(tenant, statement, {"1000": salts["1000"]})
    assert json.loads(bytes(tombstone.payload))["propagation"]["deferred"][1]["deadline"] is None


def test_key_rotated_by_another_process_is_noticed_under_the_lock_and_the_new_key_signs(tenant):
    """The signing key is cached per process; a rotation elsewhere must not leave this process signing with
    the retired key."""
    first = tombstone_make(tenant)
    old = SigningKey.objects.get(pk=first.key_id)
    # Given another process's rotation: done in the database, behind this process's back (no cache update)
    with transaction.atomic():
        SigningKey.objects.filter(pk=old.pk).update(retired_at=timezone.now())
        new = keys_service._key_create(purpose=old.purpose, actor="another process", now=timezone.now())
    keys_service._current_keys[old.purpose] = old
    # When this process issues again
    tombstone = tombstone_make(tenant)
    # Then the stored tombstone is signed by the new key, and the signature verifies with it
    stored = Tombstone.objects.get(pk=tombstone.pk)
    assert stored.key_id == new.pk != old.pk
    Ed25519PublicKey.from_public_bytes(bytes(new.public_key)).verify(
        bytes(stored.signature), pae(PAYLOAD_TYPE, bytes(stored.payload)))


def test_every_signature_of_a_copy_sized_batch_verifies_with_the_key_that_is_stored(tenant):
    """A large batch signs part of its statements while the COPY streams: each stored signature must still
    be over its own payload, by the stored key, in log order."""
    count = 2 * INSERT_MAX_ROWS + 3
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(count)]
    with transaction.atomic():
        issued = tombstones_issue_many(requests=requests)
    stored = Tombstone.objects.select_related("key").order_by("leaf_index")
    assert [t.pk for t in stored] == [r.tombstone_id for r in requests] == [t.tombstone_id for t in issued]
    assert [t.leaf_index for t in stored] == list(range(count))
    for tombstone in stored:
        public = Ed25519PublicKey.from_public_bytes(bytes(tombstone.key.public_key))
        public.verify(bytes(tombstone.signature), pae(PAYLOAD_TYPE, bytes(tombstone.payload)))


def test_a_copy_sized_batch_after_a_rotation_elsewhere_is_signed_whole_by_the_new_key(tenant):
    """A large batch signs under the lock, as its COPYs stream: after another process's rotation, every
    signature (those made between node rows, salts rows and tombstone rows alike) is by the new key."""
    old = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    with transaction.atomic():
        SigningKey.objects.filter(pk=old.pk).update(retired_at=timezone.now())
        new = keys_service._key_create(purpose=old.purpose, actor="another process", now=timezone.now())
    keys_service._current_keys[old.purpose] = old
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                 subject_salts=salts if index % 3 else None)
                for index, (statement, salts) in enumerate(statement_make() for _ in range(3 * INSERT_MAX_ROWS))]
    with transaction.atomic():
        tombstones_issue_many(requests=requests)
    public = Ed25519PublicKey.from_public_bytes(bytes(new.public_key))
    stored = Tombstone.objects.filter(leaf_index__gte=1).order_by("leaf_index")
    assert len(stored) == len(requests) and {t.key_id for t in stored} == {new.pk}
    for tombstone in stored:
        public.verify(bytes(tombstone.signature), pae(PAYLOAD_TYPE, bytes(tombstone.payload)))


def test_salts_written_by_copy_are_jsonb_objects_equal_to_those_given(tenant):
    """A COPY-sized batch sends its salts as jsonb's binary input made by orjson: what is stored must be the
    same object (record ids of up to 20 digits included), and a JSON object in SQL."""
    requests = []
    for index in range(2 * INSERT_MAX_ROWS + 1):
        statement, salts = statement_make()
        odd_id = str(10**19 + index)
        statement["execution"]["records"][0]["record_id"] = odd_id
        salts[odd_id] = salts.pop("1000")
        requests.append(TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                         subject_salts=salts))
    with transaction.atomic():
        tombstones_issue_many(requests=requests)
    stored = dict(TombstoneSalts.objects.values_list("tombstone_id", "salts"))
    assert stored == {request.tombstone_id: request.subject_salts for request in requests}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM tombstones_tombstonesalts WHERE jsonb_typeof(salts) = 'object' "
                           "AND salts ->> '1001' ~ '^[0-9a-f]{32}$'")
            assert cursor.fetchone()[0] == len(requests)


@pytest.mark.parametrize("changed", [False, True])
def test_a_copy_sized_batch_partly_issued_before_is_a_conflict_and_the_log_is_unchanged(tenant, changed):
    """A COPY-sized batch learns that an id was issued before from the primary key, inside a savepoint: it
    must answer `tombstone_conflict` (whether or not that statement changed: the others are new) and store
    nothing new."""
    issued_before, _ = statement_make()
    old_id = uuid.uuid4()
    with transaction.atomic():
        tombstone_issue(tombstone_id=old_id, tenant_id=tenant.id, statement=issued_before)
    if changed:
        issued_before["execution"]["records"][0]["outcome"] = "hidden"
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                 subject_salts=salts) for statement, salts in
                (statement_make() for _ in range(2 * INSERT_MAX_ROWS))]
    requests.insert(7, TombstoneRequest(tombstone_id=old_id, tenant_id=tenant.id, statement=issued_before))
    with transaction.atomic():
        with pytest.raises(TombstoneError) as caught:
            tombstones_issue_many(requests=requests)
        assert caught.value.code == "tombstone_conflict"
    assert Tombstone.objects.count() == 1 and LogHead.objects.get(pk=1).size == 1
    assert not LogNode.objects.exists() and not TombstoneSalts.objects.exists()  # one leaf: no node yet


def test_a_copy_sized_batch_with_a_genuine_integrity_error_raises_it(tenant):
    """Only a reissue is answered from storage; another violation (here: a log node stored already, as a
    broken log would have it) must surface, not pass for a conflict."""
    from django.db import IntegrityError

    LogNode.objects.create(level=1, node_index=5, hash=b"\0" * 32)  # what leaves 10 and 11 make
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(2 * INSERT_MAX_ROWS)]
    with pytest.raises(IntegrityError), transaction.atomic():
        tombstones_issue_many(requests=requests)
    assert not Tombstone.objects.exists() and LogHead.objects.get(pk=1).size == 0


@pytest.mark.parametrize("count", [1, 2 * INSERT_MAX_ROWS + 1])
def test_a_tombstone_for_a_tenant_that_does_not_exist_is_refused_and_nothing_is_stored(tenant, count):
    """No foreign-key constraint checks the tenant any more (migration 0005): the issuer does, under the lock."""
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id if index else tenant.id + 10_000,
                                 statement=statement_make()[0]) for index in range(count)]
    with pytest.raises(TombstoneError) as caught, transaction.atomic():
        tombstones_issue_many(requests=requests)
    assert (caught.value.code, caught.value.status_code) == ("tenant_not_found", 400)
    assert not Tombstone.objects.exists() and not LogNode.objects.exists() and LogHead.objects.get(pk=1).size == 0


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_tenant_cannot_be_deleted_while_a_tombstone_naming_it_is_being_issued(transactional_db):
    """The issuer's check holds the tenant's row (FOR KEY SHARE, as a foreign-key check did) until its
    transaction ends: a DELETE from another connection waits, where it would otherwise pass the trigger (which
    cannot see the uncommitted tombstone) and leave the tombstone naming nothing."""
    tenant = TenantFactory()
    other = other_connection(autocommit=True)
    try:
        with transaction.atomic():
            tombstone_make(tenant)
            other.execute("SET lock_timeout = '300ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("DELETE FROM memory_tenant WHERE id = %s", [tenant.pk])
        with pytest.raises(psycopg.errors.ForeignKeyViolation):  # committed: now the trigger sees it
            other.execute("DELETE FROM memory_tenant WHERE id = %s", [tenant.pk])
    finally:
        other.close()
    assert Tombstone.objects.filter(tenant_id=tenant.pk).count() == 1


@pytest.mark.parametrize("count", [3, 2 * INSERT_MAX_ROWS + 1])
def test_issue_many_answers_ids_and_log_indices_not_model_instances(tenant, count):
    """Callers keep a handle (id, index) per request; the answer must say where each one is in the log."""
    tombstone_make(tenant)
    requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement_make()[0])
                for _ in range(count)]
    with transaction.atomic():
        issued = tombstones_issue_many(requests=requests)
    assert all(type(item) is IssuedTombstone for item in issued)
    stored = dict(Tombstone.objects.values_list("id", "leaf_index"))
    assert [(item.tombstone_id, item.leaf_index) for item in issued] == [
        (request.tombstone_id, stored[request.tombstone_id]) for request in requests]
    assert [item.leaf_index for item in issued] == list(range(1, count + 1))
    # issuing the same batch again stores nothing and answers the same handles
    with transaction.atomic():
        assert tombstones_issue_many(requests=requests) == issued
    assert Tombstone.objects.count() == count + 1


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_one_tombstone_is_stored_whole_with_server_side_binding_too(transactional_db, settings):
    """With server-side binding (an OPTIONS setting) one query holds one command: the writes go one by one."""
    tenant = TenantFactory()
    connection.close()
    connection.settings_dict.setdefault("OPTIONS", {})["server_side_binding"] = True
    try:
        tombstone_make(tenant)
        tombstone = tombstone_make(tenant)  # the second leaf completes the log's first stored node
        assert not isinstance(connection.connection.cursor(), psycopg.ClientCursor)
    finally:
        connection.close()
        del connection.settings_dict["OPTIONS"]["server_side_binding"]
    stored = Tombstone.objects.get(pk=tombstone.pk)
    assert stored.leaf_index == 1 and TombstoneSalts.objects.filter(tombstone=stored).exists()
    assert LogHead.objects.get(pk=1).size == 2 and list(LogNode.objects.values_list("level", "node_index")) == [(1, 0)]


def test_one_large_tombstone_goes_by_copy_and_is_stored_and_signed_whole(tenant):
    """A 100,000-record forget signs one statement of megabytes: it and its salts are written by COPY, not
    quoted into a query's text; what is stored must still be exactly what was signed."""
    from tombstones.services.rows import COPY_MIN_BYTES

    statement, salts = statement_make([f"record content {i}" for i in range(6_000)])
    tombstone_id = uuid.uuid4()
    with CaptureQueriesContext(connection) as captured:  # COPY goes through the driver: not captured
        issue(tenant, statement, salts, tombstone_id)
    if connection.vendor == "postgresql":
        quoted = [q["sql"][:200] for q in captured
                  if re.search(r'INSERT INTO "?tombstones_tombstone(salts)?"? ', q["sql"])]
        assert not quoted, "the large payload or its salts were quoted into SQL"
    stored = Tombstone.objects.select_related("key").get(pk=tombstone_id)
    assert len(bytes(stored.payload)) >= COPY_MIN_BYTES
    assert json.loads(bytes(stored.payload))["execution"]["records"] == statement["execution"]["records"]
    Ed25519PublicKey.from_public_bytes(bytes(stored.key.public_key)).verify(
        bytes(stored.signature), pae(PAYLOAD_TYPE, bytes(stored.payload)))
    assert TombstoneSalts.objects.get(tombstone_id=tombstone_id).salts == salts
    assert LogHead.objects.get(pk=1).size == stored.leaf_index + 1
