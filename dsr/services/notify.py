"""Telling the subject: what was erased, what was kept and why (GDPR Art. 12(4)), with their receipts,
the link to the public verification page, and the recipients of their data (Art. 19).

The notice is stored with what it said, and marked sent once the mail backend took it.
"""
from __future__ import annotations

import json
from collections import Counter

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils import timezone

from dsr.models import ItemDecision, ItemKind, ItemOutcome, RequestItem, RequestStatus, RequestType, SubjectNotice
from dsr.models import SubjectRequest
from dsr.services.states import history_add
from memory.models import ArchiveDeletion, FleetCopyNotice

RIGHTS = ("You have the right to lodge a complaint with a supervisory authority and to seek a judicial remedy "
          "(GDPR Art. 12(4), Art. 77 and Art. 79).")


def step_notify(*, request_id: int):
    """Compose (once), send and mark sent, all under the request's row lock: a second delivery of this
    step waits, then finds the request notified. A crash after sending but before the commit sends
    again on the next delivery: a subject told twice rather than never."""
    from dsr.services.workflow import StepResult

    with transaction.atomic():
        request = (SubjectRequest.objects.select_for_update().select_related("tenant", "subject")
                   .filter(pk=request_id).first())
        if request is None or request.notified_at or request.status not in (
                RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED):
            return StepResult(False, None)
        now = timezone.now()
        earlier = list(SubjectNotice.objects.filter(request=request, kind__startswith="outcome").order_by("pk")
                       .values_list("pk", "sent_at"))
        unsent = next((pk for pk, sent_at in earlier if sent_at is None), None)
        if unsent is not None:  # an outbox row left by an earlier version of this step: sent as written
            notice = SubjectNotice.objects.get(pk=unsent)
            SubjectNotice.objects.filter(pk=notice.pk).update(sent_at=now)
        else:
            # Stored as sent in the transaction that sends it: if the mail backend refuses, the row goes
            # with the rollback, and the next delivery composes and sends again.
            notice = _notice_compose(request, earlier=len(earlier), sent_at=now)
        _send(request, notice)
        SubjectRequest.objects.filter(pk=request.pk).update(notified_at=now)
        history_add(request=request, action="subject_notified", actor="workflow",
                    note="outcome sent to the subject" if notice.to else "no address on file: outcome kept on record")
    return StepResult(True, None)


def _send(request: SubjectRequest, notice: SubjectNotice) -> None:
    if not notice.to:
        return
    message = EmailMessage(subject=notice.subject_line, body=notice.body, to=[notice.to],
                           from_email=settings.DEFAULT_FROM_EMAIL)
    message.attach(f"receipt-request-{request.pk}.json", json.dumps(notice.receipt, indent=2), "application/json")
    message.send()


def _notice_compose(request: SubjectRequest, *, earlier: int, sent_at=None) -> SubjectNotice:
    from tombstones.services import receipt_build

    items = list(RequestItem.objects.filter(request=request))
    tombstone_ids = sorted({str(i.tombstone_id) for i in items if i.tombstone_id})
    receipt = {"request": request.pk, "receipts": [receipt_build(tombstone_id=t) for t in tombstone_ids]}
    if request.type == RequestType.ACCESS:
        receipt = {"request": request.pk, "export": request.export}
    lines = [f"Your {request.get_regulation_display()} {request.get_type_display()} request {request.pk}, "
             f"received {request.received_at:%Y-%m-%d}, is {request.get_status_display().lower()}.", ""]
    lines += _erased_lines(items) if request.type != RequestType.ACCESS else [
        f"Attached is a copy of the data we hold about you: {len(request.export['records'])} records."]
    kept = [i for i in items if i.decision == ItemDecision.HIDE and request.type == RequestType.ERASURE]
    if kept:
        lines += ["", f"We kept {len(kept)} records because the law or a legal hold requires it. They are hidden and "
                  "no longer processed for any other purpose; they will be erased when the obligation ends:"]
        lines += [f"- record {i.object_id}: {i.reason.get('authority') or i.reason.get('code')}, "
                  f"{'until ' + i.deferred_until.date().isoformat() if i.deferred_until else 'until the hold is released'}"
                  for i in kept]
        lines += ["", RIGHTS]
    lines += _recipient_lines(request, items)
    if tombstone_ids:
        lines += ["", "Proof: each erasure left a signed tombstone. You can check them yourself, without an account, at:"]
        lines += [f"  {settings.LEDGER_PUBLIC_URL.rstrip('/')}/verify/?id={t}" for t in tombstone_ids]
        lines += ["The attached receipt holds the signed tombstones, their proofs of inclusion in our public log, and "
                  "the salts that let you show that a piece of your data was among what was erased. Keep it."]
    return SubjectNotice.objects.create(
        request=request, kind="outcome" if not earlier else f"outcome-{earlier + 1}", to=request.contact_email,
        subject_line=f"Your {request.get_type_display().lower()} request {request.pk}: "
                     f"{request.get_status_display().lower()}",
        body="\n".join(lines), receipt=receipt, sent_at=sent_at,
    )


def _erased_lines(items: list[RequestItem]) -> list[str]:
    records = Counter(i.outcome for i in items if i.kind == ItemKind.RECORD)
    derived = Counter(i.artifact_kind for i in items if i.kind == ItemKind.ARTIFACT
                      and i.outcome in (ItemOutcome.DELETED, ItemOutcome.LOGGED, ItemOutcome.NOTIFIED))
    lines = [f"Erased: {records[ItemOutcome.DELETED] + records[ItemOutcome.GONE]} records deleted, "
             f"{records[ItemOutcome.REDACTED]} records whose content was removed (the law requires us to keep "
             f"that they existed)."]
    if derived:
        lines.append("Copies derived from them, also erased: "
                     + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(derived.items())) + ".")
    return lines


def _recipient_lines(request: SubjectRequest, items: list[RequestItem]) -> list[str]:
    """Art. 19: the recipients to whom the data was disclosed, each told of the erasure."""
    events = {i.forget_event_id for i in items if i.forget_event_id}
    fleet = sorted(set(FleetCopyNotice.objects.filter(forget_event_id__in=events).values_list("holder", flat=True)))
    archives = sorted(set(ArchiveDeletion.objects.filter(forget_event_id__in=events).values_list("holder", flat=True)))
    if not fleet and not archives:
        return []
    lines = ["", "Recipients of your data, each told to erase it (GDPR Art. 19):"]
    lines += [f"- {holder} (a copy held by another agent; we track its acknowledgement)" for holder in fleet]
    lines += [f"- {holder or 'our archive'} (an archive; entered into the deletion log that every restore replays)"
              for holder in archives]
    return lines
