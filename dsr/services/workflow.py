"""The erasure workflow: plan, evaluate, execute (with propagation), confirm, notify.

Each step is a plain function of a request id that (1) locks the request row, (2) reads what is left to
do from the database (`RequestItem` rows and the step marks on the request), (3) does one bounded piece
of work in one transaction, and (4) says what to run next. Running a step twice, or after a worker
died anywhere inside it, is harmless: the transaction either committed (the marks say so) or did not
(nothing happened). The Celery tasks in dsr/tasks.py only call these and enqueue the next step after
commit.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from dsr.models import (
    ConflictStatus,
    ItemDecision,
    ItemKind,
    ItemOutcome,
    RequestItem,
    RequestStatus,
    RequestType,
    RetentionConflict,
    SubjectRequest,
)
from dsr.services.states import history_add, request_transition
from memory.models import (
    ArchiveDeletion,
    ArtifactKind,
    DerivedArtifact,
    FleetCopyNotice,
    ForgetEvent,
    ForgetMode,
    Lineage,
    Record,
)
from memory.lookups import batches
from memory.services import ForgetTarget, records_forget, records_refusals
from memory.services.confirm import erasures_confirm

# Records per execute transaction: one forget (one tombstone) per decision per batch. Small enough that
# a worker killed mid-batch loses little work and holds row locks briefly; large enough that the
# per-batch signing and bookkeeping are amortized.
EXECUTE_BATCH = settings.LEDGER_EXECUTE_BATCH
WORKFLOW = "workflow"
# Ids per set-based UPDATE of request items: well under any bound-parameter limit.
UPDATE_BATCH = 5_000

PLAN, EVALUATE, EXECUTE, CONFIRM, NOTIFY, DONE = "plan", "evaluate", "execute", "confirm", "notify", None

_MODE = {ItemDecision.ERASE: ForgetMode.HARD, ItemDecision.REDACT: ForgetMode.REDACT, ItemDecision.HIDE: ForgetMode.SOFT}
_RECORD_OUTCOME = {"deleted": ItemOutcome.DELETED, "redacted": ItemOutcome.REDACTED, "hidden": ItemOutcome.HIDDEN}


@dataclass(frozen=True)
class StepResult:
    did_work: bool
    next_step: str | None


def _locked(request_id: int) -> SubjectRequest | None:
    return SubjectRequest.objects.select_for_update().filter(pk=request_id).select_related("tenant", "subject").first()


def workflow_start(*, request: SubjectRequest, actor: str) -> SubjectRequest:
    """Operators start the workflow of a verified request; the first step runs on a worker."""
    if request.status != RequestStatus.VERIFIED:
        from dsr import errors
        raise errors.conflict("not_verified", "A request runs only after the subject's identity is verified.",
                              status=request.status)
    history_add(request=request, action="workflow_started", actor=actor)
    from dsr.tasks import step_enqueue

    step_enqueue(request_id=request.pk, step=PLAN)
    return request


def step_plan(*, request_id: int) -> StepResult:
    """Every record of the subject in every scope of the tenant, and every artifact reachable through
    lineage; for an access request, the export of the subject's live data.

    An erasure or restriction is evaluated in the same transaction (both moves, verified -> planned ->
    executing, with their history rows): evaluation reads only what the plan just wrote and the records'
    locks, so a separate transaction (and a round trip through the broker) would buy nothing. A request
    found `planned` (one planned before evaluation was folded in) is evaluated by `step_evaluate`.
    """
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.status != RequestStatus.VERIFIED:
            return StepResult(False, _next_for(request))
        added = _plan_items(request)
        if request.type == RequestType.ACCESS:
            export = access_export(request=request)
            request = request_transition(request=request, to=RequestStatus.PLANNED, actor=WORKFLOW, locked=True,
                                         action="plan", note=f"{len(export['records'])} live records exported",
                                         planned_at=timezone.now(), export=export)
            request_transition(request=request, to=RequestStatus.COMPLETED, actor=WORKFLOW, locked=True,
                               action="export_ready", confirmed_at=timezone.now())
            return StepResult(True, NOTIFY)
        request = request_transition(request=request, to=RequestStatus.PLANNED, actor=WORKFLOW, locked=True,
                                     action="plan", note=f"{added} items planned", planned_at=timezone.now())
        _evaluate(request)
    return StepResult(True, EXECUTE)


# The plan, set-based: the subject's records that still hold content or are still visible (live or hidden,
# not those already redacted), and every artifact derived from them, inserted in one statement; the
# unique (request, kind, object_id) constraint makes a second run add only what is new.
_PLAN_SQL = f"""
    INSERT INTO {RequestItem._meta.db_table} (request_id, kind, object_id, artifact_kind, decision, outcome)
    SELECT %(request)s, %(record)s, r.id, '', '', %(pending)s
    FROM {Record._meta.db_table} r
    WHERE r.tenant_id = %(tenant)s AND r.subject_id = %(subject)s AND (r.redacted_at IS NULL OR r.content > '')
    UNION ALL
    SELECT DISTINCT %(request)s, %(artifact)s, a.id, a.kind, %(propagate)s, %(pending)s
    FROM {Record._meta.db_table} r
    JOIN {Lineage._meta.db_table} l ON l.source_id = r.id
    JOIN {DerivedArtifact._meta.db_table} a ON a.id = l.artifact_id
    WHERE r.tenant_id = %(tenant)s AND r.subject_id = %(subject)s AND (r.redacted_at IS NULL OR r.content > '')
    ON CONFLICT DO NOTHING
"""


def _plan_items(request: SubjectRequest) -> int:
    """Add the subject's live or hidden records, and their artifacts, to the plan (idempotent); returns
    how many items were new."""
    with connection.cursor() as cursor:
        cursor.execute(_PLAN_SQL, {
            "request": request.pk, "tenant": request.tenant_id, "subject": request.subject_id,
            "record": ItemKind.RECORD.value, "artifact": ItemKind.ARTIFACT.value,
            "propagate": ItemDecision.PROPAGATE.value, "pending": ItemOutcome.PENDING.value,
        })
        return max(cursor.rowcount, 0)


def step_evaluate(*, request_id: int) -> StepResult:
    """Decide the least destructive operation that still satisfies the request, per record (for a request
    left `planned`; `step_plan` evaluates in its own transaction)."""
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.status != RequestStatus.PLANNED:
            return StepResult(False, _next_for(request))
        _evaluate(request)
    return StepResult(True, EXECUTE)


def _evaluate(request: SubjectRequest) -> None:
    decided = _evaluate_items(request)
    request_transition(request=request, to=RequestStatus.EXECUTING, actor=WORKFLOW, locked=True, action="evaluate",
                       note=f"{decided} records decided", evaluated_at=timezone.now())


def _evaluate_items(request: SubjectRequest) -> int:
    """Undecided record items get: erase (nothing forbids it), redact (a lock keeps the row, not the
    content), or hide and restrict with a deferred erasure and a retention conflict for legal."""
    items = list(RequestItem.objects.filter(request=request, kind=ItemKind.RECORD, decision="")
                 .only("pk", "object_id", "decision", "reason", "deferred_until"))
    if not items:
        return 0
    ids = [i.object_id for i in items]
    if request.type == RequestType.RESTRICTION:
        RequestItem.objects.filter(pk__in=[i.pk for i in items]).update(decision=ItemDecision.HIDE)
        return len(items)
    no_hard = records_refusals(tenant=request.tenant, record_ids=ids, mode=ForgetMode.HARD)
    no_redact = records_refusals(tenant=request.tenant, record_ids=list(no_hard), mode=ForgetMode.REDACT)
    now = timezone.now()
    conflicts = []
    for item in items:
        if item.object_id not in no_hard:
            item.decision = ItemDecision.ERASE
        elif item.object_id not in no_redact:
            item.decision, item.reason = ItemDecision.REDACT, no_hard[item.object_id]
        else:
            reason = no_redact[item.object_id]
            item.decision, item.reason = ItemDecision.HIDE, reason
            item.deferred_until = _parse(reason.get("locked_until"))
            conflicts.append(RetentionConflict(
                request=request, tenant=request.tenant, record_id=item.object_id, code=reason["code"],
                authority=reason.get("authority") or "", blocking=reason["blocking"],
                locked_until=item.deferred_until, opened_at=now,
            ))
    # Set-based for the many (erase: one UPDATE), item by item only for those with a reason of their own.
    erase = [i.pk for i in items if i.decision == ItemDecision.ERASE]
    for batch in batches(erase, UPDATE_BATCH):
        RequestItem.objects.filter(pk__in=batch).update(decision=ItemDecision.ERASE)
    RequestItem.objects.bulk_update([i for i in items if i.decision != ItemDecision.ERASE],
                                    ["decision", "reason", "deferred_until"], batch_size=1000)
    RetentionConflict.objects.bulk_create(conflicts, ignore_conflicts=True)
    return len(items)


def _parse(value):
    from django.utils.dateparse import parse_datetime

    return parse_datetime(value) if value else None


def step_execute(*, request_id: int) -> StepResult:
    """One batch of pending record items through the one guarded forget, per decision; their
    derivatives are erased with them (embeddings, summaries, caches deleted; archive copies logged;
    other agents' copies notified). Says EXECUTE again while items remain; the batch that leaves none
    settles the artifact items and marks the request executed in the same transaction."""
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.status != RequestStatus.EXECUTING or request.executed_at:
            return StepResult(False, _next_for(request))
        batch = _execute_batch(request)
        if any(not item.decision for item in batch):
            # Records whose lock changed since (refused below), or planned since: decided again first.
            _evaluate_items(request)
            batch = _execute_batch(request)
        done = [i for i in batch if i.decision]
        if done:
            present = {i.object_id for i in done if i.present}
            for decision in (ItemDecision.ERASE, ItemDecision.REDACT, ItemDecision.HIDE):
                _execute_group(request, [i for i in done if i.decision == decision], decision, present)
            _items_record(done)
            # The batch was the last when it was short and nothing in it has to be decided again.
            if len(batch) == EXECUTE_BATCH or any(not item.decision for item in done):
                return StepResult(True, EXECUTE)
        _propagation_settle(request)
        SubjectRequest.objects.filter(pk=request.pk).update(executed_at=timezone.now())
        history_add(request=request, action="executed", actor=WORKFLOW)
    return StepResult(True, CONFIRM)


def _execute_batch(request: SubjectRequest) -> list[RequestItem]:
    """The next pending record items, decided or not (those are decided first), each with whether its
    record is still there (a record forgotten by another path meanwhile is `gone`, not forgotten again)."""
    record = Record.objects.filter(pk=OuterRef("object_id"), tenant=request.tenant)
    return list(RequestItem.objects.filter(request=request, kind=ItemKind.RECORD, outcome=ItemOutcome.PENDING)
                .only("pk", "object_id", "decision", "outcome", "forget_event_id", "tombstone_id")
                .annotate(present=Exists(record)).order_by("pk")[:EXECUTE_BATCH])


def _items_record(items: list[RequestItem]) -> None:
    """Write what the batch did: one UPDATE per forget (its outcome, event and tombstone are the same for
    all of its items), item by item only for those refused (decided again, with the refusal's reason)."""
    acted: dict[tuple, list[int]] = {}
    for item in items:
        if item.decision:
            acted.setdefault((item.outcome, item.forget_event_id, item.tombstone_id), []).append(item.pk)
    for (outcome, event_id, tombstone_id), pks in acted.items():
        RequestItem.objects.filter(pk__in=pks).update(outcome=outcome, forget_event_id=event_id,
                                                      tombstone_id=tombstone_id)
    RequestItem.objects.bulk_update([i for i in items if not i.decision], ["decision", "reason"])


def _execute_group(request: SubjectRequest, items: list[RequestItem], decision: str, present: set[int]) -> None:
    if not items:
        return
    by_id = {i.object_id: i for i in items}
    for record_id in set(by_id) - present:
        by_id[record_id].outcome = ItemOutcome.GONE
    acted = sorted(set(by_id) & present)
    if acted:
        restrict = request.type == RequestType.RESTRICTION
        result = records_forget(
            tenant=request.tenant, target=ForgetTarget(record_ids=tuple(acted)), mode=_MODE[decision],
            derivatives_mode=ForgetMode.SOFT if restrict else ForgetMode.HARD, actor=f"request:{request.pk}",
            reason=f"{request.get_regulation_display()} {request.get_type_display()} request {request.pk}",
            authority=_authority(request), path="erasure_workflow",
        )
        for entry in result.results:
            item = by_id[entry["record_id"]]
            if entry["outcome"] == "refused":
                # The lock changed since evaluation (a hold placed meanwhile): decide this record again.
                item.decision, item.reason = "", entry["reason"]
                continue
            item.outcome = _RECORD_OUTCOME[entry["outcome"]]
            item.forget_event_id, item.tombstone_id = result.event.pk, result.tombstone_id


def _authority(request: SubjectRequest) -> str:
    if request.regulation == "gdpr":
        return {"erasure": "GDPR Art. 17", "restriction": "GDPR Art. 18", "access": "GDPR Art. 15"}[request.type]
    if request.regulation == "ccpa":
        return {"erasure": "CCPA §1798.105", "access": "CCPA §1798.110",
                "restriction": "CCPA §1798.120"}[request.type]
    return f"{request.get_type_display()} request"


def _propagation_settle(request: SubjectRequest) -> None:
    """Artifact items take the outcome their propagation had: deleted and checked gone, entered into
    the archive deletion log, or notified to the agent holding the copy (deferred until it acknowledges).
    Archive and fleet copies are looked up in their logs; every other pending artifact item is settled by
    one UPDATE that checks, in the database, that its artifact is gone."""
    pending = RequestItem.objects.filter(request=request, kind=ItemKind.ARTIFACT, outcome=ItemOutcome.PENDING)
    copies = list(pending.filter(artifact_kind__in=[ArtifactKind.ARCHIVE, ArtifactKind.FLEET_COPY])
                  .values_list("pk", "object_id", "artifact_kind"))
    if copies:
        logged = set(ArchiveDeletion.objects.filter(
            tenant=request.tenant, artifact_id__in=[a for _, a, kind in copies if kind == ArtifactKind.ARCHIVE])
            .values_list("artifact_id", flat=True))
        notices = {n.artifact_id: n.deadline for n in FleetCopyNotice.objects.filter(
            tenant=request.tenant, artifact_id__in=[a for _, a, kind in copies if kind == ArtifactKind.FLEET_COPY])}
        settled: dict[tuple, list[int]] = {}
        for pk, artifact_id, kind in copies:
            if kind == ArtifactKind.FLEET_COPY and artifact_id in notices:
                settled.setdefault((ItemOutcome.NOTIFIED, notices[artifact_id]), []).append(pk)
            elif kind == ArtifactKind.ARCHIVE and artifact_id in logged:
                settled.setdefault((ItemOutcome.LOGGED, None), []).append(pk)
        for (outcome, deferred_until), pks in settled.items():  # one UPDATE per outcome and deadline
            RequestItem.objects.filter(pk__in=pks).update(outcome=outcome, deferred_until=deferred_until)
    still_there = DerivedArtifact.objects.filter(pk=OuterRef("object_id")).filter(
        Q(content__gt="") | Q(vector__isnull=False))
    pending.filter(~Exists(still_there)).update(outcome=ItemOutcome.DELETED)


def step_confirm(*, request_id: int) -> StepResult:
    """Read back through every read path. Completed only when nothing remains that should not;
    otherwise the request stays open with the precise gaps."""
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.status != RequestStatus.EXECUTING or not request.executed_at:
            return StepResult(False, _next_for(request))
        if _plan_items(request):
            # Records written for the subject since the plan: they are part of the request too.
            SubjectRequest.objects.filter(pk=request.pk).update(executed_at=None)
            history_add(request=request, action="replanned", actor=WORKFLOW, note="new records since the plan")
            return StepResult(True, EXECUTE)
        items = list(RequestItem.objects.filter(request=request).values_list(
            "kind", "object_id", "decision", "outcome", "forget_event_id"))
        gaps, deferred = _confirm_gaps(request, items)
        if gaps:
            SubjectRequest.objects.filter(pk=request.pk).update(gaps=gaps)
            history_add(request=request, action="confirm_gaps", actor=WORKFLOW, note=f"{len(gaps)} gaps remain")
            return StepResult(True, None)
        kept = any(decision == ItemDecision.HIDE for _, _, decision, _, _ in items)
        final = RequestStatus.PARTIALLY_COMPLETED if (kept or deferred) and request.type == RequestType.ERASURE \
            else RequestStatus.COMPLETED
        request_transition(request=request, to=final, actor=WORKFLOW, locked=True, action="confirm", gaps=[],
                           confirmed_at=timezone.now(),
                           note=f"confirmed; {len(deferred)} deferred items" if deferred else "confirmed")
    return StepResult(True, NOTIFY)


def _confirm_gaps(request: SubjectRequest, items: list[tuple]) -> tuple[list[dict], list[dict]]:
    """Probe every forget of this request, one pass per read path for all of them; sort what remains
    into gaps (should not be there) and deferred items (kept on purpose: a lock's deferred erasure, a
    copy awaiting acknowledgement). `items`: (kind, object_id, decision, outcome, forget_event_id)."""
    hidden = {pk for _, pk, decision, _, _ in items if decision == ItemDecision.HIDE}
    event_ids = sorted({event_id for *_, event_id in items if event_id is not None})
    events = list(ForgetEvent.objects.filter(tenant=request.tenant, pk__in=event_ids).order_by("pk"))
    results = erasures_confirm(tenant=request.tenant, events=events)
    found = [gap for result in results for gap in result.gaps]
    # A hidden record that a read by id still returns is a gap, whatever else is expected of it.
    visible = {gap["record_id"] for gap in found if gap["path"] == "read_by_id"}
    gaps, deferred = [], []
    for gap in found:
        expected = (gap.get("record_id") in hidden and gap["gap"] in ("content_at_rest", "visible")
                    and gap["path"] in ("storage", "keyword_search", "similarity_search")
                    and gap["record_id"] not in visible) or gap["gap"] == "unacknowledged"
        (deferred if expected else gaps).append(gap)
    gaps += [{"kind": kind, "id": pk, "gap": "not_processed"} for kind, pk, _, outcome, _ in items
             if outcome == ItemOutcome.PENDING]
    if request.type != RequestType.ACCESS:
        live = Record.objects.filter(tenant=request.tenant, subject=request.subject, forgotten_at__isnull=True,
                                     redacted_at__isnull=True).values_list("pk", flat=True)
        gaps += [{"record_id": pk, "gap": "visible"} for pk in live]
    return gaps, deferred


def _next_for(request: SubjectRequest | None) -> str | None:
    """Where a request stands, for a step that found its own work already done (a duplicate delivery)."""
    if request is None:
        return None
    if request.status == RequestStatus.VERIFIED:
        return PLAN
    if request.status == RequestStatus.PLANNED:
        return EVALUATE
    if request.status == RequestStatus.EXECUTING:
        return CONFIRM if request.executed_at else EXECUTE
    if request.status in (RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED) and not request.notified_at:
        return NOTIFY
    return None


def conflicts_open(request: SubjectRequest):
    return RetentionConflict.objects.filter(request=request, status=ConflictStatus.OPEN)


def access_export(*, request: SubjectRequest) -> dict:
    """The subject's live data (never forgotten data), from the same planning as an erasure."""
    from memory import selectors

    records = selectors._visible_records(request.tenant, Record.objects.filter(
        tenant=request.tenant, subject=request.subject).values("pk")).order_by("pk")
    artifact_ids = Lineage.objects.filter(source__in=records.values("pk")).values("artifact_id")
    artifacts = selectors._live_artifacts(request.tenant, artifact_ids).order_by("pk").prefetch_related("lineage")
    return {
        "subject": request.subject.ref,
        "generated_at": timezone.now().isoformat(),
        "records": [{"id": r.pk, "scope": r.scope.path, "content_class": r.content_class.name, "content": r.content,
                     "created_at": r.created_at.isoformat(), "tier": r.tier} for r in records],
        "derived": [{"id": a.pk, "kind": a.kind, "content": a.content, "holder": a.holder,
                     "derived_from": sorted(link.source_id for link in a.lineage.all())} for a in artifacts
                    if a.kind != ArtifactKind.EMBEDDING],
    }


def requests_stalled(*, older_than_seconds: int = 300):
    """(request id, next step) of running workflows with no history for a while."""
    from datetime import timedelta

    from django.db.models import Max

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    running = (SubjectRequest.objects.filter(status__in=[RequestStatus.PLANNED, RequestStatus.EXECUTING,
                                                         RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED],
                                             notified_at__isnull=True)
               .annotate(last=Max("history__at")).filter(last__lt=cutoff))
    for request in running:
        step = _next_for(request)
        if step:
            yield request.pk, step
