"""The sweeps: pact TTL expiry, compaction, deferred erasures (dsr.services.deferred), pending confirmations.

Each is a plain function doing one batch per call (claim with SELECT ... FOR UPDATE SKIP LOCKED, then the
one guarded forget inside the same transaction) that says whether more remains; `runs` records each run
(memory.SweepRun) and drives its batches; the Celery tasks (memory.tasks) are thin and re-enqueue.
"""
from memory.sweeps.common import BatchResult
from memory.sweeps.compaction import compaction_batch, compaction_eligible, compaction_preview
from memory.sweeps.confirmations import confirmations_batch, records_erasure_overdue
from memory.sweeps.pact import pact_expired, pact_expiry_batch, pact_ttls
from memory.sweeps.runs import (
    StepOutcome,
    sweep_get,
    sweep_run_batch,
    sweep_run_fail,
    sweep_run_start,
    sweep_run_sync,
)

__all__ = [
    "BatchResult",
    "StepOutcome",
    "compaction_batch",
    "compaction_eligible",
    "compaction_preview",
    "confirmations_batch",
    "pact_expired",
    "pact_expiry_batch",
    "pact_ttls",
    "records_erasure_overdue",
    "sweep_get",
    "sweep_run_batch",
    "sweep_run_fail",
    "sweep_run_start",
    "sweep_run_sync",
]
