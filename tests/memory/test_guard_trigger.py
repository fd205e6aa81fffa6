"""The database guard (memory migration 0003) on PostgreSQL: raw SQL cannot destroy a locked record.

Every attack here bypasses `memory.services`: raw SQL through Django's connection, the ORM's bulk
`.update()`, `QuerySet._raw_delete()`, Django's own collector, a stale `save()`, and a second
connection. Each refusal must reach Python as an `IntegrityError` whose message starts with a stable
code (`legal_hold:` when held, else `retention_lock:`), and must leave storage untouched.
"""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import psycopg
import pytest
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from memory.models import DerivedArtifact, Lineage, Record, RecordTag, Scope, Subject, Tenant
from retention.models import ContentClass
from tests.conftest import other_connection

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql",
                                reason="the PostgreSQL trigger; SQLite is tests/memory/test_guard_sqlite.py")

SEVEN_YEARS = timedelta(days=7 * 366)

PROTECTED_UPDATES = {
    "id": "id = id + 1000000",
    "tenant_id": "tenant_id = %(other_tenant)s",
    "scope_id": "scope_id = %(other_scope)s",
    "subject_id": "subject_id = NULL",
    "content_class_id": "content_class_id = %(other_class)s",
    "created_at": "created_at = created_at - interval '1 day'",
    "commitment": "commitment = repeat('f', 64)",
    "salt": "salt = repeat('e', 32)",
}

LOCKS = {
    "retention": ("retention_lock:", dict(retained_until=SEVEN_YEARS)),
    "hold": ("legal_hold:", dict(held=True)),
    "hold_and_retention": ("legal_hold:", dict(held=True, retained_until=SEVEN_YEARS)),
    "content_retention": ("retention_lock:", dict(retained_until=SEVEN_YEARS, lock_protects_content=True)),
}


@pytest.fixture
def world(db):
    tenant = Tenant.objects.create(name="acme")
    other_tenant = Tenant.objects.create(name="globex")
    scope = Scope.objects.create(tenant=tenant, path="user:42", depth=1)
    other_scope = Scope.objects.create(tenant=tenant, path="user:43", depth=1)
    return SimpleNamespace(
        tenant=tenant, other_tenant=other_tenant, scope=scope, other_scope=other_scope,
        subject=Subject.objects.create(tenant=tenant, ref="subject-1"),
        content_class=ContentClass.objects.create(tenant=tenant, name="trade-confirmations"),
        other_class=ContentClass.objects.create(tenant=tenant, name="chat"),
    )


def make_record(world, *, retained_until=None, held=False, lock_protects_content=False, **fields) -> Record:
    """A record with the given lock; `retained_until` may be a timedelta from now."""
    if isinstance(retained_until, timedelta):
        retained_until = timezone.now() + retained_until
    values = dict(tenant=world.tenant, scope=world.scope, subject=world.subject, content_class=world.content_class,
                  content="the original content", commitment="a" * 64, salt="b" * 32, created_at=timezone.now(),
                  retained_until=retained_until, held=held, lock_protects_content=lock_protects_content)
    values.update(fields)
    return Record.objects.create(**values)


def raw(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def refused(sql: str, params=None) -> str:
    """Run `sql` in a savepoint, expect the guard to refuse it, return the database's message."""
    with pytest.raises(IntegrityError) as caught:
        with transaction.atomic():
            raw(sql, params)
    return caught.value.__cause__.diag.message_primary


def row(record_id: int) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM memory_record WHERE id = %s", [record_id])
        found = cursor.fetchone()
        if found is None:
            return None
        return dict(zip([c.name for c in cursor.description], found))


def insert_grant() -> None:
    raw("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (now())")


def delete_grants() -> None:
    # A grant must never outlive its transaction (the migration's constraint trigger checks at commit,
    # and the test transaction's teardown runs deferred checks).
    raw("DELETE FROM retention_lockrecomputegrant")


# --- DELETE -------------------------------------------------------------------------------------

def test_raw_delete_of_record_under_retention_rule_is_refused(world):
    # Given a record under a seven-year rule
    record = make_record(world, retained_until=SEVEN_YEARS)
    before = row(record.pk)
    # When raw SQL deletes it
    message = refused("DELETE FROM memory_record WHERE id = %s", [record.pk])
    # Then the database refuses with the retention code and the row is intact
    assert message.startswith("retention_lock:")
    assert f"record {record.pk}" in message and "DELETE refused" in message
    assert row(record.pk) == before


@pytest.mark.parametrize("retained_until", [None, timedelta(days=-1), SEVEN_YEARS])
def test_raw_delete_of_held_record_is_refused_and_the_hold_wins(world, retained_until):
    record = make_record(world, held=True, retained_until=retained_until)
    message = refused("DELETE FROM memory_record WHERE id = %s", [record.pk])
    assert message.startswith("legal_hold:")
    assert row(record.pk) is not None


@pytest.mark.parametrize("retained_until", ["NULL", "now() - interval '1 day'", "now() - interval '1 microsecond'",
                                            "now()"])
def test_raw_delete_of_unlocked_record_is_allowed(world, retained_until):
    # A lock ends at retained_until: a record retained until now is no longer locked.
    record = make_record(world, lock_protects_content=True)
    raw(f"UPDATE memory_record SET retained_until = {retained_until} WHERE id = %s", [record.pk])
    raw("DELETE FROM memory_record WHERE id = %s", [record.pk])
    assert row(record.pk) is None


def test_set_based_delete_touching_one_locked_row_deletes_nothing(world):
    # Given one unlocked and one locked record
    unlocked = make_record(world)
    locked = make_record(world, retained_until=SEVEN_YEARS)
    # When one statement deletes both
    refused("DELETE FROM memory_record WHERE id IN (%s, %s)", [unlocked.pk, locked.pk])
    # Then the statement is atomic: neither is gone
    assert row(unlocked.pk) is not None and row(locked.pk) is not None


def test_delete_of_locked_record_through_django_bypasses_is_refused(world):
    # Given a record under a rule
    record = make_record(world, retained_until=SEVEN_YEARS)
    # When code skips the guarded service: Django's own collector, or the collector-free raw delete
    with pytest.raises(IntegrityError, match=r"^retention_lock:"):
        with transaction.atomic():
            models.QuerySet.delete(Record.objects.filter(pk=record.pk))
    with pytest.raises(IntegrityError, match=r"^retention_lock:"):
        with transaction.atomic():
            Record.objects.filter(pk=record.pk)._raw_delete(using="default")
    # Then the record is still there
    assert Record.objects.filter(pk=record.pk).exists()


def test_lock_that_ends_one_second_from_now_still_blocks_delete(world):
    record = make_record(world)
    raw("UPDATE memory_record SET retained_until = now() + interval '1 second' WHERE id = %s", [record.pk])
    assert refused("DELETE FROM memory_record WHERE id = %s", [record.pk]).startswith("retention_lock:")


# --- UPDATE of identity and evidence ------------------------------------------------------------

@pytest.mark.parametrize("lock", sorted(LOCKS))
@pytest.mark.parametrize("column", sorted(PROTECTED_UPDATES))
def test_update_of_protected_column_of_locked_record_is_refused(world, column, lock):
    prefix, lock_fields = LOCKS[lock]
    record = make_record(world, **lock_fields)
    before = row(record.pk)
    params = dict(other_tenant=world.other_tenant.pk, other_scope=world.other_scope.pk,
                  other_class=world.other_class.pk, id=record.pk)
    message = refused(f"UPDATE memory_record SET {PROTECTED_UPDATES[column]} WHERE id = %(id)s", params)
    assert message.startswith(prefix)
    assert column in message
    assert row(record.pk) == before


@pytest.mark.parametrize("column", sorted(PROTECTED_UPDATES))
def test_update_of_protected_column_of_unlocked_record_is_allowed(world, column):
    record = make_record(world, retained_until=timedelta(days=-1))
    params = dict(other_tenant=world.other_tenant.pk, other_scope=world.other_scope.pk,
                  other_class=world.other_class.pk, id=record.pk)
    raw(f"UPDATE memory_record SET {PROTECTED_UPDATES[column]} WHERE id = %(id)s", params)


@pytest.mark.parametrize("column", ["forgotten_at", "redacted_at"])
def test_clearing_forget_timestamps_of_locked_record_is_refused(world, column):
    record = make_record(world, retained_until=SEVEN_YEARS, content="", forgotten_at=timezone.now(),
                         redacted_at=timezone.now())
    message = refused(f"UPDATE memory_record SET {column} = NULL WHERE id = %s", [record.pk])
    assert message.startswith("retention_lock:") and column in message
    assert row(record.pk)[column] is not None


def test_clearing_redacted_at_is_refused_even_when_unlocked(world):
    # The content is gone: a row that claims otherwise would resurrect erased data.
    record = make_record(world, content="", forgotten_at=timezone.now(), redacted_at=timezone.now())
    message = refused("UPDATE memory_record SET redacted_at = NULL WHERE id = %s", [record.pk])
    assert message.startswith("redaction_final:")
    # Un-hiding an unlocked row is not destructive and stays allowed.
    raw("UPDATE memory_record SET forgotten_at = NULL WHERE id = %s", [record.pk])


def test_stale_save_cannot_resurrect_redacted_content(world):
    # Given a record loaded before it was redacted (existence-only lock: redact is permitted)
    record = make_record(world, retained_until=SEVEN_YEARS)
    stale = Record.objects.get(pk=record.pk)
    Record.objects.filter(pk=record.pk).update(content="", redacted_at=timezone.now(), forgotten_at=timezone.now())
    # When the stale copy is saved (every column written back)
    with pytest.raises(IntegrityError, match=r"^retention_lock:.*redacted_at"):
        with transaction.atomic():
            stale.save()
    # Then the content stays gone
    assert row(record.pk)["content"] == ""


def test_harmless_updates_of_locked_record_are_allowed(world):
    record = make_record(world, held=True, retained_until=SEVEN_YEARS, lock_protects_content=True)
    raw("UPDATE memory_record SET tier = 'cold', erasure_pending = true WHERE id = %s", [record.pk])
    raw("UPDATE memory_record SET content = content WHERE id = %s", [record.pk])
    assert row(record.pk)["tier"] == "cold"


# --- UPDATE of content --------------------------------------------------------------------------

@pytest.mark.parametrize("lock", ["content_retention", "hold"])
def test_redact_of_record_whose_lock_protects_content_is_refused(world, lock):
    prefix, lock_fields = LOCKS[lock]
    record = make_record(world, **lock_fields)
    message = refused("UPDATE memory_record SET content = '', redacted_at = now() WHERE id = %s", [record.pk])
    assert message.startswith(prefix) and "content" in message
    with pytest.raises(IntegrityError, match=rf"^{prefix}"):
        with transaction.atomic():
            Record.objects.filter(pk=record.pk).update(content="overwritten")
    assert row(record.pk)["content"] == "the original content"
    assert row(record.pk)["redacted_at"] is None


def test_redact_of_record_under_existence_only_lock_is_allowed(world):
    record = make_record(world, retained_until=SEVEN_YEARS, lock_protects_content=False)
    raw("UPDATE memory_record SET content = '', redacted_at = now(), forgotten_at = now() WHERE id = %s", [record.pk])
    stored = row(record.pk)
    assert stored["content"] == "" and stored["redacted_at"] is not None
    # the row, its id, timestamps and commitment survive
    assert stored["commitment"] == "a" * 64


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_soft_forget_of_locked_record_is_allowed(world, lock):
    record = make_record(world, **LOCKS[lock][1])
    Record.objects.filter(pk=record.pk).update(forgotten_at=timezone.now(), erasure_pending=True)
    assert row(record.pk)["forgotten_at"] is not None


# --- shortening the lock ------------------------------------------------------------------------

SHORTENINGS = {
    "retained_until lowered": ("retention", "retained_until = now() + interval '1 day'", "retained_until"),
    "retained_until to past": ("retention", "retained_until = now() - interval '1 day'", "retained_until"),
    "retained_until cleared": ("retention", "retained_until = NULL", "retained_until"),
    "held cleared": ("hold", "held = false", "held"),
    "content protection cleared": ("content_retention", "lock_protects_content = false", "lock_protects_content"),
}


@pytest.mark.parametrize("case", sorted(SHORTENINGS))
def test_shortening_the_lock_without_grant_is_refused(world, case):
    lock, assignment, column = SHORTENINGS[case]
    prefix, lock_fields = LOCKS[lock]
    record = make_record(world, **lock_fields)
    before = row(record.pk)
    message = refused(f"UPDATE memory_record SET {assignment} WHERE id = %s", [record.pk])
    assert message.startswith(prefix)
    assert "shortening the lock" in message and column in message
    assert row(record.pk) == before


def test_unlock_then_delete_in_one_transaction_is_refused(world):
    # The attack the grant exists for: clear the lock, then delete, without the retention engine.
    record = make_record(world, held=True)
    with pytest.raises(IntegrityError, match=r"^legal_hold:"):
        with transaction.atomic():
            raw("UPDATE memory_record SET held = false WHERE id = %s", [record.pk])
            raw("DELETE FROM memory_record WHERE id = %s", [record.pk])
    assert row(record.pk)["held"] is True


@pytest.mark.parametrize("case", sorted(SHORTENINGS))
def test_shortening_the_lock_with_grant_in_same_transaction_is_allowed(world, case):
    lock, assignment, column = SHORTENINGS[case]
    record = make_record(world, **LOCKS[lock][1])
    before = row(record.pk)
    with transaction.atomic():
        insert_grant()
        raw(f"UPDATE memory_record SET {assignment} WHERE id = %s", [record.pk])
        delete_grants()
    assert row(record.pk)[column] != before[column]


def test_grant_allows_shortening_only(world):
    # A grant lets the lock be shortened, not content overwritten in the same statement.
    record = make_record(world, retained_until=SEVEN_YEARS, lock_protects_content=True)
    with transaction.atomic():
        insert_grant()
        message = refused("UPDATE memory_record SET lock_protects_content = false, content = '' WHERE id = %s",
                          [record.pk])
        delete_grants()
    assert message.startswith("retention_lock:") and "content" in message


def test_extending_the_lock_is_always_allowed(world):
    record = make_record(world, retained_until=timedelta(days=30))
    raw("UPDATE memory_record SET retained_until = retained_until + interval '10 years' WHERE id = %s", [record.pk])
    raw("UPDATE memory_record SET held = true, lock_protects_content = true WHERE id = %s", [record.pk])
    unlocked = make_record(world)
    raw("UPDATE memory_record SET retained_until = now() + interval '1 year' WHERE id = %s", [unlocked.pk])
    stored = row(record.pk)
    assert stored["held"] and stored["lock_protects_content"]


def test_grant_ends_with_its_transaction(world):
    record = make_record(world, held=True)
    with transaction.atomic():
        insert_grant()
        delete_grants()
    assert refused("UPDATE memory_record SET held = false WHERE id = %s", [record.pk]).startswith("legal_hold:")


# --- another connection -------------------------------------------------------------------------

@pytest.fixture
def committed_world(transactional_db):
    # Committed rows, so that a second connection sees them (`db` would keep them in the test's transaction).
    tenant = Tenant.objects.create(name="acme")
    return SimpleNamespace(
        tenant=tenant, scope=Scope.objects.create(tenant=tenant, path="user:42", depth=1),
        subject=Subject.objects.create(tenant=tenant, ref="subject-1"),
        content_class=ContentClass.objects.create(tenant=tenant, name="trade-confirmations"),
    )


def test_another_transactions_grant_is_invisible_and_unusable(committed_world):
    # Given a held record, committed
    record = make_record(committed_world, held=True, retained_until=SEVEN_YEARS)
    # When one transaction holds a grant (the retention engine at work)...
    with transaction.atomic():
        insert_grant()
        # ...a second connection can neither see it nor use it to unlock the record
        with other_connection() as other:
            assert other.execute("SELECT count(*) FROM retention_lockrecomputegrant").fetchone() == (0,)
            with pytest.raises(psycopg.errors.RestrictViolation) as caught:
                other.execute("UPDATE memory_record SET held = false, retained_until = NULL WHERE id = %s",
                              [record.pk])
            assert caught.value.diag.message_primary.startswith("legal_hold:")
            other.rollback()
            with pytest.raises(psycopg.errors.RestrictViolation):
                other.execute("DELETE FROM memory_record WHERE id = %s", [record.pk])
        delete_grants()
    stored = row(record.pk)
    assert stored["held"] is True and stored["retained_until"] is not None


def test_a_grant_can_never_be_committed(committed_world):
    # A committed grant would unlock every record for everyone: the commit itself is refused.
    record = make_record(committed_world, held=True)
    with other_connection() as other:
        other.execute("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (now())")
        with pytest.raises(psycopg.errors.RestrictViolation, match=r"^lock_grant:"):
            other.commit()
    with other_connection() as other:
        assert other.execute("SELECT count(*) FROM retention_lockrecomputegrant").fetchone() == (0,)
        with pytest.raises(psycopg.errors.RestrictViolation, match=r"^legal_hold:"):
            other.execute("UPDATE memory_record SET held = false WHERE id = %s", [record.pk])
    assert row(record.pk)["held"] is True


# --- what the migration also set up -------------------------------------------------------------

def test_error_reaches_django_as_integrity_error_with_the_code_first(world):
    record = make_record(world, held=True)
    with pytest.raises(IntegrityError) as caught:
        with transaction.atomic():
            raw("DELETE FROM memory_record WHERE id = %s", [record.pk])
    assert str(caught.value).startswith("legal_hold:")
    assert caught.value.__cause__.sqlstate == "23001"


def test_foreign_keys_to_records_cascade_in_the_database(db):
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT con.conrelid::regclass::text, col.attname, con.confrelid::regclass::text, con.confdeltype
            FROM pg_constraint con
            JOIN pg_attribute col ON col.attrelid = con.conrelid AND col.attnum = con.conkey[1]
            WHERE con.contype = 'f' AND con.conrelid IN ('memory_lineage'::regclass, 'memory_recordtag'::regclass)
        """)
        found = {(table, column, ref): action for table, column, ref, action in cursor.fetchall()}
    assert found == {
        ("memory_lineage", "source_id", "memory_record"): "c",
        ("memory_lineage", "artifact_id", "memory_derivedartifact"): "c",
        ("memory_recordtag", "record_id", "memory_record"): "c",
    }


def test_records_table_has_fillfactor_90(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'memory_record'::regclass")
        assert "fillfactor=90" in cursor.fetchone()[0]


def test_set_based_delete_takes_lineage_and_tags_but_not_from_locked_records(world):
    # Given an unlocked and a locked record, each with a tag and a derived summary
    unlocked, locked = make_record(world), make_record(world, retained_until=SEVEN_YEARS)
    for record in (unlocked, locked):
        RecordTag.objects.create(record=record, name="t")
        artifact = DerivedArtifact.objects.create(tenant=world.tenant, scope=world.scope, kind="summary",
                                                  content="s", created_at=timezone.now())
        Lineage.objects.create(artifact=artifact, source=record)
    # When one raw DELETE removes the unlocked one
    raw("DELETE FROM memory_record WHERE id = %s", [unlocked.pk])
    # Then its tags and lineage went with it (the database cascaded); the locked one's are intact
    assert not RecordTag.objects.filter(record_id=unlocked.pk).exists()
    assert not Lineage.objects.filter(source_id=unlocked.pk).exists()
    assert RecordTag.objects.filter(record_id=locked.pk).exists()
    assert Lineage.objects.filter(source_id=locked.pk).exists()
    # And deleting an artifact takes its lineage rows
    raw("DELETE FROM memory_derivedartifact WHERE id IN (SELECT artifact_id FROM memory_lineage WHERE source_id = %s)",
        [locked.pk])
    assert not Lineage.objects.filter(source_id=locked.pk).exists()


# --- the salt goes with the content (migration memory 0012) ---------------------------------------

def test_a_redaction_under_an_existence_only_lock_empties_the_salt_with_the_content(world):
    record = make_record(world, retained_until=SEVEN_YEARS, lock_protects_content=False)
    raw("UPDATE memory_record SET content = '', salt = '', redacted_at = now(), forgotten_at = now() WHERE id = %s",
        [record.pk])
    stored = row(record.pk)
    assert (stored["content"], stored["salt"], stored["commitment"]) == ("", "", "a" * 64)  # the evidence stays


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_the_salt_of_a_locked_record_is_never_emptied_while_its_content_stays(world, lock):
    prefix, lock_fields = LOCKS[lock]
    record = make_record(world, **lock_fields)
    message = refused("UPDATE memory_record SET salt = '' WHERE id = %s", [record.pk])
    assert message.startswith(prefix) and "salt" in message
    assert row(record.pk)["salt"] == "b" * 32
