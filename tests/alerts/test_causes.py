"""Each cause raises exactly one alert however often it happens, and the alert resolves when the cause does:
a workflow step failing past its retries, a sweep failing, the coverage audit finding a gap, a request near its
deadline with work left. Run in-process here (the Celery tasks through `apply`, Celery's own tracer: the same
on_failure / on_success calls a worker makes); tests/alerts/test_worker.py runs the workflow's on a real worker."""
from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from alerts.models import Alert, AlertKind
from dsr import tasks as dsr_tasks
from dsr.models import RequestStatus, SubjectRequest
from dsr.services import failure_alerts
from memory.models import Subject, SweepRun
from memory.sweeps import compaction, sweep_run_sync
from retention.audit import coverage_audit
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import ContentClassFactory, record, rule

pytestmark = pytest.mark.django_db


def open_alerts(kind):
    return list(Alert.objects.filter(kind=kind, resolved_at__isnull=True))


# --- 1. a workflow step fails past its retries ----------------------------------------------------------------

def test_a_workflow_step_failing_again_and_again_is_one_alert_resolved_when_the_step_goes_through(
        monkeypatch, mailoutbox, operators, django_capture_on_commit_callbacks):
    request = verified_request(erasure_scenario())
    real_plan = dsr_tasks.STEPS["plan"]

    def broken(**kwargs):
        raise RuntimeError("the planner hit a bug")

    monkeypatch.setitem(dsr_tasks.STEPS, "plan", broken)
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):  # the first delivery, then workflow_resume's re-enqueues, fail the same way
            assert dsr_tasks.workflow_step.apply(args=(request.pk, "plan")).failed()

    (alert,) = open_alerts(AlertKind.WORKFLOW_FAILED)
    assert alert.cause == f"request:{request.pk}" and alert.tenant_id == request.tenant_id
    assert alert.occurrences == 3 and "plan step" in alert.title and "RuntimeError" in alert.detail
    assert alert.link == f"/admin/dsr/subjectrequest/{request.pk}/change/"
    assert len(mailoutbox) == 1

    monkeypatch.setitem(dsr_tasks.STEPS, "plan", real_plan)
    with django_capture_on_commit_callbacks(execute=True):
        assert dsr_tasks.workflow_step.apply(args=(request.pk, "plan")).successful()

    assert open_alerts(AlertKind.WORKFLOW_FAILED) == []
    assert Alert.objects.get(pk=alert.pk).resolution == "a later run of the workflow's steps went through"


def test_a_retried_database_error_alerts_only_past_its_retries(monkeypatch):
    request = verified_request(erasure_scenario())
    calls = []

    def flaky(**kwargs):
        calls.append(1)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setitem(dsr_tasks.STEPS, "plan", flaky)
    assert dsr_tasks.workflow_step.apply(args=(request.pk, "plan")).failed()

    assert len(calls) == 6  # the first attempt and the task's five retries
    (alert,) = open_alerts(AlertKind.WORKFLOW_FAILED)
    assert "OperationalError" in alert.detail and "Retries before giving up: 5" in alert.detail


def test_a_dispatch_names_the_request_whose_step_failed(monkeypatch):
    scenario = erasure_scenario()
    first, failing = verified_request(scenario), verified_request(scenario)
    SubjectRequest.objects.filter(pk__in=[first.pk, failing.pk]).update(workflow_started_at=timezone.now())
    real_plan = dsr_tasks.STEPS["plan"]

    def fails_for_one(*, request_id):
        if request_id == failing.pk:
            raise RuntimeError("bad request")
        return real_plan(request_id=request_id)

    monkeypatch.setitem(dsr_tasks.STEPS, "plan", fails_for_one)
    monkeypatch.setattr(dsr_tasks.workflow, "requests_finished", lambda request_ids: set())
    monkeypatch.setitem(dsr_tasks.STEPS, "evaluate", lambda request_id: dsr_tasks.workflow.StepResult(True, None))
    assert dsr_tasks.workflow_dispatch.apply(args=([first.pk, failing.pk],)).failed()

    (alert,) = open_alerts(AlertKind.WORKFLOW_FAILED)
    assert alert.cause == f"request:{failing.pk}" and "plan step" in alert.title


# --- 2. a sweep fails ---------------------------------------------------------------------------------------

def test_a_sweep_failing_run_after_run_is_one_alert_resolved_by_the_next_run_that_finishes(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(compaction, "compaction_batch", broken)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            sweep_run_sync(kind="compaction", actor="test")
    (alert,) = open_alerts(AlertKind.SWEEP_FAILED)
    failed = SweepRun.objects.filter(kind="compaction", status="failed").order_by("pk")
    assert failed.count() == 2 and alert.occurrences == 2 and alert.tenant_id is None
    assert alert.cause == "compaction" and "disk full" in alert.detail
    assert alert.link == f"/admin/memory/sweeprun/{failed.last().pk}/change/"  # the latest failure
    monkeypatch.undo()

    sweep_run_sync(kind="compaction", actor="test", dry_run=True)
    assert open_alerts(AlertKind.SWEEP_FAILED) == [alert]  # a dry run changes nothing: it proves nothing either
    sweep_run_sync(kind="pact_expiry", actor="test")
    assert open_alerts(AlertKind.SWEEP_FAILED) == [alert]  # another kind's success is not this kind's

    run = sweep_run_sync(kind="compaction", actor="test")
    assert run.status == "finished" and open_alerts(AlertKind.SWEEP_FAILED) == []


# --- 3. the coverage audit finds a gap ------------------------------------------------------------------------

def test_a_coverage_gap_found_by_two_audits_is_one_alert_resolved_when_an_audit_finds_none(tenant):
    trades = ContentClassFactory(tenant=tenant, name="trades")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4", protects="content", mode="compliance")
    trade = record(tenant, trades, content="bought 100")
    with connection.cursor() as cursor:  # the record destroyed behind the system's back (a copy kept aside)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("CREATE TEMP TABLE saved AS SELECT * FROM memory_record WHERE id = %s", [trade.pk])
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_guard_delete")
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [trade.pk])
        cursor.execute("ALTER TABLE memory_record ENABLE TRIGGER memory_record_guard_delete")

    reports = [coverage_audit(actor="test") for _ in range(2)]

    assert all(r.gaps == 1 for r in reports)
    (alert,) = open_alerts(AlertKind.COVERAGE_GAP)
    assert alert.tenant_id == tenant.pk and alert.cause == f"class:{trades.pk}" and alert.occurrences == 2
    assert "trades" in alert.title and "SEC 17a-4" in alert.detail and "bought" not in alert.detail
    assert alert.link == f"/admin/retention/coveragereport/{reports[1].pk}/change/"

    with connection.cursor() as cursor:  # restored from the backup
        cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'memory_record' "
                       "AND is_generated = 'NEVER' ORDER BY ordinal_position")
        columns = ", ".join(f'"{name}"' for (name,) in cursor.fetchall())
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER USER")
        cursor.execute(f"INSERT INTO memory_record ({columns}) SELECT {columns} FROM saved")
        cursor.execute("ALTER TABLE memory_record ENABLE TRIGGER USER")
    clean = coverage_audit(actor="test")

    assert clean.gaps == 0 and open_alerts(AlertKind.COVERAGE_GAP) == []
    assert "found no gap" in Alert.objects.get(pk=alert.pk).resolution


# --- 4. a request near its deadline with work left ------------------------------------------------------------

def _request(tenant, *, due_in: int, status=RequestStatus.RECEIVED, **fields) -> SubjectRequest:
    subject, _ = Subject.objects.get_or_create(tenant=tenant, ref=f"subject-{due_in}-{status}")
    return SubjectRequest.objects.create(
        tenant=tenant, subject=subject, type="erasure", regulation="gdpr", received_at=timezone.now(),
        due_date=date.today() + timedelta(days=due_in), status=status, **fields)


def test_a_request_near_its_deadline_is_one_alert_per_check_period_resolved_once_answered(
        tenant, settings, mailoutbox, operators, django_capture_on_commit_callbacks):
    settings.LEDGER_ALERT_DEADLINE_DAYS = 5
    near = _request(tenant, due_in=3)
    overdue = _request(tenant, due_in=-2, status=RequestStatus.VERIFIED)
    _request(tenant, due_in=20)                                               # not near yet
    _request(tenant, due_in=1, status=RequestStatus.COMPLETED, notified_at=timezone.now())  # answered
    _request(tenant, due_in=2, status=RequestStatus.CLOSED)                   # ended

    with django_capture_on_commit_callbacks(execute=True):
        checks = [failure_alerts.deadline_alerts_check() for _ in range(3)]

    assert [c.raised for c in checks] == [2, 2, 2]
    alerts = {a.cause: a for a in open_alerts(AlertKind.DEADLINE_NEAR)}
    assert set(alerts) == {f"request:{near.pk}", f"request:{overdue.pk}"}
    assert alerts[f"request:{near.pk}"].occurrences == 3 and alerts[f"request:{near.pk}"].level == "warning"
    assert "due in 3 days" in alerts[f"request:{near.pk}"].title
    assert "verify identity" in alerts[f"request:{near.pk}"].detail
    assert alerts[f"request:{overdue.pk}"].level == "error" and "overdue by 2 days" in alerts[f"request:{overdue.pk}"].title
    assert len(mailoutbox) == 2  # one per alert, not per check

    SubjectRequest.objects.filter(pk=near.pk).update(status=RequestStatus.COMPLETED, notified_at=timezone.now())
    assert failure_alerts.deadline_alerts_check().resolved == 1
    assert {a.cause for a in open_alerts(AlertKind.DEADLINE_NEAR)} == {f"request:{overdue.pk}"}


def test_the_deadline_check_is_scheduled_by_the_migration():
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(name="alerts: requests near their deadline")
    assert task.task == "dsr.deadline_alerts" and task.enabled and task.interval.every == 60
    assert dsr_tasks.deadline_alerts_task.name == "dsr.deadline_alerts"
