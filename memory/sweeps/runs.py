"""Sweep runs: start, one batch at a time, finish, fail; and the registry of the sweeps.

A run makes one pass over the id space of its sweep: each batch claims rows past the run's cursor, so a run
always ends, and rows that a concurrent run holds are left to that run (SKIP LOCKED). Everything a run
needs is in the database (its row, its cursor, the rows still eligible): when a worker dies mid-batch the
batch's transaction rolls back and the redelivered task (acks_late) or the next run does it again, with
no tombstone issued twice (the tombstone is issued inside the batch's transaction).

A dry run calls the sweep's `preview`: counts and examples of what it would do, computed set-based, with
nothing changed but its own SweepRun row.
"""
from __future__ import annotations

import gc
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import import_module
from typing import Callable

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from alerts.models import AlertKind
from alerts.services import alert_raise, alert_resolve
from memory import errors
from memory.models import SweepBatch, SweepKind, SweepRun, SweepStatus
from memory.sweeps.common import BatchResult, counts_merge

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(seconds=settings.LEDGER_SWEEP_STALE_SECONDS)
# Runs of one kind going at once: each is safe next to the others (they share the work through SKIP
# LOCKED), but a schedule firing while a long run still goes should not pile up chains without end.
MAX_PARALLEL_RUNS = 4
MAX_ERRORS_KEPT = 20


@dataclass(frozen=True)
class Sweep:
    kind: str
    batch: Callable[..., BatchResult]     # (after=, now=) -> BatchResult, one batch in its own transaction
    preview: Callable[..., dict]          # (now=) -> what a run would do, changing nothing
    summary: Callable[..., dict]          # (now=) -> what stays and why, put on record when a run ends


# The sweeps, by kind: module and function prefix (imported when used: the deferred erasures belong to dsr).
REGISTRY: dict[str, tuple[str, str]] = {
    SweepKind.COMPACTION: ("memory.sweeps.compaction", "compaction"),
    SweepKind.PACT_EXPIRY: ("memory.sweeps.pact", "pact_expiry"),
    SweepKind.DEFERRED_ERASURES: ("dsr.services.deferred", "deferred_erasures"),
    SweepKind.CONFIRMATIONS: ("memory.sweeps.confirmations", "confirmations"),
    SweepKind.SALTS_SHREDDING: ("dsr.services.salts", "salts_shredding"),
}


def sweep_get(kind: str) -> Sweep:
    if kind not in REGISTRY:
        raise errors.invalid("invalid_sweep", f"kind must be one of {sorted(REGISTRY)}.")
    module_name, prefix = REGISTRY[kind]
    module = import_module(module_name)
    return Sweep(kind=kind, batch=getattr(module, f"{prefix}_batch"), preview=getattr(module, f"{prefix}_preview"),
                 summary=getattr(module, f"{prefix}_summary"))


@dataclass(frozen=True)
class StepOutcome:
    run_id: int
    more: bool


def sweep_run_start(*, kind: str, actor: str, dry_run: bool = False) -> SweepRun | None:
    """Open a run of `kind`. Runs of that kind whose worker died (no batch for STALE_AFTER) are marked
    interrupted and point to this run, which takes their work over. Returns None when MAX_PARALLEL_RUNS
    live runs of the kind are already going."""
    sweep_get(kind)
    now = timezone.now()
    with transaction.atomic():
        running = SweepRun.objects.select_for_update().filter(kind=kind, status=SweepStatus.RUNNING)
        stale = [r for r in running if r.heartbeat_at < now - STALE_AFTER]
        if not dry_run and len(running) - len(stale) >= MAX_PARALLEL_RUNS:
            logger.info("sweep %s: %s runs already going; not starting another", kind, MAX_PARALLEL_RUNS)
            return None
        run = SweepRun.objects.create(kind=kind, actor=actor, dry_run=dry_run, started_at=now, heartbeat_at=now)
        for old in stale:
            SweepRun.objects.filter(pk=old.pk, status=SweepStatus.RUNNING).update(
                status=SweepStatus.INTERRUPTED, resumed_by=run,
                errors=(old.errors + [{"at": now.isoformat(), "error": f"no batch since {old.heartbeat_at.isoformat()}"
                                       f": its worker was lost; run {run.pk} takes over"}])[-MAX_ERRORS_KEPT:])
            logger.warning("sweep %s run %s lost its worker; run %s takes over", kind, old.pk, run.pk)
    return run


def sweep_run_batch(*, run_id: int) -> StepOutcome:
    """One batch of the run, from the run's cursor, committed with the run's bookkeeping (a SweepBatch row,
    the new cursor, the heartbeat); the last one also finishes the run. A run that is no longer running
    does nothing, so a duplicate delivery of the task is harmless (it waits for the run's row lock, then
    continues from the cursor the other committed)."""
    now = timezone.now()
    with transaction.atomic():
        run = SweepRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != SweepStatus.RUNNING:
            return StepOutcome(run_id, False)
        sweep = sweep_get(run.kind)
        if run.dry_run:
            _finish(run, now=now, report=sweep.preview(now=now))
            return StepOutcome(run_id, False)
        with gc_paused():
            result = sweep.batch(after=run.cursor, now=now)
        counts = {**result.counts, **result.samples}
        if result.counts.get("claimed") or result.forget_event_ids:
            SweepBatch.objects.create(run=run, at=now, first_id=result.first_id, last_id=result.cursor,
                                      counts=counts, forget_event_ids=result.forget_event_ids,
                                      tombstone_ids=result.tombstone_ids)
        run.batches += 1
        run.heartbeat_at = now
        run.cursor = result.cursor if result.cursor is not None else run.cursor
        run.counts = counts_merge(dict(run.counts), counts)
        if result.more:
            run.save(update_fields=["batches", "heartbeat_at", "cursor", "counts"])
        else:
            _finish(run, now=now, report=sweep.summary(now=now))
    return StepOutcome(run_id, result.more)


@contextmanager
def gc_paused():
    """No cyclic garbage collection during one batch. A batch of 5,000 records allocates some 300,000 tuples,
    dicts and lists that live until it ends (rows, outcomes, the tombstone's statement): CPython's collector
    runs hundreds of times meanwhile, and its full passes walk every object of the process (Django's
    included), for nothing: the batch's objects are freed by reference counting when it ends. Measured:
    ~0.04 s of CPU per batch of 5,000, a quarter of the batch's Python time (bench/bench_compaction.py).
    Bounded: one batch, then the collector is back (and catches up) whatever happened; left alone if
    something else had already disabled it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _finish(run: SweepRun, *, now: datetime, report: dict) -> None:
    run.status = SweepStatus.FINISHED
    run.finished_at = run.heartbeat_at = now
    run.report = report
    run.save(update_fields=["status", "finished_at", "heartbeat_at", "report", "batches", "cursor", "counts"])
    if not run.dry_run:  # a run of this kind went through: the kind's failure alert (if any) closes
        alert_resolve(kind=AlertKind.SWEEP_FAILED, cause=run.kind, resolution=f"{run} finished")
    logger.info("sweep %s run %s%s finished: %s; %s", run.kind, run.pk, " (dry run)" if run.dry_run else "",
                run.counts, report)


def sweep_run_fail(*, run_id: int, error: BaseException | str) -> None:
    """Record the error and end the run as failed: the next scheduled run starts over from the database."""
    now = timezone.now()
    with transaction.atomic():
        run = SweepRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != SweepStatus.RUNNING:
            return
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        run.errors = (run.errors + [{"at": now.isoformat(), "error": text[:2000]}])[-MAX_ERRORS_KEPT:]
        run.status, run.finished_at = SweepStatus.FAILED, now
        run.save(update_fields=["errors", "status", "finished_at"])
        # One alert per sweep kind while its runs keep failing (a repeat counts); the next run that finishes
        # resolves it (`_finish`). The service's own: a sweep belongs to no tenant.
        alert_raise(kind=AlertKind.SWEEP_FAILED, cause=run.kind, title=f"The {run.kind} sweep failed",
                    detail=f"{run}: {text[:2000]}\n\nThe next scheduled run starts over from the database.",
                    link=reverse("admin:memory_sweeprun_change", args=[run.pk]))
    logger.error("sweep %s failed: %s", run_id, text)


def sweep_run_sync(*, kind: str, actor: str, dry_run: bool = False, max_batches: int | None = None) -> SweepRun | None:
    """A whole run in this process, batch after batch (management command, benchmarks, tests). The
    Celery tasks (memory.tasks) do the same one batch per task."""
    run = sweep_run_start(kind=kind, actor=actor, dry_run=dry_run)
    if run is None:
        return None
    done = 0
    try:
        while True:
            step = sweep_run_batch(run_id=run.pk)
            done += 1
            if not step.more or (max_batches is not None and done >= max_batches):
                break
    except Exception as exc:
        sweep_run_fail(run_id=run.pk, error=exc)
        raise
    run.refresh_from_db()
    return run
