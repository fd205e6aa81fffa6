"""Deferred erasures: records an erasure request had to keep (a legal hold, or a rule protecting their
content) are erased when the lock ends, and the subject is told.

An item is due when its decision was `hide`, it is still `hidden`, its request is an erasure, the record's
lock has ended (or the record is already gone), and legal has not deferred its conflict to a date still to
come. An upheld conflict meant "keep while the lock lasts": once the lock ends it is due like the others.
A conflict still open (or deferred to a date now past) when the lock ends has nothing left to decide: it
becomes `lapsed`, with who and why.

Each batch, per request: one hard forget through the one guarded path (its tombstone names, in
`propagation.closes`, the first tombstone of each record and the deferred item it closes), the items
updated (outcome deleted, the new forget event and tombstone), the conflicts settled, a history row, and a
notice to the subject written in the same transaction (an outbox) and sent after commit. A notice whose
sending a crash interrupted is sent by the next batch. Once it is sent, the salts its receipt carried are
destroyed (`dsr.services.notify.receipt_as_kept`, `salts_destroy`), in the transaction that marks it sent.

Records a *restriction* request hides (GDPR Art. 18) are kept on purpose: neither this sweep nor
compaction touches them (`records_restricted`).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet
from django.utils import timezone

from dsr.models import (
    ConflictStatus,
    ItemDecision,
    ItemKind,
    ItemOutcome,
    RequestItem,
    RequestType,
    RetentionConflict,
    SubjectNotice,
    SubjectRequest,
)
from dsr.services.notify import RIGHTS, _send, receipt_as_kept
from dsr.services.states import history_add
from dsr.services.workflow import _authority
from tombstones.receipt import receipts_bundle
from memory.models import ForgetMode, Record
from memory.services import ForgetTarget, records_forget
from memory.sweeps.common import SAMPLE, BatchResult, claim, grouped, lock_ended

logger = logging.getLogger(__name__)

# Items per batch: each request in a batch gets its own forget, tombstone, notice (with a receipt) and
# history row, so a batch is bounded by requests more than by records; 200 keeps a batch to a second or two.
DEFERRED_BATCH = 200
ACTOR = "sweep:deferred_erasures"
TOLERANCE = timedelta(hours=settings.LEDGER_AUDIT_TOLERANCE_HOURS)


def records_kept_by_requests() -> QuerySet:
    """Record items that subject requests keep hidden: deferred erasures and restrictions."""
    return RequestItem.objects.filter(kind=ItemKind.RECORD, decision=ItemDecision.HIDE, outcome=ItemOutcome.HIDDEN)


def records_restricted() -> QuerySet:
    """The ids of records hidden by a restriction of processing (kept, not due for erasure)."""
    return records_kept_by_requests().filter(request__type=RequestType.RESTRICTION).values("object_id")


def _deferred() -> QuerySet:
    return records_kept_by_requests().filter(request__type=RequestType.ERASURE)


def deferred_items_due(*, now: datetime) -> QuerySet:
    """Deferred erasure items whose record's lock has ended (or whose record is gone), unless legal
    deferred the decision to a date still to come."""
    record = Record.objects.filter(pk=OuterRef("object_id"), tenant_id=OuterRef("request__tenant_id"))
    legal_later = RetentionConflict.objects.filter(request_id=OuterRef("request_id"), record_id=OuterRef("object_id"),
                                                   status=ConflictStatus.DEFERRED, deferred_to__gt=now.date())
    return _deferred().filter(Q(Exists(record.filter(lock_ended(now)))) | Q(~Exists(record))).filter(~Exists(legal_later))


def deferred_items_overdue(*, now: datetime) -> QuerySet:
    """Due items whose deferred date passed more than the tolerance ago: the sweep is behind."""
    return deferred_items_due(now=now).filter(deferred_until__lt=now - TOLERANCE)


def deferred_erasures_batch(*, after: int | None = None, now: datetime | None = None,
                            batch_size: int = DEFERRED_BATCH) -> BatchResult:
    now = now or timezone.now()
    delivered = deferred_notices_deliver()
    with transaction.atomic():
        items = claim(deferred_items_due(now=now), after=after, limit=batch_size,
                      fields=("pk", "request_id", "object_id", "forget_event_id", "tombstone_id", "reason"))
        result = BatchResult(more=False).claimed([i[0] for i in items], batch_size)
        result.counts["notices_delivered_late"] += delivered
        requests = SubjectRequest.objects.select_related("tenant").in_bulk({i[1] for i in items})
        notices = [_request_erase(requests[request_id], group, now=now, result=result)
                   for request_id, group in grouped(items, key=lambda i: i[1])]
        notice_ids = [n.pk for n in notices if n is not None]
        transaction.on_commit(lambda: deferred_notices_deliver(notice_ids=notice_ids))
    return result


def _request_erase(request: SubjectRequest, items: list[tuple], *, now: datetime, result: BatchResult):
    by_record = {item[2]: item for item in items}
    present = set(Record.objects.filter(tenant=request.tenant, pk__in=list(by_record)).values_list("pk", flat=True))
    erased: list[int] = []
    refused: list[int] = []
    forget = None
    if present:
        first: dict[tuple, list[int]] = defaultdict(list)
        for record_id in sorted(present):
            _pk, _request, _record, event_id, tombstone_id, _reason = by_record[record_id]
            if tombstone_id:
                first[(str(tombstone_id), str(event_id))].append(record_id)
        forget = records_forget(
            tenant=request.tenant, target=ForgetTarget(record_ids=tuple(sorted(present))), mode=ForgetMode.HARD,
            derivatives_mode=ForgetMode.HARD, actor=f"request:{request.pk}", path="deferred_erasure",
            authority=_authority(request), salts_for_receipt=True,  # the notice's receipt carries them
            reason=f"{request.get_regulation_display()} {request.get_type_display()} request {request.pk}: "
                   f"deferred erasure, the retention lock ended",
            closes=[{"tombstone_id": tombstone_id, "handle": event_id, "action": "erase",
                     "items": [f"record:{pk}" for pk in ids]} for (tombstone_id, event_id), ids in sorted(first.items())],
        )
        result.forgot(forget)
        for entry in forget.results:
            (erased if entry["outcome"] == "deleted" else refused).append(entry["record_id"])
    gone = sorted(set(by_record) - present)
    result.counts["gone"] += len(gone)
    if refused:
        # The lock changed since the claim (a hold placed meanwhile): the item stays deferred.
        result.sample("refused_records", refused)
    if erased:
        RequestItem.objects.filter(pk__in=[by_record[r][0] for r in erased]).update(
            outcome=ItemOutcome.DELETED, forget_event_id=forget.event.pk, tombstone_id=forget.tombstone_id)
    if gone:
        RequestItem.objects.filter(pk__in=[by_record[r][0] for r in gone]).update(outcome=ItemOutcome.GONE)
    done = sorted(erased + gone)
    if not done:
        return None
    lapsed = RetentionConflict.objects.filter(request=request, record_id__in=done).filter(
        Q(status=ConflictStatus.OPEN) | Q(status=ConflictStatus.DEFERRED)).update(
        status=ConflictStatus.LAPSED, decided_by=ACTOR, decided_at=now,
        justification="The retention lock ended before a decision: the record was erased.")
    result.counts["conflicts_lapsed"] += lapsed
    note = (f"deferred erasure: {len(erased)} records erased after their lock ended"
            + (f" (forget #{forget.event.pk}, tombstone {forget.tombstone_id}, closing the deferred items of "
               f"tombstones {', '.join(sorted({str(by_record[r][4]) for r in erased if by_record[r][4]}))})"
               if erased else "")
            + (f"; {len(gone)} already gone" if gone else "")
            + (f"; {lapsed} open conflicts lapsed" if lapsed else ""))
    history_add(request=request, action="deferred_erasure", actor=ACTOR, note=note)
    result.counts["notices"] += 1
    return _notice_write(request, [by_record[r] for r in done], erased=set(erased),
                         tombstone_id=forget.tombstone_id if erased else None)


def _notice_write(request: SubjectRequest, items: list[tuple], *, erased: set[int], tombstone_id: str | None):
    from tombstones.services import receipt_build

    lines = [f"About your {request.get_regulation_display()} {request.get_type_display().lower()} request "
             f"{request.pk}: we told you that we had to keep some records for a while. That obligation has "
             f"ended, and they are now erased:", ""]
    for _pk, _request, record_id, _event, first_tombstone, reason in items:
        reason = reason or {}
        kept = reason.get("authority") or reason.get("code") or "a retention obligation"
        lines.append(f"- record {record_id} (kept under {kept}): "
                     + ("erased" if record_id in erased else "already erased by another process"))
    receipt = receipts_bundle(request=request.pk, receipts=[])
    if tombstone_id:
        receipt["receipts"].append(receipt_build(tombstone_id=tombstone_id, destroyed_salts_ok=True))
        firsts = sorted({str(i[4]) for i in items if i[4] and i[2] in erased})
        lines += ["", "Proof: the erasure left a signed tombstone, which also closes the deferred items of the "
                  "tombstone(s) you received before. Check it yourself, without an account, at:",
                  f"  {settings.LEDGER_PUBLIC_URL.rstrip('/')}/verify/?id={tombstone_id}",
                  f"(earlier tombstone(s): {', '.join(firsts)})" if firsts else "",
                  "The attached receipt holds the signed tombstone, its proof of inclusion in our public log, and "
                  "the salts that let you show that your data was among what was erased. Keep it."]
    lines += ["", RIGHTS]
    return SubjectNotice.objects.create(
        request=request, kind=f"deferred-{items[0][0]}", to=request.contact_email,
        subject_line=f"Your {request.get_type_display().lower()} request {request.pk}: kept records now erased",
        body="\n".join(line for line in lines if line is not None), receipt=receipt,
    )


def deferred_notices_deliver(*, notice_ids: list[int] | None = None) -> int:
    """Send the deferred-erasure notices not sent yet (these, or all of them): each under its row lock, then
    marked sent and its salts destroyed. A crash between the two sends it again: a subject told twice rather
    than never."""
    from tombstones.services import salts_destroy

    pending = SubjectNotice.objects.filter(kind__startswith="deferred-", sent_at__isnull=True)
    if notice_ids is not None:
        pending = pending.filter(pk__in=notice_ids)
    sent = 0
    for notice_id in list(pending.order_by("pk").values_list("pk", flat=True)[:100]):
        with transaction.atomic():
            notice = (SubjectNotice.objects.select_for_update(skip_locked=True).select_related("request")
                      .filter(pk=notice_id, sent_at__isnull=True).first())
            if notice is None:
                continue
            _send(notice.request, notice)
            now = timezone.now()
            receipt, tombstone_ids = receipt_as_kept(notice.receipt, sent_at=now)
            SubjectNotice.objects.filter(pk=notice.pk).update(sent_at=now, receipt=receipt)
            salts_destroy(tombstone_ids=tombstone_ids)
            sent += 1
    return sent


def deferred_erasures_preview(*, now: datetime) -> dict:
    due = deferred_items_due(now=now)
    return {
        "would_erase": due.count(),
        "requests": due.values("request_id").distinct().count(),
        "sample": list(due.order_by("pk").values_list("object_id", flat=True)[:SAMPLE]),
        **deferred_erasures_summary(now=now),
    }


def deferred_erasures_summary(*, now: datetime) -> dict:
    waiting = _deferred().exclude(pk__in=deferred_items_due(now=now).values("pk"))
    stats = waiting.aggregate(n=Count("pk"), next=Min("deferred_until"))
    return {
        "waiting": stats["n"],
        "waiting_on_holds": waiting.filter(deferred_until__isnull=True).count(),
        "next_date": stats["next"].isoformat() if stats["next"] else None,
        "overdue": deferred_items_overdue(now=now).count(),
        "notices_unsent": SubjectNotice.objects.filter(kind__startswith="deferred-", sent_at__isnull=True).count(),
    }
