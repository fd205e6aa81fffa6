"""Legal's decisions on retention conflicts: uphold, override, defer. Each is recorded with who and why,
in the request's history, and the workflow continues by itself afterwards.

An override erases the record after all, through the one guarded forget: the record's governance lock
is ended for that record alone (inside a lock-recompute grant, see retention.models.LockRecomputeGrant)
in the same transaction as the forget. It is refused for a compliance-mode rule, whoever asks, and for
an active legal hold, which must be released first.
"""
from __future__ import annotations

from datetime import date

from django.core.mail import EmailMessage
from django.conf import settings
from django.db import transaction
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
from retention.locks import lock_grant


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
            with lock_grant():
                # The governance lock ends for this record alone, then the one guarded forget erases it.
                Record.objects.filter(pk=record.pk).update(retained_until=None, lock_protects_content=False)
                result = records_forget(
                    tenant=conflict.tenant, target=ForgetTarget(record_ids=(record.pk,)), mode=ForgetMode.HARD,
                    actor=f"request:{conflict.request_id}", path="legal_override", derivatives_mode=ForgetMode.HARD,
                    reason=f"override by {actor} of {conflict.authority}: {justification.strip()}",
                    # The tombstone cites legal's decision by the conflict's id: who decided, the blocking
                    # rule's wording and the justification stay in the tenant's records.
                    authority=f"retention_conflict:{conflict.pk}", salts_for_receipt=True,
                )
            RequestItem.objects.filter(request=conflict.request, kind=ItemKind.RECORD, object_id=record.pk).update(
                decision=ItemDecision.ERASE, outcome=ItemOutcome.DELETED, forget_event_id=result.event.pk,
                tombstone_id=result.tombstone_id, deferred_until=None)
        _record_decision(conflict, ConflictStatus.OVERRIDDEN, actor, justification)
        _workflow_resume(conflict.request)
    conflict.refresh_from_db()
    return conflict


def _override_allowed(conflict: RetentionConflict, record: Record) -> None:
    reasons = records_refusals(tenant=conflict.tenant, record_ids=[record.pk], mode=ForgetMode.HARD).get(record.pk)
    if not reasons:
        return
    for blocker in reasons["blocking"]:
        if blocker["type"] == "hold":
            raise errors.conflict("legal_hold", "An active legal hold covers this record: release the hold first.",
                                  hold_id=blocker["hold_id"], matter=blocker["matter"])
        if blocker.get("mode") == "compliance":
            raise errors.conflict("compliance_lock", "A compliance-mode rule keeps this record: nobody can override "
                                  "it, not even a superuser.", rule_id=blocker["rule_id"],
                                  authority=blocker["authority"])


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
