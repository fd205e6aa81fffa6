"""Pending confirmations: confirm the erasures still pending (DESIGN.md invariant 5), and report the ones
past their deadline.

A forget event that acted on records stays unconfirmed until `erasure_confirm` has read back through every
read path and found nothing. A batch claims events not yet confirmed, skips (as waiting) those whose hidden
records still hold their content (compaction or a deferred erasure has not purged them yet: nothing to
confirm), and runs the confirmation on the others. The run's last batch reports what is overdue:
copies held by other agents unacknowledged past their deadline, hidden records whose purge deadline
passed, deferred erasures of subject requests whose date passed.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, QuerySet, Value, When
from django.utils import timezone

from memory.models import FleetCopyNotice, ForgetEvent, ForgetStatus, Record
from memory.services import erasure_confirm
from memory.sweeps.common import SAMPLE, BatchResult, claim

logger = logging.getLogger(__name__)

# Events per batch: a confirmation probes every read path of every record of its event (a few queries per
# scope and per batch of ids), so a batch is a few seconds of work at most.
CONFIRM_BATCH = 20
COMPACTION_GRACE = timedelta(days=settings.LEDGER_COMPACTION_GRACE_DAYS)


def confirmations_batch(*, after: int | None = None, now: datetime | None = None,
                        batch_size: int = CONFIRM_BATCH) -> BatchResult:
    now = now or timezone.now()
    with transaction.atomic():
        pending = ForgetEvent.objects.filter(confirmed_at__isnull=True).exclude(status=ForgetStatus.REFUSED)
        claimed = claim(pending, after=after, limit=batch_size, fields=("pk", "tenant_id", "outcomes"))
        result = BatchResult(more=False).claimed([e[0] for e in claimed], batch_size)
        kept = {e[0]: e[2].get("hidden", []) + e[2].get("redacted", []) for e in claimed}
        with_content = set(Record.objects.filter(pk__in=[pk for ids in kept.values() for pk in ids])
                           .exclude(content="").values_list("pk", flat=True))
        events = ForgetEvent.objects.select_related("tenant").in_bulk([e[0] for e in claimed])
        for event_id, _tenant_id, _outcomes in claimed:
            if with_content.intersection(kept[event_id]):
                result.counts["waiting"] += 1
                continue
            confirmation = erasure_confirm(tenant=events[event_id].tenant, handle={"sequence": event_id})
            if confirmation.erased:
                result.counts["confirmed"] += 1
            else:
                result.counts["gaps"] += 1
                result.sample("events_with_gaps", [{"handle": event_id, "gaps": confirmation.gaps[:5]}])
    return result


def records_erasure_overdue(*, now: datetime) -> QuerySet:
    """Hidden records whose content is still at rest after the purge deadline their tombstone gave: the
    end of their lock when one held them at the forget, else the forget plus the compaction grace.
    Records a restriction of processing keeps (GDPR Art. 18) are not due for erasure."""
    from dsr.services.deferred import records_restricted

    deadline = Case(
        When(retained_until__gt=F("forgotten_at"), then=F("retained_until")),
        default=ExpressionWrapper(F("forgotten_at") + Value(COMPACTION_GRACE), output_field=DateTimeField()),
        output_field=DateTimeField(),
    )
    return (Record.objects.filter(forgotten_at__isnull=False, held=False).exclude(content="")
            .annotate(purge_deadline=deadline).filter(purge_deadline__lt=now)
            .exclude(pk__in=records_restricted()))


def confirmations_summary(*, now: datetime) -> dict:
    """What is past its deadline (also logged as a warning)."""
    from dsr.services.deferred import deferred_items_overdue

    # Open until its acknowledgement is signed (memory.services.fleet): the time alone does not close it.
    fleet = FleetCopyNotice.objects.filter(closing_tombstone_id__isnull=True, deadline__lt=now)
    hidden = records_erasure_overdue(now=now)
    deferred = deferred_items_overdue(now=now)
    overdue = {
        "fleet_copies_unacknowledged": fleet.count(),
        "fleet_copies_sample": [{"artifact_id": a, "holder": h, "deadline": d.isoformat(), "handle": e}
                                for a, h, d, e in fleet.order_by("deadline", "pk")
                                .values_list("artifact_id", "holder", "deadline", "forget_event_id")[:SAMPLE]],
        "hidden_records_past_purge_deadline": hidden.count(),
        "hidden_records_sample": list(hidden.order_by("pk").values_list("pk", flat=True)[:SAMPLE]),
        "deferred_erasures_past_date": deferred.count(),
        "deferred_erasures_sample": list(deferred.order_by("pk").values_list("object_id", flat=True)[:SAMPLE]),
        "unconfirmed_events": ForgetEvent.objects.filter(confirmed_at__isnull=True)
        .exclude(status=ForgetStatus.REFUSED).count(),
    }
    late = (overdue["fleet_copies_unacknowledged"] + overdue["hidden_records_past_purge_deadline"]
            + overdue["deferred_erasures_past_date"])
    if late:
        logger.warning("erasures past their deadline: %s fleet copies unacknowledged, %s hidden records not "
                       "purged, %s deferred erasures not done", overdue["fleet_copies_unacknowledged"],
                       overdue["hidden_records_past_purge_deadline"], overdue["deferred_erasures_past_date"])
    return {"overdue": overdue}


def confirmations_preview(*, now: datetime) -> dict:
    pending = ForgetEvent.objects.filter(confirmed_at__isnull=True).exclude(status=ForgetStatus.REFUSED)
    return {"would_check": pending.count(),
            "sample": list(pending.order_by("pk").values_list("pk", flat=True)[:SAMPLE]),
            **confirmations_summary(now=now)}
