"""The sweeps in this process (the Celery runs are test_sweeps_celery.py): what each purges and what it
must leave alone, dry runs, the runs' records, resuming after a crash."""
from __future__ import annotations

import gc
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from config.celery import app
from dsr.models import ItemDecision, ItemKind, ItemOutcome, RequestItem, RetentionConflict
from memory.models import (
    DeletedRecord,
    DerivedArtifact,
    FleetCopyNotice,
    ForgetEvent,
    Lineage,
    Record,
    SweepBatch,
    SweepRun,
    SweepStatus,
)
from memory.services import ForgetTarget, artifact_write, records_forget
from memory.services import forget as forget_module
from memory.services.forget import LockedRows
from memory.sweeps import common, compaction, runs, sweep_run_batch, sweep_run_start, sweep_run_sync
from memory.tasks import sweep_start, sweep_step
from retention.models import RetentionRule
from retention.services import hold_place
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import ContentClassFactory, record, rule
from tests.memory.sweep_fixtures import hidden_rows_insert, snapshot, statement_of, tombstoned_ids
from tombstones.verification import deferred_items

pytestmark = pytest.mark.django_db

KINDS = ["compaction", "pact_expiry", "deferred_erasures", "confirmations"]


def forget(tenant, records, mode="soft"):
    return records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in records)), mode=mode,
                          actor="test", reason="test")


@pytest.fixture
def store(tenant, chat, ledger_class):
    """Hidden and redacted records whose locks ended, and others that something keeps."""
    rule(tenant, ledger_class, days=7 * 365)  # existence only
    free = [record(tenant, chat, content=f"free {i}", subject=f"s{i}") for i in range(3)]
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[free[0].pk], content="about free 0")
    redacted = record(tenant, chat, content="to redact")
    locked = record(tenant, ledger_class, content="a trade")
    held = record(tenant, chat, content="disputed")
    live = record(tenant, chat, content="still live")
    hidden_event = forget(tenant, free + [locked]).event
    forget(tenant, [redacted], mode="redact")
    hold_place(tenant=tenant, matter="Doe v. Acme", actor="legal", record_ids=[held.pk])
    forget(tenant, [held])
    return dict(free=free, summary=summary, redacted=redacted, locked=locked, held=held, live=live,
                hidden_event=hidden_event)


# --- compaction ---------------------------------------------------------------------------------------

def test_compaction_purges_hidden_and_redacted_rows_whose_lock_ended_with_their_artifacts(store):
    run = sweep_run_sync(kind="compaction", actor="test")

    purged = [r.pk for r in store["free"]] + [store["redacted"].pk]
    assert not Record.objects.filter(pk__in=purged).exists()
    assert set(DeletedRecord.objects.values_list("record_id", flat=True)) == set(purged)
    assert not DerivedArtifact.objects.filter(pk=store["summary"].pk).exists()
    assert not DerivedArtifact.objects.filter(lineage__source_id__in=purged).exists()
    kept = Record.objects.filter(pk__in=[store[k].pk for k in ("locked", "held", "live")])
    assert kept.count() == 3 and kept.get(pk=store["locked"].pk).content == "a trade"
    assert run.status == SweepStatus.FINISHED and run.counts["deleted"] == 4 and "refused" not in run.counts
    assert run.report["waiting_retention"] == 1 and run.report["waiting_hold"] == 1
    assert run.report["next_lock_end"] == Record.objects.get(pk=store["locked"].pk).retained_until.isoformat()
    assert run.report["kept_by_requests"] == 0
    assert sorted(tombstoned_ids("compaction")) == sorted(purged)


def test_compaction_tombstone_closes_the_deferred_items_of_the_first_tombstone(store):
    sweep_run_sync(kind="compaction", actor="test")

    statement = statement_of(ForgetEvent.objects.get(path="compaction"))
    first = store["hidden_event"]
    closes = {c["tombstone_id"]: c for c in statement["propagation"]["closes"]}
    assert closes[str(first.public_id)]["items"] == [f"record:{r.pk}" for r in sorted(store["free"], key=lambda r: r.pk)]
    assert closes[str(first.public_id)]["action"] == "purge_content"
    first_deferred = set(deferred_items(statement_of(first)))
    assert set(closes[str(first.public_id)]["items"]) <= first_deferred
    assert statement["request"]["authority"].startswith("compaction of hidden records")


def test_the_references_to_earlier_forgets_read_their_tombstone_ids_not_their_outcomes(store):
    # Given the soft forget that hid the records (its outcomes list every record it hid: 100,000 in a bulk forget)
    first = store["hidden_event"]
    pairs = [(r.pk, first.pk) for r in store["free"]]

    # When a batch names the forgets it closes
    with CaptureQueriesContext(connection) as queries:
        closes = common.closes_of(pairs, "purge_content")

    # Then one query read the tombstone ids alone, not each event's lists again per batch
    assert [c["tombstone_id"] for c in closes] == [str(first.public_id)]
    (query,) = queries.captured_queries
    assert "outcomes" not in query["sql"] and "target" not in query["sql"]


def test_compaction_leaves_records_that_subject_requests_keep(tenant, chat):
    restricted = record(tenant, chat, content="restricted", subject="subject-7")
    scenario = erasure_scenario()
    request = verified_request(scenario)
    request.type = "restriction"
    request.save(update_fields=["type"])
    forget(tenant, [restricted])
    RequestItem.objects.create(request=request, kind=ItemKind.RECORD, object_id=restricted.pk,
                               decision=ItemDecision.HIDE, outcome=ItemOutcome.HIDDEN)

    run = sweep_run_sync(kind="compaction", actor="test")

    assert Record.objects.get(pk=restricted.pk).content == "restricted"
    assert run.report["kept_by_requests"] == 1


def test_a_record_held_between_the_claim_and_the_forget_is_refused_not_destroyed(tenant, chat, monkeypatch):
    records = [record(tenant, chat, content=f"n{i}") for i in range(4)]
    forget(tenant, records)
    real_claim = compaction.claim_rows

    def claim_then_hold(*args, **kwargs):
        rows = real_claim(*args, **kwargs)
        # The lock changed after the claim read the rows (here in the claim's own transaction: another one
        # would wait for the row lock): the rows handed to the forget are stale, the forget's DELETE (which
        # repeats the lock condition) comes up short, and the forget is decided again from a fresh read.
        Record.objects.filter(pk=records[1].pk).update(held=True)
        return rows

    monkeypatch.setattr(compaction, "claim_rows", claim_then_hold)
    run = sweep_run_sync(kind="compaction", actor="test")

    assert Record.objects.filter(pk=records[1].pk).exists()
    assert not Record.objects.filter(pk__in=[records[0].pk, records[2].pk, records[3].pk]).exists()
    assert run.counts["refused"] == 1 and run.counts["deleted"] == 3
    assert records[1].pk not in tombstoned_ids("compaction")


def _claimed(tenant, ids):
    """The rows of `ids` as compaction's claim hands them to the forget (call inside a transaction)."""
    rows = common.claim_rows(Record.objects.filter(pk__in=ids), after=None, limit=len(ids), fields=("tenant_id",))
    return LockedRows(tenant_id=tenant.pk, rows=tuple(row for _, row in rows))


def test_locked_rows_that_went_stale_are_decided_again_and_the_held_one_survives(tenant, monkeypatch):
    """The claim's rows say `not held`, but a hold came after they were read (in the same transaction: another
    would wait for the row lock). The DELETE repeats the lock condition, comes up short, and the forget is
    decided again from a fresh read: the held record is refused, listed as refused, and stays."""
    ids = hidden_rows_insert(tenant, 4)
    attempts = []
    real_once = forget_module._forget_once
    monkeypatch.setattr(forget_module, "_forget_once", lambda **kw: attempts.append(kw["use_locked"] and kw["orders"][0].locked) or real_once(**kw))

    with transaction.atomic():
        locked = _claimed(tenant, ids)
        assert not any(row.held for row in locked.rows)
        Record.objects.filter(pk=ids[1]).update(held=True)
        result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(ids)), mode="hard",
                                actor="test", locked=locked)

    assert attempts[0] is locked and attempts[1] is False and len(attempts) == 2
    assert [r["outcome"] for r in result.results] == ["deleted", "refused", "deleted", "deleted"]
    assert result.results[1]["reason"]["code"] == "legal_hold"
    assert list(Record.objects.filter(pk__in=ids).values_list("pk", flat=True)) == [ids[1]]
    assert set(DeletedRecord.objects.values_list("record_id", flat=True)) == {ids[0], ids[2], ids[3]}
    statement = statement_of(result.event)
    assert {r["record_id"]: r["outcome"] for r in statement["execution"]["records"]}[str(ids[1])] == "refused"
    assert list(ForgetEvent.objects.filter(mode="hard")) == [result.event]  # the first attempt left nothing


def test_locked_rows_are_refused_unless_they_are_the_targets_rows_of_this_tenant(tenant, other_tenant):
    ids = hidden_rows_insert(tenant, 3)
    with transaction.atomic():
        locked = _claimed(tenant, ids)
        for target, rows in [(ForgetTarget(record_ids=tuple(ids[:2])), locked),
                             (ForgetTarget(record_ids=tuple(ids)), locked._replace(rows=locked.rows[::-1])),
                             (ForgetTarget(record_ids=tuple(ids)), locked._replace(tenant_id=other_tenant.pk)),
                             (ForgetTarget(scope="user:bulk"), locked)]:
            with pytest.raises(ValueError):
                records_forget(tenant=tenant, target=target, mode="hard", actor="test", locked=rows)
    assert Record.objects.filter(pk__in=ids).count() == 3 and not DeletedRecord.objects.exists()


def test_a_compaction_batch_reads_the_records_it_purges_once_under_lock(tenant):
    """The claim's SELECT ... FOR UPDATE reads what the guard needs; the forget does not read the rows again
    (nor check that they exist): the only other statement on memory_record is the guarded DELETE."""
    ids = hidden_rows_insert(tenant, 5, artifacts=True)

    with CaptureQueriesContext(connection) as captured:
        result = compaction.compaction_batch(batch_size=100)

    assert result.counts["deleted"] == 5 and not Record.objects.filter(pk__in=ids).exists()
    on_records = [q["sql"] for q in captured.captured_queries
                  if 'FROM "memory_record"' in q["sql"] or "FROM memory_record" in q["sql"]]
    reads = [sql for sql in on_records if not sql.lstrip().upper().startswith(("WITH", "DELETE"))]
    assert len(reads) == 1 and "FOR UPDATE" in reads[0]
    assert len(on_records) == 2


def test_a_compaction_batch_runs_as_many_statements_for_300_rows_as_for_3(tenant):
    """Set-based (bench/bench_compaction.py): no statement per row or per artifact, and the purged rows,
    their artifacts and their DeletedRecord rows all reach storage."""
    def statements(count: int) -> int:
        ids = hidden_rows_insert(tenant, count, artifacts=True)
        artifact_ids = list(Lineage.objects.filter(source_id__in=ids).values_list("artifact_id", flat=True))
        assert len(artifact_ids) == count
        with CaptureQueriesContext(connection) as captured:
            result = compaction.compaction_batch(batch_size=1000)
        assert result.counts["deleted"] == count and result.counts["derived_deleted"] == count
        assert not Record.objects.filter(pk__in=ids).exists()
        assert DeletedRecord.objects.filter(record_id__in=ids).count() == count
        assert not DerivedArtifact.objects.filter(pk__in=artifact_ids).exists()
        assert not Lineage.objects.filter(artifact_id__in=artifact_ids).exists()
        return len(captured.captured_queries)

    statements(1)  # the first batch also creates the signing key and the log head
    assert statements(3) == statements(300) <= 20


# --- dry runs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_dry_run_changes_nothing(store, tenant, chat, kind, mailoutbox):
    pact = ContentClassFactory(tenant=tenant, name="pact-notes")
    rule(tenant, pact, days=30, kind="pact", authority="Pact 4.2")
    expired = [record(tenant, pact, content=f"old {i}", age_days=40) for i in range(2)]
    before = snapshot()

    run = sweep_run_sync(kind=kind, actor="test", dry_run=True)

    assert snapshot() == before
    assert run.dry_run and run.status == SweepStatus.FINISHED and not run.batch_log.exists()
    assert not mailoutbox
    expected = {"compaction": ("would_delete", 4), "pact_expiry": ("would_delete", len(expired)),
                "deferred_erasures": ("would_erase", 0), "confirmations": ("would_check", 3)}[kind]
    assert run.report[expected[0]] == expected[1]


# --- pact TTL expiry -----------------------------------------------------------------------------------

def test_pact_expiry_forgets_what_the_lock_permits_and_puts_the_rest_on_record(tenant):
    notes, invoices, trades = (ContentClassFactory(tenant=tenant, name=n) for n in ("notes", "invoices", "trades"))
    for cls in (notes, invoices, trades):
        rule(tenant, cls, days=30, kind="pact", authority="Customer pact §4.2 (30 days)")
    rule(tenant, invoices, days=365, authority="Tax code §147 (existence)")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4", protects="content")
    old_note = record(tenant, notes, content="old note", age_days=40)
    young_note = record(tenant, notes, content="young note", age_days=10)
    held_note = record(tenant, notes, content="held note", age_days=40, subject="held")
    old_invoice = record(tenant, invoices, content="invoice 7", age_days=40)
    old_trade = record(tenant, trades, content="bought 100", age_days=40)
    hold_place(tenant=tenant, matter="audit 2026", actor="legal", record_ids=[held_note.pk])

    with CaptureQueriesContext(connection) as captured:
        run = sweep_run_sync(kind="pact_expiry", actor="test")

    assert not Record.objects.filter(pk=old_note.pk).exists()
    # The claim's rows go to the forgets (records_forget(locked=...)): no second read of the records.
    reads = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")
             and 'FROM "memory_record"' in q["sql"] and '"memory_record"."salt"' in q["sql"]]
    assert len(reads) == 1 and "FOR UPDATE" in reads[0]
    invoice = Record.objects.get(pk=old_invoice.pk)
    assert invoice.content == "" and invoice.redacted_at is not None  # the content goes, the row stays
    for kept in (young_note, held_note, old_trade):
        assert Record.objects.get(pk=kept.pk).content == kept.content
    assert run.counts["deleted"] == 1 and run.counts["redacted"] == 1
    waiting = {w["content_class"]: w for w in run.report["waiting"]}
    assert waiting["trades"]["code"] == "retention_lock" and waiting["trades"]["authority"] == "SEC 17a-4"
    assert waiting["notes"]["code"] == "legal_hold" and waiting["notes"]["records"] == 1
    assert run.report["waiting_records"] == 2
    assert not RetentionConflict.objects.exists()  # the law wins silently
    # The tombstones cite the pact rule by its id; its wording stays in the table and on the events' reasons.
    events = ForgetEvent.objects.filter(path="pact_expiry")
    pact_rules = RetentionRule.objects.filter(authority="Customer pact §4.2 (30 days)", content_class__in=[notes, invoices])
    assert {statement_of(e)["request"]["authority"] for e in events} == {f"retention_rule:{r.pk}" for r in pact_rules}
    assert all("Customer pact §4.2 (30 days)" in e.reason for e in events)


# --- pending confirmations ---------------------------------------------------------------------------

def test_confirmations_confirm_finished_erasures_and_report_what_is_overdue(tenant, chat):
    gone, lingering = record(tenant, chat, content="gone soon"), record(tenant, chat, content="lingering")
    shared = record(tenant, chat, content="shared with agent-b")
    artifact_write(tenant=tenant, kind="fleet_copy", source_ids=[shared.pk], holder="agent-b", content="copy")
    purged_event = forget(tenant, [gone]).event
    sweep_run_sync(kind="compaction", actor="test")
    lingering_event = forget(tenant, [lingering]).event
    Record.objects.filter(pk=lingering.pk).update(forgotten_at=timezone.now() - timedelta(days=45))
    fleet_event = forget(tenant, [shared], mode="hard").event
    FleetCopyNotice.objects.filter(forget_event=fleet_event).update(deadline=timezone.now() - timedelta(days=1))

    run = sweep_run_sync(kind="confirmations", actor="test")

    assert ForgetEvent.objects.get(pk=purged_event.pk).confirmed_at is not None
    assert ForgetEvent.objects.get(pk=lingering_event.pk).confirmed_at is None
    assert ForgetEvent.objects.get(pk=fleet_event.pk).confirmed_at is None  # the copy is not acknowledged
    overdue = run.report["overdue"]
    assert overdue["hidden_records_past_purge_deadline"] == 1 and overdue["hidden_records_sample"] == [lingering.pk]
    assert overdue["fleet_copies_unacknowledged"] == 1 and overdue["fleet_copies_sample"][0]["holder"] == "agent-b"
    assert run.counts["waiting"] == 1 and run.counts["gaps"] == 1


# --- runs: resuming, failing, tasks, schedules ----------------------------------------------------------

def test_run_whose_worker_died_is_interrupted_and_the_next_run_takes_over(tenant, monkeypatch):
    ids = hidden_rows_insert(tenant, 10)
    monkeypatch.setattr(compaction, "COMPACTION_BATCH", 3)
    first = sweep_run_start(kind="compaction", actor="test")
    assert sweep_run_batch(run_id=first.pk).more
    SweepRun.objects.filter(pk=first.pk).update(heartbeat_at=timezone.now() - timedelta(hours=2))

    second = sweep_run_sync(kind="compaction", actor="test")

    first.refresh_from_db()
    assert first.status == SweepStatus.INTERRUPTED and first.finished_at is None and first.resumed_by == second
    assert second.status == SweepStatus.FINISHED and second.counts["deleted"] == 7
    assert not Record.objects.filter(pk__in=ids).exists()
    listed = tombstoned_ids("compaction")
    assert sorted(listed) == ids  # each row in exactly one tombstone
    assert SweepBatch.objects.filter(run=first).count() == 1 and SweepBatch.objects.filter(run=second).count() == 3


def test_batch_that_fails_after_signing_rolls_back_its_tombstone_and_the_next_run_does_it(tenant, monkeypatch):
    ids = hidden_rows_insert(tenant, 5)
    real = compaction.records_forget

    def forget_then_crash(**kwargs):
        real(**kwargs)
        raise DatabaseError("the connection was lost")

    monkeypatch.setattr(compaction, "records_forget", forget_then_crash)
    with pytest.raises(DatabaseError):
        sweep_run_sync(kind="compaction", actor="test")
    failed = SweepRun.objects.get()
    assert failed.status == SweepStatus.FAILED and "connection was lost" in failed.errors[0]["error"]
    assert Record.objects.filter(pk__in=ids).count() == 5 and not ForgetEvent.objects.filter(path="compaction")
    monkeypatch.setattr(compaction, "records_forget", real)

    run = sweep_run_sync(kind="compaction", actor="test")

    assert run.counts["deleted"] == 5 and sorted(tombstoned_ids("compaction")) == ids


def test_a_batch_runs_without_cyclic_gc_and_gives_it_back_even_when_it_fails(tenant, monkeypatch):
    hidden_rows_insert(tenant, 3)
    seen = []
    real = compaction.records_forget

    def forget_then_maybe_crash(**kwargs):
        seen.append(gc.isenabled())
        result = real(**kwargs)
        if len(seen) == 1:
            raise DatabaseError("the connection was lost")
        return result

    monkeypatch.setattr(compaction, "records_forget", forget_then_maybe_crash)
    with pytest.raises(DatabaseError):
        sweep_run_sync(kind="compaction", actor="test")
    assert gc.isenabled()
    run = sweep_run_sync(kind="compaction", actor="test")

    assert seen == [False, False] and gc.isenabled() and run.counts["deleted"] == 3
    gc.disable()
    try:  # whoever disabled it before keeps it disabled
        hidden_rows_insert(tenant, 2)
        sweep_run_sync(kind="compaction", actor="test")
        assert not gc.isenabled() and seen == [False, False, False]
    finally:
        gc.enable()


def test_a_duplicate_delivery_of_a_step_is_harmless(tenant):
    hidden_rows_insert(tenant, 3)
    run = sweep_run_sync(kind="compaction", actor="test")

    again = sweep_run_batch(run_id=run.pk)

    assert not again.more and SweepBatch.objects.filter(run=run).count() == 1
    assert ForgetEvent.objects.filter(path="compaction").count() == 1


def test_sweep_tasks_enqueue_the_next_batch_only_after_commit(tenant, monkeypatch, django_capture_on_commit_callbacks):
    hidden_rows_insert(tenant, 5)
    monkeypatch.setattr(compaction, "COMPACTION_BATCH", 2)
    sent = []
    monkeypatch.setattr(sweep_step, "delay", lambda run_id: sent.append(run_id))

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run_id = sweep_start.run("compaction")
    assert len(callbacks) == 1 and sent == [run_id]
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            sweep_step.run(run_id)

    assert sent == [run_id] * 3  # after batches 1 and 2; the third found less than a batch and finished
    assert SweepRun.objects.get(pk=run_id).status == SweepStatus.FINISHED


def test_parallel_runs_are_capped(tenant):
    for _ in range(runs.MAX_PARALLEL_RUNS):
        assert sweep_run_start(kind="compaction", actor="test")
    assert sweep_run_start(kind="compaction", actor="test") is None
    assert sweep_run_start(kind="compaction", actor="test", dry_run=True) is not None


def test_every_sweep_and_the_audit_have_a_schedule_editable_in_the_admin(admin_client):
    app.loader.import_default_modules()  # what a worker does at start: the apps' tasks modules
    tasks = {t.name: t for t in PeriodicTask.objects.all()}
    for name in ("sweep: pact TTL expiry", "sweep: compaction", "sweep: deferred erasures",
                 "sweep: pending confirmations", "coverage audit"):
        assert tasks[name].enabled and tasks[name].task in app.tasks
    assert admin_client.get(f"/admin/django_celery_beat/periodictask/{tasks['sweep: compaction'].pk}/change/")\
        .status_code == 200


def test_sweep_runs_show_in_the_admin_read_only(admin_client, tenant):
    hidden_rows_insert(tenant, 2)
    run = sweep_run_sync(kind="compaction", actor="test")

    listing = admin_client.get("/admin/memory/sweeprun/")
    page = admin_client.get(f"/admin/memory/sweeprun/{run.pk}/change/")

    assert listing.status_code == 200 and b"compaction" in listing.content
    assert page.status_code == 200 and b"deleted" in page.content and b"Save" not in page.content
