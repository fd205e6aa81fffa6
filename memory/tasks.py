"""Celery tasks of the memory app: the sweeps. Thin: a task calls one service (memory.sweeps.runs) and
re-enqueues itself after commit while work remains. Ids, not objects; late acknowledgement, so a batch
whose worker died is delivered again and, its transaction having rolled back, done again from the run's
committed cursor. The schedules are django-celery-beat PeriodicTasks (memory migration 0006), editable
in the admin."""
from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError, transaction

from memory import sweeps

logger = logging.getLogger(__name__)

SWEEP_START = "memory.sweep_start"
SWEEP_STEP = "memory.sweep_step"


@shared_task(name=SWEEP_START, acks_late=True)
def sweep_start(kind: str, dry_run: bool = False) -> int | None:
    """Open a run of the sweep `kind` (beat calls this) and enqueue its first batch."""
    run = sweeps.sweep_run_start(kind=kind, dry_run=dry_run, actor="celery-beat")
    if run is not None:
        step_enqueue(run_id=run.pk)
    return run.pk if run else None


@shared_task(name=SWEEP_STEP, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError,), max_retries=5, retry_backoff=True)
def sweep_step(run_id: int) -> None:
    """One batch of the run; the next one is enqueued after this one committed."""
    try:
        step = sweeps.sweep_run_batch(run_id=run_id)
    except OperationalError:
        raise
    except Exception as exc:  # a refusal or a bug: on record in the run, which ends; the next run starts over
        logger.exception("sweep run %s: batch failed", run_id)
        sweeps.sweep_run_fail(run_id=run_id, error=exc)
        return
    if step.more:
        step_enqueue(run_id=run_id)


def step_enqueue(*, run_id: int) -> None:
    transaction.on_commit(lambda: sweep_step.delay(run_id))
