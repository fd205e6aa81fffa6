"""The erasure workflow on real Celery workers (separate processes) with Redis as the broker, on
PostgreSQL: the issue's scenario, a worker killed with SIGKILL mid-execute, and two workers racing."""
import pytest

from dsr.models import ItemOutcome, RequestItem, RequestStatus, RetentionConflict, SubjectNotice, SubjectRequest
from dsr.services.workflow import workflow_start, workflows_start
from dsr.tasks import STEPS, workflow_step
from memory.models import DerivedArtifact, ForgetEvent, Record
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import record
from tests.workers import wait_for
from tombstones.models import Tombstone

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def notified(request_id: int):
    return SubjectRequest.objects.filter(pk=request_id, notified_at__isnull=False).first()


def assert_done_exactly_once(request: SubjectRequest) -> None:
    """Every record processed, none twice; one tombstone per forget; one confirmation, one notice."""
    items = RequestItem.objects.filter(request=request, kind="record")
    assert not items.filter(outcome=ItemOutcome.PENDING).exists()
    events = ForgetEvent.objects.filter(actor=f"request:{request.pk}")
    seen: list[int] = []
    for event in events:
        seen += event.outcomes["hidden"] + event.outcomes["redacted"] + event.outcomes["deleted"]
    assert sorted(seen) == sorted(items.values_list("object_id", flat=True))  # each record in exactly one forget
    assert set(items.values_list("forget_event_id", flat=True)) == set(events.values_list("pk", flat=True))
    assert Tombstone.objects.filter(id__in=events.values("public_id")).count() == events.count()
    assert request.history.filter(action="confirm").count() == 1
    assert SubjectNotice.objects.filter(request=request).count() == 1
    assert request.history.filter(action="subject_notified").count() == 1


def test_erasure_request_runs_to_partially_completed_on_a_real_worker(workers, agent):
    scenario = erasure_scenario()
    request = verified_request(scenario)
    workers("solo")

    workflow_start(request=request, actor="operator:test")

    request = wait_for(lambda: notified(request.pk), timeout=90, what="the workflow to notify the subject")
    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    assert RetentionConflict.objects.filter(request=request).count() == 2
    kept = {r.pk: r for r in Record.objects.filter(pk__in=[scenario.under_rule.pk, scenario.under_hold.pk])}
    assert kept[scenario.under_rule.pk].content == "bought 100 ACME"
    assert kept[scenario.under_hold.pk].content == "the disputed message"
    for gone in scenario.free:
        assert agent.get(f"/api/v1/memory/records/{gone.pk}").status_code == 410
    for kept_id in kept:
        assert agent.get(f"/api/v1/memory/records/{kept_id}").status_code == 410
    listing = agent.get("/api/v1/memory/records", {"scope": "user:7"}).json()["results"]
    assert listing == []
    for text in ("Tangerine", "555", "Falcon", "ACME", "disputed"):
        assert agent.get("/api/v1/memory/search", {"q": text}).json()["results"] == []
        assert agent.get("/api/v1/memory/search", {"q": text, "mode": "similar"}).json()["results"] == []
    assert not DerivedArtifact.objects.filter(pk=scenario.summary_id).exists()
    assert not DerivedArtifact.objects.filter(kind="embedding", lineage__source__subject=scenario.free[0].subject)\
        .exists()
    assert_done_exactly_once(request)


def test_worker_killed_mid_execute_resumes_without_skipping_or_repeating(workers):
    scenario = erasure_scenario()
    for i in range(400):
        record(scenario.tenant, scenario.free[0].content_class, scope=f"user:7/session:{10 + i % 5}",
               content=f"note {i}", subject="subject-7")
    request = verified_request(scenario)
    first = workers("doomed", LEDGER_EXECUTE_BATCH="10")

    workflow_start(request=request, actor="operator:test")
    wait_for(lambda: RequestItem.objects.filter(request=request, kind="record")
             .exclude(outcome=ItemOutcome.PENDING).count() >= 30, timeout=90, interval=0.05,
             what="the execute step to be under way")
    first.kill()
    done_at_kill = RequestItem.objects.filter(request=request, kind="record").exclude(outcome=ItemOutcome.PENDING)\
        .count()
    assert done_at_kill < 405, "the worker finished before it could be killed; make the batches smaller"

    workers("successor", LEDGER_EXECUTE_BATCH="10")
    request = wait_for(lambda: notified(request.pk), timeout=120, what="the successor to finish the workflow")

    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    assert_done_exactly_once(request)
    assert not Record.objects.filter(subject__ref="subject-7", forgotten_at__isnull=True).exists()


def test_two_workers_running_the_same_steps_do_not_double_apply(workers):
    scenario = erasure_scenario()
    for i in range(100):
        record(scenario.tenant, scenario.free[0].content_class, scope="user:7/session:20", content=f"n{i}",
               subject="subject-7")
    request = verified_request(scenario)
    workers("left", LEDGER_EXECUTE_BATCH="10")
    workers("right", LEDGER_EXECUTE_BATCH="10")

    workflow_start(request=request, actor="operator:test")
    for _ in range(2):  # duplicate deliveries of every step, for both workers to race on
        for step in STEPS:
            workflow_step.delay(request.pk, step)

    request = wait_for(lambda: notified(request.pk), timeout=120, what="the workflow to finish")
    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    assert RetentionConflict.objects.filter(request=request).count() == 2
    assert_done_exactly_once(request)


def test_two_workers_sharing_a_batch_of_requests_do_each_exactly_once(workers):
    """Requests started together: each worker's steps claim groups of them (SKIP LOCKED), every other
    delivery finds its request advanced; each request is done once, with its own forgets and notice."""
    made = []
    for subject in ("subject-7", "subject-8", "subject-9", "subject-10", "subject-11", "subject-12"):
        scenario = erasure_scenario(subject=subject)
        made.append(verified_request(scenario, subject=subject))
    workers("left", LEDGER_WORKFLOW_GROUP_SIZE="4")
    workers("right", LEDGER_WORKFLOW_GROUP_SIZE="4")

    for request in made:
        workflow_start(request=request, actor="operator:test")
    for request in made:  # duplicate deliveries too, for the two workers to race on
        workflow_step.delay(request.pk, "plan")

    for request in made:
        request = wait_for(lambda: notified(request.pk), timeout=120, what=f"request {request.pk} to finish")
        assert request.status == RequestStatus.PARTIALLY_COMPLETED
        assert RetentionConflict.objects.filter(request=request).count() == 2
        assert ForgetEvent.objects.filter(actor=f"request:{request.pk}").count() == 2
        assert_done_exactly_once(request)


def test_requests_started_together_run_on_one_message_per_group(workers):
    """The admin's bulk start: five requests, one dispatch message (groups of two on the worker): the first
    chain takes two along, the others get chains of their own in the same task; each request done once."""
    made = []
    for subject in ("subject-7", "subject-8", "subject-9", "subject-10", "subject-11"):
        scenario = erasure_scenario(subject=subject)
        made.append(verified_request(scenario, subject=subject))
    workers("solo", LEDGER_WORKFLOW_GROUP_SIZE="2")

    workflows_start(requests=made, actor="operator:test")

    for request in made:
        request = wait_for(lambda: notified(request.pk), timeout=120, what=f"request {request.pk} to finish")
        assert request.status == RequestStatus.PARTIALLY_COMPLETED
        assert RetentionConflict.objects.filter(request=request).count() == 2
        assert_done_exactly_once(request)
