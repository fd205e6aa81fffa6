"""Compaction: physically purge hidden and redacted records whose locks have ended, with the artifacts
derived from them (DESIGN.md: a soft forget leaves `erasure_pending`; compaction completes the erasure).

A purge is a hard forget through `records_forget`, one per tenant per batch, signed as usual; its tombstone
names the earlier forgets whose deferred `purge_content` items it closes (`propagation.closes`).

Left alone: records a subject request keeps hidden (a deferred erasure, which dsr.services.deferred
completes and tells the subject about; a restriction of processing, GDPR Art. 18, which must be kept).
"""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet
from django.utils import timezone

from memory.models import ForgetMode, Lineage, Record
from memory.services import ForgetTarget, records_forget
from memory.services.forget import LockedRows
from memory.sweeps.common import SAMPLE, BatchResult, claim_rows, closes_of, grouped, lock_ended, tenants_of

# Rows per batch: BATCH_SIZE of records_forget (one destructive statement per table), so one batch is one
# forget and one tombstone per tenant; big enough that the signing and the claim are amortized, small
# enough that a worker killed mid-batch loses a second of work and holds its row locks as briefly.
COMPACTION_BATCH = settings.LEDGER_SWEEP_BATCH
ACTOR = "sweep:compaction"
AUTHORITY = "compaction of hidden records (their retention ended)"


def _kept_by_requests():
    # Imported here: the store does not depend on the request app, except for what requests keep.
    from dsr.services.deferred import records_kept_by_requests

    return records_kept_by_requests()


def compaction_eligible(*, now: datetime) -> QuerySet:
    """Hidden or redacted rows (a redaction always sets `forgotten_at` too) whose lock has ended and that no
    subject request keeps."""
    kept = _kept_by_requests().filter(object_id=OuterRef("pk"))
    return Record.objects.filter(forgotten_at__isnull=False).filter(lock_ended(now)).filter(~Exists(kept))


def compaction_batch(*, after: int | None = None, now: datetime | None = None,
                     batch_size: int | None = None) -> BatchResult:
    """Claim one batch of eligible rows past `after` and purge them (hard), with their derived artifacts."""
    now = now or timezone.now()
    batch_size = batch_size or COMPACTION_BATCH
    with transaction.atomic():
        # Each claimed row: ((tenant_id, forget_event_id), what the guard reads of it), read under its lock.
        rows = claim_rows(compaction_eligible(now=now), after=after, limit=batch_size,
                          fields=("tenant_id", "forget_event_id"))
        result = BatchResult(more=False).claimed([row.pk for _, row in rows], batch_size)
        tenants = tenants_of(extra[0] for extra, _ in rows)
        for tenant_id, group in grouped(rows, key=lambda r: r[0][0]):
            locked = LockedRows(tenant_id=tenant_id, rows=tuple(row for _, row in group))
            forget = records_forget(
                tenant=tenants[tenant_id], target=ForgetTarget(record_ids=tuple(row.pk for row in locked.rows)),
                mode=ForgetMode.HARD, derivatives_mode=ForgetMode.HARD, actor=ACTOR, path="compaction",
                reason="compaction: purge of hidden and redacted records whose retention ended",
                authority=AUTHORITY, locked=locked,
                closes=closes_of([(row.pk, extra[1]) for extra, row in group], "purge_content"),
            )
            result.forgot(forget)
    return result


def compaction_preview(*, now: datetime) -> dict:
    """What a run would purge now, and what waits; changes nothing."""
    eligible = compaction_eligible(now=now)
    return {
        "would_delete": eligible.count(),
        "would_delete_derived": Lineage.objects.filter(source__in=eligible.values("pk"))
        .values("artifact_id").distinct().count(),
        "sample": list(eligible.order_by("pk").values_list("pk", flat=True)[:SAMPLE]),
        **compaction_summary(now=now),
    }


def compaction_summary(*, now: datetime) -> dict:
    """Hidden and redacted rows that stay, and why: on record in the run."""
    # One pass over the hidden rows (the partial index) for the locks, not one per figure: each pass cost ~0.15 s
    # at the end of a 100,000-record run, whose dead index entries it walks again (bench/bench_compaction.py).
    retained = Q(held=False, retained_until__gt=now)
    hidden = Record.objects.filter(forgotten_at__isnull=False)
    found = hidden.aggregate(
        waiting_hold=Count("pk", filter=Q(held=True)),
        waiting_retention=Count("pk", filter=retained),
        next_lock_end=Min("retained_until", filter=retained),
    )
    # What requests keep is found from their items (few), not by a subquery per hidden row inside that pass:
    # the planner costed the subquery for every row, and past its threshold PostgreSQL JIT-compiled the query
    # (~0.1 s of the server's CPU per run, more than the query itself on a small store).
    kept = hidden.filter(lock_ended(now), pk__in=_kept_by_requests().values("object_id")).count()
    return {**found, "kept_by_requests": kept, "next_lock_end": _iso(found["next_lock_end"])}


def _iso(value) -> str | None:
    return value.isoformat() if value else None
