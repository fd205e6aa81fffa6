"""Legal's decisions on retention conflicts: uphold, override, defer. Each is recorded with who and why,
in the request's history, and the workflow continues by itself afterwards.

An override erases the record after all, through the one guarded forget: the record's governance lock
is ended for that record alone (`retention.locks.lock_override`, which the database itself refuses while a
compliance rule or a hold keeps the record) in the same transaction as the forget. It is refused while any
compliance-mode rule still keeps the record, whichever rule is longest, whoever asks, and while an active
legal hold covers it (release the hold first); the refusal names every rule or hold that keeps it.
"""
from __future__ import annotations

from datetime import date

from django.core.mail import EmailMessage
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from dsr import errors
from dsr.models import (
    ConflictStatus,
    ItemDecision,
    ItemKind,
    ItemOutcome,
    RequestItem,
    RequestStatus,
    RetentionConflict,
    SubjectNotice,
    SubjectRequest,
)
from dsr.services.notify import RIGHTS
from dsr.services.states import history_add, request_transition
from memory.models import ForgetMode, Record
from memory.services import ForgetTarget, records_forget, records_refusals
from retention.locks import lock_override


def _decided(conflict: RetentionConflict, *, actor: str, justification: str) -> RetentionConflict:
    if not (justification or "").strip():
        raise errors.invalid("justification_required", "A decision on a retention conflict needs a written reason.")
    conflict = RetentionConflict.objects.select_for_update().select_related("request", "tenant").get(pk=conflict.pk)
    if conflict.status != ConflictStatus.OPEN and conflict.status != ConflictStatus.DEFERRED:
        raise errors.conflict("conflict_decided", f"This conflict was already decided: {conflict.status}.")
    return conflict


def conflict_uphold(*, conflict: RetentionConflict, actor: str, justification: str) -> RetentionConflict:
    """Keep the record: it stays hidden and restricted; the subject is told why and of their rights."""
    with transaction.atomic():
        conflict = _decided(conflict, actor=actor, justification=justification)
        _record_decision(conflict, ConflictStatus.UPHELD, actor, justification)
        request = conflict.request
        body = (f"About your {request.get_type_display().lower()} request {request.pk}: we must keep record "
                f"{conflict.record_id} under {conflict.authority}"
                f"{' until ' + conflict.locked_until.date().isoformat() if conflict.locked_until else ''}. "
                f"It is hidden and no longer used for any other purpose.\n\nReason: {justification.strip()}\n\n{RIGHTS}")
        notice = SubjectNotice.objects.create(request=request, kind=f"conflict-{conflict.pk}", to=request.contact_email,
                                              subject_line=f"Your request {request.pk}: a record we must keep",
                                              body=body)
        if notice.to:
            EmailMessage(subject=notice.subject_line, body=body, to=[notice.to],
                         from_email=settings.DEFAULT_FROM_EMAIL).send()
        SubjectNotice.objects.filter(pk=notice.pk).update(sent_at=timezone.now())
    return conflict


def conflict_defer(*, conflict: RetentionConflict, actor: str, justification: str, until: date) -> RetentionConflict:
    """Decide later: the record stays hidden; the conflict comes back to legal on `until`."""
    if not isinstance(until, date) or until <= timezone.now().date():
        raise errors.invalid("invalid_date", "A deferral needs a date in the future.")
    with transaction.atomic():
        conflict = _decided(conflict, actor=actor, justification=justification)
        RetentionConflict.objects.filter(pk=conflict.pk).update(deferred_to=until)
        _record_decision(conflict, ConflictStatus.DEFERRED, actor, justification, note=f" until {until.isoformat()}")
    conflict.refresh_from_db()
    return conflict


def conflict_override(*, conflict: RetentionConflict, actor: str, justification: str) -> RetentionConflict:
    """Erase the record after all. Refused for a compliance-mode rule or an active hold."""
    with transaction.atomic():
        conflict = _decided(conflict, actor=actor, justification=justification)
        record = Record.objects.filter(pk=conflict.record_id, tenant=conflict.tenant).first()
        if record is not None:
            _override_allowed(conflict, record)
            try:
                with transaction.atomic():
                    # The governance lock ends for this record alone, then the one guarded forget erases it.
                    lock_override(record_id=record.pk)
            except IntegrityError as exc:
                # A hold or a compliance rule arrived after the check above: the database refused.
                raise errors.conflict("legal_hold" if str(exc).startswith("legal_hold:") else "compliance_lock",
                                      f"The override was refused: {str(exc).split(chr(10))[0]}") from None
            result = records_forget(
                tenant=conflict.tenant, target=ForgetTarget(record_ids=(record.pk,)), mode=ForgetMode.HARD,
                actor=f"request:{conflict.request_id}", path="legal_override", derivatives_mode=ForgetMode.HARD,
                reason=f"override by {actor}: {justification.strip()}", authority="legal override of "
                f"{conflict.authority}",
            )
            RequestItem.objects.filter(request=conflict.request, kind=ItemKind.RECORD, object_id=record.pk).update(
                decision=ItemDecision.ERASE, outcome=ItemOutcome.DELETED, forget_event_id=result.event.pk,
                tombstone_id=result.tombstone_id, deferred_until=None)
        _record_decision(conflict, ConflictStatus.OVERRIDDEN, actor, justification)
        _workflow_resume(conflict.request)
    conflict.refresh_from_db()
    return conflict


def override_blockers(conflict: RetentionConflict) -> list[dict]:
    """What keeps an override of this conflict from happening: every active hold and every compliance rule that
    still keeps the record (the refusal's `blocking` entries), whichever lock is longest. Empty: allowed."""
    reasons = records_refusals(tenant=conflict.tenant, record_ids=[conflict.record_id], mode=ForgetMode.HARD)
    blocking = reasons.get(conflict.record_id, {}).get("blocking", [])
    return [b for b in blocking if b["type"] == "hold" or b.get("mode") == "compliance"]


def _override_allowed(conflict: RetentionConflict, record: Record) -> None:
    blockers = override_blockers(conflict)
    holds = [b for b in blockers if b["type"] == "hold"]
    rules = [b for b in blockers if b["type"] == "rule"]
    if holds:
        raise errors.conflict("legal_hold", "An active legal hold covers this record: release the hold first.",
                              hold_id=holds[0]["hold_id"], matter=holds[0]["matter"], blocking=blockers)
    if rules:
        names = "; ".join(f"rule {r['rule_id']} ({r['authority']}, until {r['until'][:10]})" for r in rules)
        raise errors.conflict("compliance_lock", f"Compliance-mode rules keep this record: {names}. Nobody can "
                              "override them, not even a superuser.", rule_id=rules[0]["rule_id"],
                              authority=rules[0]["authority"], blocking=blockers)


def _record_decision(conflict: RetentionConflict, status: str, actor: str, justification: str, note: str = "") -> None:
    RetentionConflict.objects.filter(pk=conflict.pk).update(status=status, decided_by=actor,
                                                             decided_at=timezone.now(),
                                                             justification=justification.strip())
    history_add(request=conflict.request, action=f"conflict_{status}", actor=actor,
                note=f"record {conflict.record_id} ({conflict.authority}){note}: {justification.strip()}")


def _workflow_resume(request: SubjectRequest) -> None:
    """After an override the request runs its confirm and notify steps again."""
    from dsr.services.workflow import EXECUTE
    from dsr.tasks import step_enqueue

    request = SubjectRequest.objects.get(pk=request.pk)
    if request.status == RequestStatus.PARTIALLY_COMPLETED:
        request_transition(request=request, to=RequestStatus.EXECUTING, actor="workflow", action="resume_after_decision",
                           executed_at=None, confirmed_at=None, notified_at=None)
        step_enqueue(request_id=request.pk, step=EXECUTE)
