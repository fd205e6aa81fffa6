"""Requests started together (`workflows_start`, the admin's bulk action): the marks and history rows written
set-based, one message per group of requests (`dsr.workflow_dispatch`) that runs each one's chain in turn,
each request still done on its own; and the safety net for a lost message (`workflow_resume`, scheduled)."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from config.celery import app
from dsr import tasks
from dsr.models import RequestStatus, RequestTransition, SubjectRequest
from dsr.services import workflow
from tests.dsr.test_workflow_groups import SUBJECTS, assert_done_on_its_own
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request

pytestmark = pytest.mark.django_db


def verified_requests(subjects=SUBJECTS) -> list[tuple]:
    made = []
    for subject in subjects:
        scenario = erasure_scenario(subject=subject)
        made.append((scenario, verified_request(scenario, subject=subject)))
    return made


@pytest.fixture
def enqueued(monkeypatch) -> dict[str, list]:
    """What the workflow hands to the broker, recorded instead of sent (these tests run the tasks' bodies in
    this process; tests/dsr/test_workflow_celery.py sends them to real workers)."""
    sent = {"dispatch": [], "step": []}
    monkeypatch.setattr(tasks, "dispatch_enqueue", lambda *, request_ids: sent["dispatch"].append(list(request_ids)))
    monkeypatch.setattr(tasks, "step_enqueue", lambda *, request_id, step: sent["step"].append((request_id, step)))
    return sent


def test_starting_several_marks_each_writes_its_history_and_sends_one_message_per_group(monkeypatch, enqueued):
    monkeypatch.setattr(workflow, "GROUP_SIZE", 2)
    made = [request for _, request in verified_requests(("s-1", "s-2", "s-3", "s-4", "s-5"))]
    received = SubjectRequest.objects.create(
        tenant=made[0].tenant, subject=made[0].subject, type="erasure", regulation="gdpr", received_at=timezone.now(),
        due_date=timezone.now().date(), contact_email="subject@example.org", status=RequestStatus.RECEIVED)

    with CaptureQueriesContext(connection) as queries:
        result = workflow.workflows_start(requests=made + [received], actor="operator:test")

    assert [r.pk for r in result.started] == [r.pk for r in made]
    assert [r.pk for r in result.refused] == [received.pk]
    assert len(queries) == 2  # one UPDATE of the marks, one INSERT of the history rows
    ids = [r.pk for r in made]
    assert enqueued["dispatch"] == [ids[0:2], ids[2:4], ids[4:5]]
    assert not enqueued["step"]
    assert SubjectRequest.objects.filter(pk__in=ids, workflow_started_at__isnull=False).count() == 5
    assert all(r.workflow_started_at for r in result.started)
    assert sorted(RequestTransition.objects.filter(action="workflow_started").values_list("request_id", flat=True)) \
        == ids
    received.refresh_from_db()
    assert received.workflow_started_at is None and received.status == RequestStatus.RECEIVED
    assert not received.history.exists()


def test_one_request_started_alone_still_refuses_when_not_verified(enqueued):
    scenario = erasure_scenario()
    request = verified_request(scenario)
    SubjectRequest.objects.filter(pk=request.pk).update(status=RequestStatus.RECEIVED)
    request.refresh_from_db()
    with pytest.raises(Exception) as refused:
        workflow.workflow_start(request=request, actor="operator:test")
    assert getattr(refused.value, "code", None) == "not_verified"
    assert not enqueued["dispatch"] and not request.history.exists()


def test_a_dispatch_carries_every_request_of_its_message_each_on_its_own(monkeypatch, enqueued, mailoutbox):
    """Groups of two for three requests: the first chain takes two along, the third gets a chain of its own
    in the same task; each request is done once, with its own forgets, tombstones and notice."""
    made = verified_requests()
    workflow.workflows_start(requests=[request for _, request in made], actor="operator:test")
    (message,) = enqueued["dispatch"]
    monkeypatch.setattr(workflow, "GROUP_SIZE", 2)  # as if a worker's setting were smaller than the sender's

    tasks.workflow_dispatch(message)  # the task's body, in this process
    tasks.workflow_dispatch(message)  # delivered again: every request is found done

    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)
    assert len(mailoutbox) == 3
    assert not enqueued["step"] and len(enqueued["dispatch"]) == 1


def test_a_dispatch_past_its_time_hands_the_rest_back_to_the_broker(monkeypatch, enqueued):
    monkeypatch.setattr(tasks, "INLINE_SECONDS", 0)
    made = verified_requests()
    ids = [request.pk for _, request in made]
    workflow.workflows_start(requests=[request for _, request in made], actor="operator:test")

    tasks.workflow_dispatch(ids)

    # The first chain ran one step (plan and evaluate, for the group) and enqueued its next; the others
    # were not reached and go back as a dispatch of their own.
    assert enqueued["step"] == [(ids[0], workflow.EXECUTE)]
    assert enqueued["dispatch"][1:] == [ids[1:]]
    assert set(SubjectRequest.objects.filter(pk__in=ids).values_list("status", flat=True)) == {RequestStatus.EXECUTING}


def test_a_started_request_whose_message_was_lost_is_found_stalled_and_resumed(enqueued):
    scenario = erasure_scenario()
    started = verified_request(scenario)
    workflow.workflows_start(requests=[started], actor="operator:test")  # its message never arrives
    other = erasure_scenario(subject="subject-8")
    waiting = verified_request(other, subject="subject-8")  # verified, never started: not the workflow's yet
    an_hour_ago = timezone.now() - timedelta(hours=1)
    RequestTransition.objects.filter(request__in=[started, waiting]).update(at=an_hour_ago)

    assert list(workflow.requests_stalled(older_than_seconds=300)) == [(started.pk, workflow.PLAN)]
    assert tasks.workflow_resume() == 1
    assert enqueued["step"] == [(started.pk, workflow.PLAN)]


def test_the_resume_runs_on_a_schedule_editable_in_the_admin(admin_client):
    app.loader.import_default_modules()  # what a worker does at start: the apps' tasks modules
    task = PeriodicTask.objects.get(name="erasure workflow: resume stalled requests")
    assert task.enabled and task.task in app.tasks and task.interval.every == 5
    assert admin_client.get(f"/admin/django_celery_beat/periodictask/{task.pk}/change/").status_code == 200


def test_a_dispatch_skips_the_requests_its_first_chain_finished_after_one_read_for_all(monkeypatch, enqueued):
    made = verified_requests()
    ids = [request.pk for _, request in made]
    workflow.workflows_start(requests=[request for _, request in made], actor="operator:test")
    reads, standing = [], workflow._standing
    monkeypatch.setattr(workflow, "_standing", lambda request_id: reads.append(request_id) or standing(request_id))

    tasks.workflow_dispatch(ids)

    # The first chain's groups finished all three: the two others are not read one by one (their chains
    # would each have found their work done), and nothing is left for another message.
    assert not SubjectRequest.objects.filter(pk__in=ids, notified_at__isnull=True).exists()
    assert set(reads) == {ids[0]} and enqueued["dispatch"] == [ids]


def test_a_dispatch_still_runs_the_chain_of_a_request_its_first_chain_did_not_take(monkeypatch, enqueued, mailoutbox):
    made = verified_requests()
    ids = [request.pk for _, request in made]
    workflow.workflows_start(requests=[request for _, request in made], actor="operator:test")
    monkeypatch.setattr(workflow, "GROUP_SIZE", 2)

    assert workflow.requests_finished(request_ids=ids) == set()
    tasks.workflow_dispatch(ids)

    assert workflow.requests_finished(request_ids=ids + [max(ids) + 1000]) == set(ids) | {max(ids) + 1000}
    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)
