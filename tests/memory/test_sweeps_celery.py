"""The sweeps on real Celery workers (separate processes) with Redis as the broker, on PostgreSQL: two
compactions racing over the same rows, holds placed while a sweep runs, a worker killed mid-batch."""
from __future__ import annotations

import random

import pytest
from django.db import connection

from config.errors import ApplicationError
from config.testdb import url_of
from memory.models import DeletedRecord, ForgetEvent, Record, SweepBatch, SweepRun, SweepStatus
from memory.tasks import sweep_start
from retention.services import hold_place
from tests.memory.sweep_fixtures import hidden_rows_insert, tombstoned_ids
from tests.workers import wait_for
from tombstones.models import Tombstone

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def finished_runs(count: int):
    runs = list(SweepRun.objects.filter(kind="compaction", dry_run=False))
    done = [r for r in runs if r.status != SweepStatus.RUNNING]
    if any(r.status == SweepStatus.FAILED for r in done):
        raise AssertionError(f"a run failed: {[r.errors for r in done]}")
    return runs if len(done) >= count else None


def assert_each_row_purged_exactly_once(ids: list[int]) -> None:
    listed = tombstoned_ids("compaction")
    assert len(listed) == len(set(listed)), "a record is listed by two tombstones"
    assert sorted(listed) == ids
    events = ForgetEvent.objects.filter(path="compaction")
    assert Tombstone.objects.filter(id__in=events.values("public_id")).count() == events.count()
    assert DeletedRecord.objects.filter(record_id__in=ids).count() == len(ids)
    batch_events = [e for b in SweepBatch.objects.all() for e in b.forget_event_ids]
    assert sorted(batch_events) == sorted(events.values_list("pk", flat=True))  # one batch row per committed forget


def test_two_compactions_racing_purge_each_row_exactly_once(workers, tenant):
    ids = hidden_rows_insert(tenant, 50_000)
    workers("left", LEDGER_SWEEP_BATCH="2500")
    workers("right", LEDGER_SWEEP_BATCH="2500")

    sweep_start.delay("compaction")
    sweep_start.delay("compaction")

    runs = wait_for(lambda: finished_runs(2), timeout=240, interval=0.5, what="both compactions to finish")
    assert not Record.objects.filter(tenant=tenant).exists()
    assert_each_row_purged_exactly_once(ids)
    assert sorted(r.counts["deleted"] for r in runs)[0] > 0, "one run did nothing: the race did not happen"
    assert sum(r.counts["deleted"] for r in runs) == len(ids)


def test_a_record_placed_under_hold_while_compaction_runs_is_never_destroyed(workers, tenant):
    ids = hidden_rows_insert(tenant, 20_000)
    targets = sorted(random.Random(7).sample(ids, 200))
    workers("left", LEDGER_SWEEP_BATCH="500")
    workers("right", LEDGER_SWEEP_BATCH="500")

    sweep_start.delay("compaction")
    sweep_start.delay("compaction")
    wait_for(lambda: SweepBatch.objects.exists(), timeout=60, interval=0.02, what="the first batch")
    held, too_late = [], []
    for record_id in reversed(targets):  # from far ahead of the sweeps' frontier until they meet it
        try:
            hold_place(tenant=tenant, matter=f"matter {record_id}", actor="legal", record_ids=[record_id])
            held.append(record_id)
        except ApplicationError as exc:
            assert exc.code == "not_found"
            too_late.append(record_id)

    wait_for(lambda: finished_runs(2), timeout=240, interval=0.5, what="both compactions to finish")
    assert held, "every hold came too late: the test did not race"
    remaining = set(Record.objects.filter(tenant=tenant).values_list("pk", flat=True))
    assert remaining == set(held)
    assert Record.objects.filter(pk__in=held, held=True).count() == len(held)
    listed = tombstoned_ids("compaction")
    assert not set(held) & set(listed) and len(listed) == len(set(listed))
    assert sorted(listed + held) == ids


def _in_a_transaction(application_name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                       "AND datname = current_database() AND backend_xid IS NOT NULL", [application_name])
        return cursor.fetchone()[0] > 0


def test_worker_killed_mid_batch_the_next_run_finishes_it_with_no_duplicate_tombstone(workers, tenant):
    ids = hidden_rows_insert(tenant, 20_000)
    db = connection.settings_dict
    url = url_of(db, application_name="sweep-doomed")
    doomed = workers("doomed", LEDGER_SWEEP_BATCH="2000", DATABASE_URL=url)

    sweep_start.delay("compaction")
    # Mid-batch: a batch committed already, and the next one holds row locks (it claimed, maybe signed).
    wait_for(lambda: SweepBatch.objects.exists() and _in_a_transaction("sweep-doomed"), timeout=60, interval=0.005,
             what="a batch under way")
    doomed.kill()
    left = Record.objects.filter(tenant=tenant).count()
    assert 0 < left < len(ids), "the worker finished before it could be killed"
    (run,) = SweepRun.objects.all()
    assert run.status == SweepStatus.RUNNING and run.finished_at is None  # visible as unfinished

    workers("successor", LEDGER_SWEEP_BATCH="2000")
    wait_for(lambda: finished_runs(1), timeout=120, interval=0.5, what="the run to be finished by the successor")

    assert not Record.objects.filter(tenant=tenant).exists()
    assert_each_row_purged_exactly_once(ids)
    run.refresh_from_db()
    assert run.status == SweepStatus.FINISHED and run.counts["deleted"] == len(ids)
