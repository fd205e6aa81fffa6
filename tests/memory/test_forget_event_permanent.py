"""Forget events are permanent (memory migration 0007): the database refuses to delete one or to change
it, except confirm-erasure setting `confirmed_at` once. This is what lets `Record.forget_event` go without a
foreign-key check in PostgreSQL: the event a record names can never disappear."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.models import ForgetEvent, Record
from memory.services import records_forget
from memory.services.targets import ForgetTarget
from tests.factories import record as record_make


@pytest.fixture
def event(tenant, chat):
    record = record_make(tenant, chat)
    result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(record.pk,)), mode="soft", actor="test")
    assert Record.objects.get(pk=record.pk).forget_event_id == result.event.pk
    return result.event


def _refused(sql: str, params) -> str:
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    return str(caught.value)


def test_delete_of_a_forget_event_is_refused_even_by_raw_sql(event):
    assert "forget_event_permanent" in _refused("DELETE FROM memory_forgetevent WHERE id = %s", [event.pk])
    with pytest.raises(IntegrityError), transaction.atomic():
        ForgetEvent.objects.filter(pk=event.pk)._raw_delete(ForgetEvent.objects.db)
    assert ForgetEvent.objects.filter(pk=event.pk).exists()


@pytest.mark.parametrize("assignment", [
    "status = 'refused'", "actor = 'someone else'", "mode = 'hard'", "reason = 'rewritten'",
    "created_at = created_at - interval '1 day'", "public_id = gen_random_uuid()",
])
def test_update_of_what_a_forget_event_says_is_refused(event, assignment):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL SQL in the assignments")
    before = ForgetEvent.objects.values().get(pk=event.pk)
    assert "forget_event_permanent" in _refused(f"UPDATE memory_forgetevent SET {assignment} WHERE id = %s",
                                                [event.pk])
    assert ForgetEvent.objects.values().get(pk=event.pk) == before


def test_update_of_the_json_columns_is_refused(event):
    for column in ("outcomes", "target", "artifacts"):
        with pytest.raises(IntegrityError), transaction.atomic():
            ForgetEvent.objects.filter(pk=event.pk).update(**{column: {"rewritten": True}})
    assert ForgetEvent.objects.get(pk=event.pk).outcomes == event.outcomes


def test_confirmed_at_is_set_once_and_never_moved_or_cleared(event):
    confirmed = timezone.now()
    assert ForgetEvent.objects.filter(pk=event.pk).update(confirmed_at=confirmed) == 1
    for later in (None, confirmed + timezone.timedelta(days=1)):
        with pytest.raises(IntegrityError), transaction.atomic():
            ForgetEvent.objects.filter(pk=event.pk).update(confirmed_at=later)
    assert ForgetEvent.objects.get(pk=event.pk).confirmed_at == confirmed


def test_record_forget_event_has_no_foreign_key_check_in_postgresql(db):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps its constraints")
    with connection.cursor() as cursor:
        for table in ("memory_record", "memory_derivedartifact", "memory_deletedrecord"):
            constraints = connection.introspection.get_constraints(cursor, table)
            assert not [name for name, info in constraints.items()
                        if info["foreign_key"] and info["columns"] == ["forget_event_id"]], table
