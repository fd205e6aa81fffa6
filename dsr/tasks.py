"""The erasure workflow on Celery: one task, one step at a time. The task is thin: it calls the step
(dsr/services/workflow.py) and enqueues the next one after commit. Ids, not objects; late
acknowledgement, so a step whose worker died is delivered again and, being idempotent, resumes."""
from __future__ import annotations

from celery import shared_task
from django.db import OperationalError, transaction

from dsr.services import notify, workflow

STEPS = {
    workflow.PLAN: workflow.step_plan,
    workflow.EVALUATE: workflow.step_evaluate,
    workflow.EXECUTE: workflow.step_execute,
    workflow.CONFIRM: workflow.step_confirm,
    workflow.NOTIFY: notify.step_notify,
}


@shared_task(name="dsr.workflow_step", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), max_retries=5, retry_backoff=True)
def workflow_step(request_id: int, step: str) -> None:
    result = STEPS[step](request_id=request_id)
    if result.next_step:
        step_enqueue(request_id=request_id, step=result.next_step)


def step_enqueue(*, request_id: int, step: str) -> None:
    transaction.on_commit(lambda: workflow_step.delay(request_id, step))


@shared_task(name="dsr.workflow_resume", acks_late=True)
def workflow_resume() -> int:
    """Re-enqueue the next step of every request whose workflow stands between steps (a lost message,
    a worker that died before enqueueing). Harmless when the step is already queued: steps are idempotent."""
    count = 0
    for request_id, step in workflow.requests_stalled():
        step_enqueue(request_id=request_id, step=step)
        count += 1
    return count
