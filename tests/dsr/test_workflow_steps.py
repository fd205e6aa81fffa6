"""The workflow's steps run in this process, one after the other (the Celery run is test_workflow.py):
the decisions, the conflicts, idempotence of every step."""
import pytest

from dsr.models import ItemDecision, ItemOutcome, RequestItem, RequestStatus, RetentionConflict, SubjectNotice
from dsr.services import notify, workflow
from memory.models import DerivedArtifact, Record
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request

pytestmark = pytest.mark.django_db

STEPS = {"plan": workflow.step_plan, "evaluate": workflow.step_evaluate, "execute": workflow.step_execute,
         "confirm": workflow.step_confirm, "notify": notify.step_notify}


def run_to_end(request_id: int, *, twice: bool = False) -> list[str]:
    step, ran = "plan", []
    while step:
        result = STEPS[step](request_id=request_id)
        if twice:
            STEPS[step](request_id=request_id)
        ran.append(step)
        step = result.next_step
    return ran


def test_erasure_runs_to_partially_completed_with_two_conflicts(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario)

    run_to_end(request.pk)

    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    conflicts = RetentionConflict.objects.filter(request=request).order_by("record_id")
    assert [(c.record_id, c.code, c.authority) for c in conflicts] == [
        (scenario.under_rule.pk, "retention_lock", "SEC 17a-4(f)"),
        (scenario.under_hold.pk, "legal_hold", "court order 26-cv-7"),
    ]
    assert not Record.objects.filter(pk__in=[r.pk for r in scenario.free]).exists()
    kept = Record.objects.filter(pk__in=[scenario.under_rule.pk, scenario.under_hold.pk])
    assert [(r.content != "", r.forgotten_at is not None) for r in kept] == [(True, True), (True, True)]
    assert not DerivedArtifact.objects.filter(pk=scenario.summary_id).exists()
    assert not DerivedArtifact.objects.filter(lineage__source__in=kept).exists()
    (mail,) = mailoutbox
    assert "supervisory authority" in mail.body and "SEC 17a-4(f)" in mail.body and "/verify/?id=" in mail.body
    assert mail.attachments[0][0].startswith("receipt-request-")
    assert SubjectNotice.objects.get(request=request).sent_at is not None


def test_every_step_run_twice_changes_nothing_more(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario)

    run_to_end(request.pk, twice=True)

    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    assert RetentionConflict.objects.filter(request=request).count() == 2
    events = set(RequestItem.objects.filter(request=request).values_list("forget_event_id", flat=True)) - {None}
    assert len(events) == 2  # one forget per decision (erase, hide), never repeated
    assert len(mailoutbox) == 1
    assert request.history.filter(action="confirm").count() == 1


def test_existence_only_lock_is_redacted_not_kept(mailoutbox):
    scenario = erasure_scenario(protects="existence")
    request = verified_request(scenario)

    run_to_end(request.pk)

    item = RequestItem.objects.get(request=request, object_id=scenario.under_rule.pk, kind="record")
    assert (item.decision, item.outcome) == (ItemDecision.REDACT, ItemOutcome.REDACTED)
    assert Record.objects.get(pk=scenario.under_rule.pk).content == ""
    assert RetentionConflict.objects.filter(request=request).count() == 1


def test_access_request_exports_live_data_only(mailoutbox):
    scenario = erasure_scenario()
    from memory.services import ForgetTarget, records_forget
    records_forget(tenant=scenario.tenant, target=ForgetTarget(record_ids=(scenario.free[2].pk,)), mode="soft",
                   actor="t")
    request = verified_request(scenario, type="access")

    run_to_end(request.pk)

    request.refresh_from_db()
    assert request.status == RequestStatus.COMPLETED
    exported = {r["id"] for r in request.export["records"]}
    assert scenario.free[0].pk in exported and scenario.free[2].pk not in exported
    assert "Falcon" not in str(request.export)
    assert Record.objects.filter(pk=scenario.free[0].pk).exists()


def test_one_delivery_runs_every_step_that_is_due_without_a_round_trip(mailoutbox, django_capture_on_commit_callbacks):
    from dsr.tasks import workflow_step

    scenario = erasure_scenario()
    request = verified_request(scenario)

    with django_capture_on_commit_callbacks() as enqueued:
        workflow_step.run(request.pk, "plan")

    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED and request.notified_at is not None
    assert enqueued == []  # nothing handed to the broker: every step ran in this task
    assert list(request.history.values_list("action", flat=True)) == [
        "plan", "evaluate", "executed", "confirm", "subject_notified"]
    assert len(mailoutbox) == 1


def test_a_chain_past_its_time_budget_enqueues_the_next_step_after_commit(mailoutbox, monkeypatch,
                                                                           django_capture_on_commit_callbacks):
    from dsr import tasks

    monkeypatch.setattr(tasks, "INLINE_SECONDS", 0)
    scenario = erasure_scenario()
    request = verified_request(scenario)

    with django_capture_on_commit_callbacks() as enqueued:
        tasks.workflow_step.run(request.pk, "plan")

    request.refresh_from_db()
    assert (request.status, request.executed_at) == (RequestStatus.EXECUTING, None)  # planned and evaluated only
    assert len(enqueued) == 1 and mailoutbox == []


def test_redelivery_of_the_first_step_after_a_crash_resumes_where_the_request_stands(mailoutbox):
    from dsr.tasks import workflow_step

    scenario = erasure_scenario()
    request = verified_request(scenario)
    workflow.step_plan(request_id=request.pk)
    workflow.step_execute(request_id=request.pk)  # then the worker died: the "plan" message comes back

    workflow_step.run(request.pk, "plan")

    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED and request.notified_at is not None
    assert request.history.filter(action="plan").count() == 1
    assert request.history.filter(action="executed").count() == 1
    events = set(RequestItem.objects.filter(request=request).values_list("forget_event_id", flat=True)) - {None}
    assert len(events) == 2 and len(mailoutbox) == 1


def test_workflow_queries_do_not_grow_with_the_subjects_records(mailoutbox):
    """The steps are set-based: 10 times the records, the same queries (one forget per decision)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import record

    counts = []
    # The first run also creates the signing keys; the two after it are compared.
    for tenant_name, extra in (("acme", 0), ("globex", 3), ("initech", 30)):
        scenario = erasure_scenario(tenant_name=tenant_name)
        for i in range(extra):
            record(scenario.tenant, scenario.free[0].content_class, scope=f"user:7/session:{i % 3}",
                   content=f"note {i}", subject="subject-7")
        request = verified_request(scenario)
        with CaptureQueriesContext(connection) as queries:
            assert run_to_end(request.pk) == ["plan", "execute", "confirm", "notify"]
        counts.append(len(queries))

    assert counts[1] == counts[2]
    assert counts[2] <= 130


def test_the_plan_opens_each_conflict_whole_naming_the_blocking_rule_or_hold(mailoutbox):
    from dsr.models import ConflictStatus

    scenario = erasure_scenario()
    request = verified_request(scenario)

    workflow.step_plan(request_id=request.pk)

    by_record = {c.record_id: c for c in RetentionConflict.objects.filter(request=request)}
    rule, hold = by_record[scenario.under_rule.pk], by_record[scenario.under_hold.pk]
    for conflict in (rule, hold):
        assert (conflict.tenant_id, conflict.status, conflict.decided_by, conflict.justification) == (
            scenario.tenant.pk, ConflictStatus.OPEN, "", "")
        assert conflict.decided_at is None and conflict.deferred_to is None and conflict.opened_at is not None
        assert conflict.blocking and all(b.get("authority") for b in conflict.blocking)
    assert [b["authority"] for b in rule.blocking] == ["SEC 17a-4(f)"]
    assert [b["authority"] for b in hold.blocking] == ["court order 26-cv-7"]
    item = RequestItem.objects.get(request=request, kind="record", object_id=scenario.under_rule.pk)
    assert rule.locked_until is not None and rule.locked_until == item.deferred_until
    assert hold.locked_until is None  # a hold has no end date
