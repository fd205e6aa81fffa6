"""The erasure workflow on Celery. The task is thin: it calls the step (dsr/services/workflow.py) and
goes on with the next one. Ids, not objects; late acknowledgement, so a step whose worker died is
delivered again and, being idempotent, resumes.

A step that is due right away runs in the same task, without a round trip through the broker: every step
commits its own transaction and keeps its state in the database, so a worker killed between two steps
(or inside one) loses nothing. The message that started the chain is acknowledged only when the task
returns, and its redelivery starts from the first step, which finds its work done and says where the
request stands (`_next_for`). A chain runs for at most INLINE_SECONDS; then the next step is enqueued
after commit like any other, so that one large request neither holds a worker for long nor outlives the
broker's visibility timeout, and other requests get their turn.

Requests started together (`workflows_start`) get one message per group of them (`workflow_dispatch`),
which runs each one's chain in turn: the first chain's steps take the group along, and the others, found
finished by one read for all of them, are skipped (each one's delivery, then its read, used to be the cost).
`workflow_resume`, on a beat schedule (migration dsr 0007), re-enqueues whatever stands still between steps: a
message that was lost.

A task that fails for good raises its request's `workflow_failed` alert, and one whose steps went through
resolves it (`WorkflowTask`; dsr/services/failure_alerts.py, the alerts app).
"""
from __future__ import annotations

import logging
import time

from celery import Task, shared_task
from django.conf import settings
from django.db import OperationalError, transaction

from dsr.services import failure_alerts, notify, workflow

STEPS = {
    workflow.PLAN: workflow.step_plan,
    workflow.EVALUATE: workflow.step_evaluate,
    workflow.EXECUTE: workflow.step_execute,
    workflow.CONFIRM: workflow.step_confirm,
    workflow.NOTIFY: notify.step_notify,
}
# How long one task goes on with the steps that follow before it hands the rest to the broker: well under
# the visibility timeout (settings: 300 s), long enough that a request of ordinary size runs in one task.
INLINE_SECONDS = settings.LEDGER_WORKFLOW_INLINE_SECONDS
logger = logging.getLogger(__name__)


class WorkflowTask(Task):
    """A workflow task that failed for good (an error that is not retried, or OperationalError past its
    retries: Celery calls on_failure only then, on_retry otherwise) raises the request's `workflow_failed`
    alert; a task that ran its steps resolves the alerts of its requests (their failed step went through)."""

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        from billiard.exceptions import WorkerLostError

        if isinstance(exc, WorkerLostError):  # the message is delivered again (reject_on_worker_lost): no failure
            return
        try:
            failed = getattr(exc, "ledger_workflow", None) or (_request_ids(self.name, args, kwargs)[:1] + [None])
            failure_alerts.workflow_failure_alert(request_id=failed[0], step=failed[1], error=exc,
                                                  retries=self.request.retries)
        except Exception:  # the failure itself is in the worker's log already; the alert's is logged next to it
            logger.exception("the alert for the failed workflow task %s could not be raised", task_id)

    def on_success(self, retval, task_id, args, kwargs):
        # Celery treats an error raised here as the task's failure: the steps did go through, so it is logged.
        try:
            failure_alerts.workflow_failure_resolve(request_ids=_request_ids(self.name, args, kwargs))
        except Exception:
            logger.exception("the workflow alerts of task %s could not be resolved", task_id)


def _request_ids(name: str, args, kwargs) -> list[int]:
    if name == "dsr.workflow_dispatch":
        return list(kwargs.get("request_ids") or (args[0] if args else []))
    return [kwargs["request_id"] if "request_id" in kwargs else args[0]]


@shared_task(name="dsr.workflow_step", base=WorkflowTask, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), max_retries=5, retry_backoff=True)
def workflow_step(request_id: int, step: str) -> None:
    _chain(request_id, step, deadline=time.monotonic() + INLINE_SECONDS)


@shared_task(name="dsr.workflow_dispatch", base=WorkflowTask, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), max_retries=5, retry_backoff=True)
def workflow_dispatch(request_ids: list[int]) -> None:
    """The first step of requests started together (`workflows_start`): each one's chain in turn, in this
    task. The first chain's steps claim up to GROUP_SIZE due requests each (mostly this message's others),
    so the rest are found finished, all with one read, instead of a delivery each. Past INLINE_SECONDS,
    the requests not reached yet go back to the broker as a dispatch of their own."""
    deadline = time.monotonic() + INLINE_SECONDS
    finished: set[int] = set()
    for index, request_id in enumerate(request_ids):
        if request_id in finished:
            continue
        if index and time.monotonic() >= deadline:
            dispatch_enqueue(request_ids=[pk for pk in request_ids[index:] if pk not in finished])
            return
        _chain(request_id, workflow.PLAN, deadline=deadline)
        # What that chain's groups finished of the requests not reached yet, in one read: their chains would
        # each have found their work done with a read of its own (49 of a message's 50, ~0.2 ms a request of
        # the worker's and the database's time). A finished request stays finished; the others run their
        # chains, which read and lock them as always.
        finished = workflow.requests_finished(request_ids=request_ids[index + 1:])


def _chain(request_id: int, step: str, *, deadline: float) -> None:
    """Run `step` and the steps that follow it here until `deadline`; then enqueue the next one."""
    while step:
        try:
            step = STEPS[step](request_id=request_id).next_step
        except Exception as exc:
            try:  # which request and step failed, for the alert (WorkflowTask.on_failure)
                exc.ledger_workflow = [request_id, step]
            except AttributeError:
                pass
            raise
        if step and time.monotonic() >= deadline:
            step_enqueue(request_id=request_id, step=step)
            return


def step_enqueue(*, request_id: int, step: str) -> None:
    transaction.on_commit(lambda: workflow_step.delay(request_id, step))


def dispatch_enqueue(*, request_ids: list[int]) -> None:
    request_ids = list(request_ids)
    transaction.on_commit(lambda: workflow_dispatch.delay(request_ids))


@shared_task(name="dsr.workflow_resume", acks_late=True)
def workflow_resume() -> int:
    """Re-enqueue the next step of every request whose workflow stands between steps (a lost message,
    a worker that died before enqueueing). Harmless when the step is already queued: steps are idempotent."""
    count = 0
    for request_id, step in workflow.requests_stalled():
        step_enqueue(request_id=request_id, step=step)
        count += 1
    return count


@shared_task(name="dsr.deadline_alerts", acks_late=True)
def deadline_alerts_task() -> int:
    """Alerts for the requests near their deadline with work left, and resolve the others' (beat: hourly, alerts
    migration 0002)."""
    return failure_alerts.deadline_alerts_check().raised
