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
from dsr.errors import RequestError
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
                reason=f"override by {actor} of {conflict.authority}: {justification.strip()}",
                # The tombstone cites legal's decision by the conflict's id: who decided, the blocking rule's
                # wording and the justification stay in the tenant's records.
                authority=f"retention_conflict:{conflict.pk}", salts_for_receipt=True,
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
    return _blockers_of([conflict])[conflict.pk]


def override_refusal(conflict: RetentionConflict) -> RequestError | None:
    """The refusal an override of this conflict would meet now (`legal_hold` or `compliance_lock`, with every
    rule or hold that keeps the record), or None when the override is allowed. `conflict_override` raises it;
    the conflict's page shows it next to a disabled Override button, so the two cannot disagree."""
    return _refusal_from(override_blockers(conflict))


def _blockers_of(conflicts: list[RetentionConflict]) -> dict[int, list[dict]]:
    # One refusals read per tenant, whatever the number of conflicts (a bulk decision checks up to 100).
    by_tenant: dict[int, list[RetentionConflict]] = {}
    for conflict in conflicts:
        by_tenant.setdefault(conflict.tenant_id, []).append(conflict)
    found: dict[int, list[dict]] = {}
    for group in by_tenant.values():
        reasons = records_refusals(tenant=group[0].tenant, record_ids=sorted({c.record_id for c in group}),
                                   mode=ForgetMode.HARD)
        for conflict in group:
            blocking = reasons.get(conflict.record_id, {}).get("blocking", [])
            found[conflict.pk] = [b for b in blocking if b["type"] == "hold" or b.get("mode") == "compliance"]
    return found


def _refusal_from(blockers: list[dict]) -> RequestError | None:
    holds = [b for b in blockers if b["type"] == "hold"]
    rules = [b for b in blockers if b["type"] == "rule"]
    if holds:
        return errors.conflict("legal_hold", "An active legal hold covers this record: release the hold first.",
                               hold_id=holds[0]["hold_id"], matter=holds[0]["matter"], blocking=blockers)
    if rules:
        names = "; ".join(f"rule {r['rule_id']} ({r['authority']}, until {r['until'][:10]})" for r in rules)
        return errors.conflict("compliance_lock", f"Compliance-mode rules keep this record: {names}. Nobody can "
                               "override them, not even a superuser.", rule_id=rules[0]["rule_id"],
                               authority=rules[0]["authority"], blocking=blockers)
    return None


def _override_allowed(conflict: RetentionConflict, record: Record) -> None:
    refusal = override_refusal(conflict)
    if refusal is not None:
        raise refusal


# --- one decision over a selection ----------------------------------------------------------------------

MAX_SELECTION = 100  # a page of the conflicts queue is 50; one transaction holds every row lock, so keep it short
DECIDE = {"uphold": conflict_uphold, "override": conflict_override, "defer": conflict_defer}


def selection_check(conflict_ids) -> list[int]:
    """The selection's ids, sorted and without repeats; `invalid_selection` when it is not a list of ids or
    is empty, `selection_too_large` beyond MAX_SELECTION (the admin asks before it shows the decision form)."""
    if not isinstance(conflict_ids, (list, tuple, set)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**63 for i in conflict_ids):
        raise errors.invalid("invalid_selection", "The selection must be a list of conflict ids.")
    ids = sorted(set(conflict_ids))
    if not ids:
        raise errors.invalid("invalid_selection", "Select at least one conflict.")
    if len(ids) > MAX_SELECTION:
        raise errors.invalid("selection_too_large", f"Select at most {MAX_SELECTION} conflicts at a time.",
                             limit=MAX_SELECTION)
    return ids


def decide_conflicts(*, conflict_ids: list[int], decision: str, actor: str, justification: str,
                     until: date | None = None) -> list[RetentionConflict]:
    """One decision, with one justification, over up to MAX_SELECTION conflicts, each recorded on its own
    through the single decision's service (its history row, its notice to the subject, its erasure).

    All or nothing: when any selected conflict cannot take the decision (already decided, gone, an override
    refused under a compliance rule or an active hold), nothing is decided and the refusal
    `selection_refused` lists each one with its own code and reason (`refused`)."""
    ids = selection_check(conflict_ids)
    if decision not in DECIDE:
        raise errors.invalid("invalid_decision", f"The decision must be one of: {', '.join(DECIDE)}.")
    # The checks every single decision makes first, so that a refusal is found before anything is done.
    if not (justification or "").strip():
        raise errors.invalid("justification_required", "A decision on a retention conflict needs a written reason.")
    if decision == "defer" and (not isinstance(until, date) or until <= timezone.now().date()):
        raise errors.invalid("invalid_date", "A deferral needs a date in the future.")
    kwargs = {"until": until} if decision == "defer" else {}
    with transaction.atomic():
        # Locked in id order (no deadlock with another bulk decision) until the end: nobody decides one of
        # them between the check and the act.
        conflicts = list(RetentionConflict.objects.select_for_update().select_related("request", "tenant")
                         .filter(pk__in=ids).order_by("pk"))
        refused = _selection_refusals(conflicts, ids, decision)
        if refused:
            raise _selection_refused(decision, refused, len(ids))
        for conflict in conflicts:
            try:
                DECIDE[decision](conflict=conflict, actor=actor, justification=justification, **kwargs)
            except RequestError as exc:
                # Only a race gets here (a hold placed meanwhile: the database refused the override). Leaving
                # the atomic block by raising undoes the decisions already made.
                raise _selection_refused(decision, [_refused(conflict.pk, exc)], len(ids)) from None
    # As stored (an uphold answers the conflict as it found it), in one read.
    return list(RetentionConflict.objects.select_related("request", "tenant").filter(pk__in=ids).order_by("pk"))


def _selection_refusals(conflicts: list[RetentionConflict], ids: list[int], decision: str) -> list[dict]:
    found = {c.pk for c in conflicts}
    refused = [{"conflict_id": pk, "code": "not_found", "detail": "No such conflict."} for pk in ids
               if pk not in found]
    undecided = []
    for conflict in conflicts:
        if conflict.status not in (ConflictStatus.OPEN, ConflictStatus.DEFERRED):
            refused.append({"conflict_id": conflict.pk, "code": "conflict_decided",
                            "detail": f"This conflict was already decided: {conflict.status}."})
        else:
            undecided.append(conflict)
    if decision == "override" and undecided:
        for conflict_id, blockers in _blockers_of(undecided).items():
            refusal = _refusal_from(blockers)
            if refusal is not None:
                refused.append(_refused(conflict_id, refusal))
    return sorted(refused, key=lambda r: r["conflict_id"])


def _refused(conflict_id: int, exc: RequestError) -> dict:
    return {"conflict_id": conflict_id, "code": exc.code, "detail": exc.detail}


def _selection_refused(decision: str, refused: list[dict], selected: int) -> RequestError:
    which = " ".join(f"Conflict {r['conflict_id']}: {r['detail'].rstrip('.')}." for r in refused)
    return errors.conflict("selection_refused", f"Nothing was decided: {len(refused)} of the {selected} selected "
                           f"conflicts cannot take the decision “{decision}”. {which}", decision=decision,
                           refused=refused)


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
