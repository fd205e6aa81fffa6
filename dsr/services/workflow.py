"""The erasure workflow: plan, evaluate, execute (with propagation), confirm, notify.

Each step is a plain function of a request id that (1) locks the request row, (2) reads what is left to
do from the database (`RequestItem` rows and the step marks on the request), (3) does one bounded piece
of work in one transaction, and (4) says what to run next. Running a step twice, or after a worker
died anywhere inside it, is harmless: the transaction either committed (the marks say so) or did not
(nothing happened). The Celery tasks in dsr/tasks.py only call these and enqueue the next step after
commit.

A step runs for a *group* of requests at once: its own request first (waiting for its row lock, as a
duplicate delivery must), then up to GROUP_SIZE - 1 other requests of the same tenant and type that are
due at the same step, claimed with `SELECT ... FOR UPDATE SKIP LOCKED` (a request another worker holds is
left to it). The group's step is one transaction of set-based statements: one plan INSERT, one set of
decisions, one confirmation pass for all of the group's forgets, one checkpoint for all of its receipts,
one UPDATE per state move and one INSERT of history rows. What stays per request is what the invariants
want per request: its own forgets (one per decision, each with its own event and signed tombstone; the
group's forgets are made by one `records_forget_many` call, set-based across them), its own receipts and
its own notice. A request whose own part fails with an application error (a forget refused as a whole, a
mail the server refuses) is rolled back to its savepoint and left due, without spoiling the others (when
the group's forget call fails, each request's forgets are made again on their own, each in a savepoint);
any other error (a lost connection, a deadlock, a crash) rolls the whole group's step back, and the
message is delivered again. A request that a group advanced may still have its own message in the queue
(a duplicate, or a start of its own): that delivery finds its work done (one plain read) and says where the
request stands. Requests started together share a message per group (`workflows_start`).
"""
from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from config.errors import ApplicationError
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
from dsr.services.states import histories_add, request_transition, requests_transition
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
from memory.lookups import batches, json_rows
from memory.services import (
    ForgetOrder,
    ForgetTarget,
    records_forget_many,
    records_refusals,
    records_refusals_chain,
)
from memory.services.confirm import erasures_confirm

logger = logging.getLogger(__name__)

# Records per execute transaction (a group's: its own request's next batch, then other requests' batches
# while they fit), one forget (one tombstone) per request and decision. Small enough that a worker killed
# mid-batch loses little work and holds row locks (and the tombstone log's) briefly; large enough that the
# per-batch signing and bookkeeping are amortized.
EXECUTE_BATCH = settings.LEDGER_EXECUTE_BATCH
# Requests per step transaction. A group shares one plan statement, one confirmation pass, one checkpoint
# and its bookkeeping, which is what a request's cost was mostly made of; but a group's execute holds the
# tombstone log's lock from its first forget to its commit (every forget elsewhere waits that long), and a
# crash redoes the whole group's step. 50 requests of ordinary size keep a step to a second or two (larger
# groups gained ~10% in bench_workflow.py); a group's execute also stops at EXECUTE_BATCH records.
GROUP_SIZE = max(1, settings.LEDGER_WORKFLOW_GROUP_SIZE)
WORKFLOW = "workflow"
# Ids per set-based UPDATE of request items: well under any bound-parameter limit.
UPDATE_BATCH = 5_000

PLAN, EVALUATE, EXECUTE, CONFIRM, NOTIFY, DONE = "plan", "evaluate", "execute", "confirm", "notify", None

_MODE = {ItemDecision.ERASE: ForgetMode.HARD, ItemDecision.REDACT: ForgetMode.REDACT, ItemDecision.HIDE: ForgetMode.SOFT}
_RECORD_OUTCOME = {"deleted": ItemOutcome.DELETED, "redacted": ItemOutcome.REDACTED, "hidden": ItemOutcome.HIDDEN}
_FINISHED = [RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED]

# What makes another request due at a step, for a group to claim it. A verified request is planned only
# once someone started its workflow: verification alone does not start it (`workflow_start`).
_DUE = {
    PLAN: Q(status=RequestStatus.VERIFIED, workflow_started_at__isnull=False),
    EVALUATE: Q(status=RequestStatus.PLANNED),
    EXECUTE: Q(status=RequestStatus.EXECUTING, executed_at__isnull=True),
    CONFIRM: Q(status=RequestStatus.EXECUTING, executed_at__isnull=False),
    NOTIFY: Q(status__in=_FINISHED, notified_at__isnull=True),
}


@dataclass(frozen=True)
class StepResult:
    did_work: bool
    next_step: str | None


def _locked(request_id: int) -> SubjectRequest | None:
    # Only the request's own row is locked (`of`): the tenant's and subject's rows are shared by every
    # request of the tenant, and locking them would serialize all of a tenant's workflows and make every
    # SKIP LOCKED claim skip the whole tenant.
    return (SubjectRequest.objects.select_for_update(of=("self",)).filter(pk=request_id)
            .select_related("tenant", "subject").first())


def _is_due(request: SubjectRequest | Standing, step: str) -> bool:
    """The message's own request is due at its step by its status and marks (a verified request with no
    start mark too: the message is the start)."""
    if step == PLAN:
        return request.status == RequestStatus.VERIFIED
    if step == EVALUATE:
        return request.status == RequestStatus.PLANNED
    if step == EXECUTE:
        return request.status == RequestStatus.EXECUTING and not request.executed_at
    if step == CONFIRM:
        return request.status == RequestStatus.EXECUTING and bool(request.executed_at)
    return request.status in _FINISHED and not request.notified_at


@dataclass(frozen=True)
class Standing:
    """Where a request stands: what `_is_due` and `_next_for` read of it."""
    status: str
    executed_at: datetime | None
    notified_at: datetime | None


# found_done's read, written out: it is all that 49 of every 50 deliveries do once steps run for groups, and the
# ORM's query and model took ~0.35 of its ~0.45 ms of CPU (bench_workflow.py).
_STANDING_SQL = f"SELECT status, executed_at, notified_at FROM {SubjectRequest._meta.db_table} WHERE id = %s"


def _standing(request_id: int) -> Standing | None:
    with connection.cursor() as cursor:
        cursor.execute(_STANDING_SQL, [request_id])
        row = cursor.fetchone()
    return Standing(*row) if row else None


def requests_finished(*, request_ids: list[int]) -> set[int]:
    """Those of these requests whose workflow has nothing left to run (`_next_for`: notified, closed, refused,
    gone), from one plain read: a dispatch skips them (dsr/tasks.py)."""
    if not request_ids:
        return set()
    standing = dict.fromkeys(request_ids)
    standing.update((pk, Standing(*row)) for pk, *row in SubjectRequest.objects.filter(pk__any_of=request_ids)
                    .values_list("pk", "status", "executed_at", "notified_at"))
    return {pk for pk, request in standing.items() if _next_for(request) is None}


def found_done(*, request_id: int, step: str) -> StepResult | None:
    """For a delivery whose request is not due at its step (a group advanced it, or a duplicate): where the
    request stands, from one plain read by primary key, with no transaction and no lock. None when it is
    due: then the step locks it and checks again. A read that misses a move being committed is harmless
    either way: a request seen due is checked again under its lock, and one seen past its step gets the next
    step it was seen due at, which finds its own work done in turn. Most deliveries end here once steps
    run for groups (49 of 50), so this is the cost they add to a request."""
    request = _standing(request_id)
    if request is not None and _is_due(request, step):
        return None
    return StepResult(False, _next_for(request) if step != NOTIFY else None)


# What the grouped steps read of the requests they claim besides their own (the message's own request is read
# whole): a claim loads up to GROUP_SIZE - 1 of them at every step, and the other columns (eight more timestamps,
# the JSON gaps, the identity and extension notes) cost ~0.05 ms of CPU a row to turn into Python
# (bench_workflow.py), for nothing. A field read that is not here costs a query per request: the tests run the
# grouped steps with deferred loads refused.
_PEER_FIELDS = ("id", "tenant_id", "subject_id", "type", "regulation", "status", "contact_email", "received_at",
                "executed_at", "notified_at")


def group_claim(*, request_id: int, step: str) -> tuple[SubjectRequest | None, list[SubjectRequest]]:
    """Lock the message's own request (waiting for it) and, when it is due at `step`, up to GROUP_SIZE - 1
    other requests of its tenant and type due at the same step (skipping those another transaction holds).
    Returns (own request or None, the group: own request first, empty when it is not due). Must run inside
    the step's transaction: the locks last until it ends."""
    own = _locked(request_id)
    if own is None or not _is_due(own, step):
        return own, []
    group = [own]
    # An access request's plan is its export, one request at a time.
    if GROUP_SIZE > 1 and not (step == PLAN and own.type == RequestType.ACCESS):
        peers = list(SubjectRequest.objects.select_for_update(skip_locked=True, of=("self",))
                     .filter(_DUE[step], tenant_id=own.tenant_id, type=own.type).exclude(pk=own.pk)
                     .only(*_PEER_FIELDS, *(("export",) if own.type == RequestType.ACCESS else ()))
                     .order_by("pk")[:GROUP_SIZE - 1])
        for peer in peers:
            peer.tenant = own.tenant  # one tenant for the group: no join, no second read
        group += peers
    return own, group


def workflow_start(*, request: SubjectRequest, actor: str) -> SubjectRequest:
    """Operators start the workflow of a verified request; the first step runs on a worker."""
    if request.status != RequestStatus.VERIFIED:
        from dsr import errors
        raise errors.conflict("not_verified", "A request runs only after the subject's identity is verified.",
                              status=request.status)
    workflows_start(requests=[request], actor=actor)
    return request


@dataclass(frozen=True)
class WorkflowsStarted:
    started: list[SubjectRequest]
    refused: list[SubjectRequest]  # not verified: left as they are


def workflows_start(*, requests: list[SubjectRequest], actor: str) -> WorkflowsStarted:
    """Start the workflows of several requests at once (an operator's selection): the verified ones are
    started, the others refused and left as they are.

    The start marks and history rows are written set-based, and the first step is enqueued once per
    GROUP_SIZE requests (`dsr.workflow_dispatch`, which runs each one's chain in turn), not once each: the
    first chain's steps claim up to GROUP_SIZE due requests, so a message per request would mostly find its
    work done, at the cost of a delivery each (~1.5 ms of a worker's CPU: bench_workflow.py). A lost
    message is made good by `dsr.workflow_resume` (`requests_stalled`), as for any step."""
    started = [r for r in requests if r.status == RequestStatus.VERIFIED]
    refused = [r for r in requests if r.status != RequestStatus.VERIFIED]
    if started:
        now = timezone.now()
        SubjectRequest.objects.filter(pk__in=[r.pk for r in started], workflow_started_at__isnull=True)\
            .update(workflow_started_at=now)
        for request in started:
            request.workflow_started_at = request.workflow_started_at or now
        histories_add(requests=started, action="workflow_started", actor=actor)
        from dsr.tasks import dispatch_enqueue

        for chunk in batches([r.pk for r in started], GROUP_SIZE):
            dispatch_enqueue(request_ids=chunk)
    return WorkflowsStarted(started, refused)


def step_plan(*, request_id: int) -> StepResult:
    """Every record of the subject in every scope of the tenant, and every artifact reachable through
    lineage; for an access request, the export of the subject's live data.

    An erasure or restriction is evaluated in the same transaction, as it is planned (`_plan_decided`; both
    moves, verified -> planned -> executing, with their history rows): evaluation reads only the subject's
    records and their locks, which the plan reads anyway, so a separate transaction (and a round trip through
    the broker) would buy nothing. A request found `planned` (one planned before evaluation was folded in)
    is evaluated by `step_evaluate`.
    """
    if (done := found_done(request_id=request_id, step=PLAN)) is not None:
        return done
    with transaction.atomic():
        own, group = group_claim(request_id=request_id, step=PLAN)
        if not group:
            return StepResult(False, _next_for(own))
        if own.type == RequestType.ACCESS:
            _plan_items(group)
            export = access_export(request=own)
            access_items_settle(request_id=own.pk, export=export)
            own = request_transition(request=own, to=RequestStatus.PLANNED, actor=WORKFLOW, locked=True,
                                     action="plan", note=f"{len(export['records'])} live records exported",
                                     planned_at=timezone.now(), export=export)
            request_transition(request=own, to=RequestStatus.COMPLETED, actor=WORKFLOW, locked=True,
                               action="export_ready", confirmed_at=timezone.now())
            return StepResult(True, NOTIFY)
        added, decided = _plan_decided(group)
        requests_transition(requests=group, to=RequestStatus.PLANNED, actor=WORKFLOW, action="plan",
                            notes={r.pk: f"{added[r.pk]} items planned" for r in group}, planned_at=timezone.now())
        requests_transition(requests=group, to=RequestStatus.EXECUTING, actor=WORKFLOW, action="evaluate",
                            notes={r.pk: f"{decided[r.pk]} records decided" for r in group},
                            evaluated_at=timezone.now())
    return StepResult(True, EXECUTE)


# The plan, set-based for a group of (request, subject): the subjects' records that still hold content or
# are still visible (live or hidden, not those already redacted), and every artifact derived from them,
# inserted in one statement each; the unique (request, kind, object_id) constraint makes a second run add
# only what is new, and RETURNING says what was new. The group goes in as a VALUES list (in a CTE, which
# PostgreSQL and SQLite both read).
# `_PLANNED_RECORDS` is the records' condition of the SQL below, for the ORM.
_PLANNED_RECORDS = Q(redacted_at__isnull=True) | Q(content__gt="")
_PLAN_GROUP = "WITH g(request_id, subject_id) AS (VALUES {values})"
_PLAN_RECORDS_SELECT = f"""
    SELECT g.request_id, %s, r.id, '', '', %s
    FROM g JOIN {Record._meta.db_table} r ON r.subject_id = g.subject_id
    WHERE r.tenant_id = %s AND (r.redacted_at IS NULL OR r.content > '')
"""
_PLAN_ARTIFACTS_SELECT = f"""
    SELECT DISTINCT g.request_id, %s, a.id, a.kind, %s, %s
    FROM g JOIN {Record._meta.db_table} r ON r.subject_id = g.subject_id
    JOIN {Lineage._meta.db_table} l ON l.source_id = r.id
    JOIN {DerivedArtifact._meta.db_table} a ON a.id = l.artifact_id
    WHERE r.tenant_id = %s AND (r.redacted_at IS NULL OR r.content > '')
"""
_PLAN_COLUMNS = "request_id, kind, object_id, artifact_kind, decision, outcome"
_PLAN_INSERT = f"INSERT INTO {RequestItem._meta.db_table} ({_PLAN_COLUMNS})"
_PLAN_SQL = (f"{_PLAN_GROUP} {_PLAN_INSERT} {_PLAN_RECORDS_SELECT} UNION ALL {_PLAN_ARTIFACTS_SELECT} "
             "ON CONFLICT DO NOTHING RETURNING request_id")
_PLAN_ARTIFACTS_SQL = (f"{_PLAN_GROUP} {_PLAN_INSERT} {_PLAN_ARTIFACTS_SELECT} "
                       "ON CONFLICT DO NOTHING RETURNING request_id")


def _plan_group(requests: list[SubjectRequest]) -> tuple[str, list]:
    pairs = [(r.pk, r.subject_id) for r in requests]
    return ", ".join(["(%s, %s)"] * len(pairs)), [value for pair in pairs for value in pair]


def _plan_items(requests: list[SubjectRequest]) -> Counter:
    """Add the subjects' live or hidden records, and their artifacts, to each request's plan (idempotent),
    undecided; returns how many items were new, per request id. The requests are of one tenant."""
    values, params = _plan_group(requests)
    tenant_id = requests[0].tenant_id
    params += [ItemKind.RECORD.value, ItemOutcome.PENDING.value, tenant_id, ItemKind.ARTIFACT.value,
               ItemDecision.PROPAGATE.value, ItemOutcome.PENDING.value, tenant_id]
    with connection.cursor() as cursor:
        cursor.execute(_PLAN_SQL.format(values=values), params)
        return Counter(request_id for (request_id,) in cursor.fetchall())


def _plan_decided(requests: list[SubjectRequest]) -> tuple[Counter, Counter]:
    """The plan of erasures or restrictions (a group is of one type), with each record item's decision made
    as it is written (`_decision`, as `_evaluate_items` decides what was planned undecided): one read of the
    subjects' records, which says what a hard erasure and then a redaction would refuse, one INSERT of the
    decided record items and one of the artifact items, and the retention conflicts of the records kept.
    Writing the items undecided and deciding them in a second statement rewrote every record item (no item
    update is HOT): ~0.1 ms of the database's time a request, and the worker's reading them back as model
    instances (bench_workflow.py).
    Returns the items new per request id, and the record items decided."""
    tenant = requests[0].tenant
    by_subject: dict[int, list[int]] = defaultdict(list)
    for request in requests:
        by_subject[request.subject_id].append(request.pk)
    records = Record.objects.filter(_PLANNED_RECORDS, tenant=tenant, subject_id__in=list(by_subject))
    restrict = requests[0].type == RequestType.RESTRICTION
    modes = () if restrict else (ForgetMode.HARD, ForgetMode.REDACT)
    keys, refusals = records_refusals_chain(tenant=tenant, records=records, key="subject_id", modes=modes)
    no_hard, no_redact = refusals if refusals else ({}, {})
    rows = []  # (request id, record id, decision, reason, deferred until)
    for subject_id, record_id in keys:
        decision, reason, deferred_until = ((ItemDecision.HIDE, None, None) if restrict
                                            else _decision(record_id, no_hard, no_redact))
        for request_id in by_subject[subject_id]:
            rows.append((request_id, record_id, decision.value, reason, deferred_until))
    new = _record_items_insert(rows)
    decided = Counter(request_id for request_id, _record_id in new)
    added = decided.copy()
    values, params = _plan_group(requests)
    params += [ItemKind.ARTIFACT.value, ItemDecision.PROPAGATE.value, ItemOutcome.PENDING.value, tenant.pk]
    with connection.cursor() as cursor:
        cursor.execute(_PLAN_ARTIFACTS_SQL.format(values=values), params)
        added.update(request_id for (request_id,) in cursor.fetchall())
    _conflicts_open(tenant, [(request_id, record_id, reason, deferred_until)
                             for request_id, record_id, decision, reason, deferred_until in rows
                             if decision == ItemDecision.HIDE and reason and (request_id, record_id) in new])
    return added, decided


# The retention conflicts a plan opens, in one statement on PostgreSQL (one JSON document, as the items):
# `bulk_create` built a model instance and bound nine values a conflict (a group's ~100: ~1.3 ms to compile).
_CONFLICTS_OPEN_SQL = f"""
    INSERT INTO {RetentionConflict._meta.db_table} (request_id, tenant_id, record_id, code, authority, blocking,
        locked_until, status, opened_at, decided_by, justification)
    SELECT v.request_id, %s, v.record_id, v.code, v.authority, v.blocking, v.locked_until, %s, %s, '', ''
    FROM json_to_recordset(%s::json) AS v(request_id bigint, record_id bigint, code text, authority text,
        blocking jsonb, locked_until timestamptz)
    ON CONFLICT DO NOTHING
"""


def _conflicts_open(tenant, kept: list[tuple]) -> None:
    """Open a retention conflict for each kept record (request id, record id, the refusal's reason, its lock's
    end), unless that request has one for that record already. What `json_rows` refuses goes the ORM's way.
    """
    if not kept:
        return
    now = timezone.now()
    document = json_rows([
        {"request_id": request_id, "record_id": record_id, "code": reason["code"],
         "authority": reason.get("authority") or "", "blocking": reason["blocking"], "locked_until": locked_until}
        for request_id, record_id, reason, locked_until in kept]) if connection.vendor == "postgresql" else None
    if document is None:
        RetentionConflict.objects.bulk_create([RetentionConflict(
            request_id=request_id, tenant=tenant, record_id=record_id, code=reason["code"],
            authority=reason.get("authority") or "", blocking=reason["blocking"], locked_until=locked_until,
            opened_at=now,
        ) for request_id, record_id, reason, locked_until in kept], ignore_conflicts=True)
        return
    with connection.cursor() as cursor:
        cursor.execute(_CONFLICTS_OPEN_SQL, [tenant.pk, ConflictStatus.OPEN.value, now, document])


# Decided record items, in one statement on PostgreSQL: the rows go as one JSON document (`json_rows`).
_RECORD_ITEMS_INSERT_SQL = f"""
    INSERT INTO {RequestItem._meta.db_table} ({_PLAN_COLUMNS}, reason, deferred_until)
    SELECT v.request_id, %s, v.object_id, '', v.decision, %s, v.reason, v.deferred_until
    FROM json_to_recordset(%s::json)
        AS v(request_id bigint, object_id bigint, decision text, reason jsonb, deferred_until timestamptz)
    ON CONFLICT DO NOTHING RETURNING request_id, object_id
"""


def _record_items_insert(rows: list[tuple]) -> set[tuple[int, int]]:
    """Insert record items (request id, record id, decision, reason, deferred until) that are not planned yet;
    returns the (request id, record id) of those inserted."""
    if not rows:
        return set()
    columns = ("request_id", "object_id", "decision", "reason", "deferred_until")
    documents = [json_rows([dict(zip(columns, row)) for row in batch]) for batch in batches(rows, UPDATE_BATCH)] \
        if connection.vendor == "postgresql" else [None]
    if None not in documents:
        new = set()
        for document in documents:
            with connection.cursor() as cursor:
                cursor.execute(_RECORD_ITEMS_INSERT_SQL,
                               [ItemKind.RECORD.value, ItemOutcome.PENDING.value, document])
                new.update(cursor.fetchall())
        return new
    # SQLite (the embedded default; its writers are serialized, so what is planned cannot change meanwhile), or
    # a reason orjson refuses: the ORM's way.
    planned = set(RequestItem.objects.filter(request_id__in={row[0] for row in rows}, kind=ItemKind.RECORD)
                  .values_list("request_id", "object_id"))
    fresh = [row for row in rows if row[:2] not in planned]
    RequestItem.objects.bulk_create([RequestItem(
        request_id=request_id, kind=ItemKind.RECORD, object_id=object_id, decision=decision,
        outcome=ItemOutcome.PENDING, reason=reason, deferred_until=deferred_until,
    ) for request_id, object_id, decision, reason, deferred_until in fresh], batch_size=500)
    return {row[:2] for row in fresh}


def step_evaluate(*, request_id: int) -> StepResult:
    """Decide the least destructive operation that still satisfies the request, per record (for requests
    left `planned`; `step_plan` evaluates in its own transaction)."""
    if (done := found_done(request_id=request_id, step=EVALUATE)) is not None:
        return done
    with transaction.atomic():
        own, group = group_claim(request_id=request_id, step=EVALUATE)
        if not group:
            return StepResult(False, _next_for(own))
        _evaluate(group)
    return StepResult(True, EXECUTE)


def _evaluate(requests: list[SubjectRequest]) -> None:
    decided = _evaluate_items(requests)
    requests_transition(requests=requests, to=RequestStatus.EXECUTING, actor=WORKFLOW, action="evaluate",
                        notes={r.pk: f"{decided[r.pk]} records decided" for r in requests},
                        evaluated_at=timezone.now())


def _evaluate_items(requests: list[SubjectRequest]) -> Counter:
    """Undecided record items get: erase (nothing forbids it), redact (a lock keeps the row, not the
    content), or hide and restrict with a deferred erasure and a retention conflict for legal. For requests
    of one tenant, all at once; returns how many were decided, per request id. (`_plan_decided` decides a
    new plan's records, by the same `_decision`, as it writes them.)"""
    by_pk = {r.pk: r for r in requests}
    items = list(RequestItem.objects.filter(request_id__in=list(by_pk), kind=ItemKind.RECORD, decision="")
                 .only("pk", "request_id", "object_id", "decision", "reason", "deferred_until"))
    decided = Counter(i.request_id for i in items)
    if not items:
        return decided
    restricted = [i.pk for i in items if by_pk[i.request_id].type == RequestType.RESTRICTION]
    for batch in batches(restricted, UPDATE_BATCH):
        RequestItem.objects.filter(pk__in=batch).update(decision=ItemDecision.HIDE)
    items = [i for i in items if by_pk[i.request_id].type != RequestType.RESTRICTION]
    if not items:
        return decided
    tenant = requests[0].tenant
    ids = sorted({i.object_id for i in items})
    no_hard = records_refusals(tenant=tenant, record_ids=ids, mode=ForgetMode.HARD)
    no_redact = records_refusals(tenant=tenant, record_ids=sorted(no_hard), mode=ForgetMode.REDACT)
    for item in items:
        item.decision, reason, deferred_until = _decision(item.object_id, no_hard, no_redact)
        if reason is not None:
            item.reason = reason
        if item.decision == ItemDecision.HIDE:
            item.deferred_until = deferred_until
    _items_decide(items)
    _conflicts_open(tenant, [(i.request_id, i.object_id, i.reason, i.deferred_until)
                             for i in items if i.decision == ItemDecision.HIDE])
    return decided


def _decision(record_id: int, no_hard: dict[int, dict], no_redact: dict[int, dict]) -> tuple:
    """The least destructive operation that still satisfies an erasure, for one record: (decision, the refusal
    that led to it or None, the deferral's date or None). Erase where nothing forbids it; redact where a lock
    keeps the row and not its content; else hide, with a deferred erasure due when the lock ends (and a
    retention conflict for legal, opened by the caller). `no_hard`, `no_redact`: what a hard erasure, and
    then a redaction, would refuse (`records_refusals`)."""
    if record_id not in no_hard:
        return ItemDecision.ERASE, None, None
    if record_id not in no_redact:
        return ItemDecision.REDACT, no_hard[record_id], None
    reason = no_redact[record_id]
    return ItemDecision.HIDE, reason, _parse(reason.get("locked_until"))


# The decisions, in one statement on PostgreSQL: each item's decision, reason and deferral as one JSON document
# (`json_rows`, as the plan's items and the execute's outcomes). (Django's `bulk_update` spells a CASE per field
# and item: for a group's kept records, ~1 ms of a request's time in bench_workflow.py, most of it building and
# planning that statement.)
_ITEMS_DECIDE_SQL = f"""
    UPDATE {RequestItem._meta.db_table} AS i
    SET decision = v.decision, reason = v.reason, deferred_until = v.deferred_until
    FROM json_to_recordset(%s::json) AS v(id bigint, decision text, reason jsonb, deferred_until timestamptz)
    WHERE i.id = v.id
"""


def _items_decide(items: list[RequestItem]) -> None:
    """Write the items' decisions, reasons and deferrals: one UPDATE per UPDATE_BATCH items on PostgreSQL;
    elsewhere, or for a reason `json_rows` refuses, one UPDATE for the erased and `bulk_update` for those with
    a reason of their own."""
    documents = [json_rows([{"id": i.pk, "decision": str(i.decision), "reason": i.reason,
                             "deferred_until": i.deferred_until} for i in batch])
                 for batch in batches(items, UPDATE_BATCH)] if connection.vendor == "postgresql" else [None]
    if None not in documents:
        for document in documents:
            with connection.cursor() as cursor:
                cursor.execute(_ITEMS_DECIDE_SQL, [document])
        return
    erase = [i.pk for i in items if i.decision == ItemDecision.ERASE]
    for batch in batches(erase, UPDATE_BATCH):
        RequestItem.objects.filter(pk__in=batch).update(decision=ItemDecision.ERASE)
    RequestItem.objects.bulk_update([i for i in items if i.decision != ItemDecision.ERASE],
                                    ["decision", "reason", "deferred_until"], batch_size=1000)


def _parse(value):
    from django.utils.dateparse import parse_datetime

    return parse_datetime(value) if value else None


def step_execute(*, request_id: int) -> StepResult:
    """One batch of pending record items per request of the group through the one guarded forget, per
    request and decision, for as many of the group's requests as fit in EXECUTE_BATCH records (the own
    request always); their derivatives are erased with them (embeddings, summaries, caches deleted;
    archive copies logged; other agents' copies notified). A request whose items remain runs EXECUTE again;
    the batch that leaves none settles its artifact items and marks it executed, in the same transaction.

    A request whose forget fails with an application error is rolled back to its own savepoint and stays
    due; the others commit. When that request is the message's own, its error is raised after the commit,
    as it was when a step ran for one request."""
    failed: ApplicationError | None = None
    if (done := found_done(request_id=request_id, step=EXECUTE)) is not None:
        return done
    with transaction.atomic():
        own, group = group_claim(request_id=request_id, step=EXECUTE)
        if not group:
            return StepResult(False, _next_for(own))
        pending = _execute_batches(group)
        undecided = [r for r in group if any(not item.decision for item in pending.get(r.pk, ()))]
        if undecided:
            # Records whose lock changed since (refused below), or planned since: decided again first.
            _evaluate_items(undecided)
            pending.update(_execute_batches(undecided))
        acted, executed, again = [], [], set()
        budget, chosen, taken = EXECUTE_BATCH, [], set()
        for request in group:
            batch = pending.get(request.pk, [])
            records = {item.object_id for item in batch}
            if request is not own and (len(batch) > budget or not records.isdisjoint(taken)):
                # The group's transaction forgets at most EXECUTE_BATCH records (its own request's batch
                # aside), so that a crash redoes, and the log's lock is held for, no more than one batch: the
                # requests past that stay due for the next group. So does a request whose records another
                # chosen request forgets (the same subject asked twice): one forget call acts on a record
                # once, and the next group finds it forgotten already (gone, or hidden again).
                continue
            budget -= len(batch)
            taken |= records
            chosen.append((request, batch, [i for i in batch if i.decision]))
        try:
            # Every chosen request's forgets in one call (one forget, one event and one tombstone per request
            # and decision, set-based statements across them), in a savepoint of its own.
            _execute_forgets([(request, done) for request, _batch, done in chosen])
            succeeded = chosen
        except ApplicationError:
            # One request's forget failed as a whole (and so did the call, which changed nothing): each request
            # again on its own, in its own savepoint, so that only the failing one stays due.
            succeeded = []
            for request, batch, done in chosen:
                try:
                    with transaction.atomic():  # a savepoint: this request's forgets, and nothing else's
                        _execute_forgets([(request, done)])
                except ApplicationError as exc:
                    logger.warning("erasure request %s: execute failed (%s: %s); left for its own delivery",
                                   request.pk, exc.code, exc.detail)
                    if request is own:
                        failed = exc
                    continue
                succeeded.append((request, batch, done))
        for request, batch, done in succeeded:
            acted += done
            # The batch was the last when it was short and nothing in it has to be decided again.
            if done and (len(batch) == EXECUTE_BATCH or any(not item.decision for item in done)):
                again.add(request.pk)
            else:
                executed.append(request)
        _items_record(acted)
        if executed:
            _propagation_settle(executed)
            SubjectRequest.objects.filter(pk__in=[r.pk for r in executed]).update(executed_at=timezone.now())
            histories_add(requests=executed, action="executed", actor=WORKFLOW)
    if failed is not None:
        raise failed
    return StepResult(True, EXECUTE if own.pk in again else CONFIRM)


@dataclass(slots=True)
class _PendingItem:
    """A pending record item as the execute step reads and changes it: what `_execute_forgets` and
    `_items_record` use of a `RequestItem`, without a model instance (building ~500 of those a group, and
    compiling the query that read them, was ~0.1 ms of a request's CPU in bench_workflow.py)."""
    pk: int
    request_id: int
    object_id: int
    decision: str
    present: bool  # its record is still there (one forgotten by another path meanwhile is `gone`)
    outcome: str = ItemOutcome.PENDING
    reason: dict | None = None
    forget_event_id: int | None = None
    tombstone_id: str | None = None


# A group's next EXECUTE_BATCH pending record items per request, in one statement (PostgreSQL and SQLite).
_EXECUTE_BATCHES_SQL = f"""
    SELECT id, request_id, object_id, decision, present FROM (
        SELECT i.id, i.request_id, i.object_id, i.decision,
            EXISTS (SELECT 1 FROM {Record._meta.db_table} r WHERE r.id = i.object_id AND r.tenant_id = %s) AS present,
            ROW_NUMBER() OVER (PARTITION BY i.request_id ORDER BY i.id) AS rank
        FROM {RequestItem._meta.db_table} i
        WHERE i.request_id IN ({{requests}}) AND i.kind = %s AND i.outcome = %s
    ) AS ranked
    WHERE rank <= %s
    ORDER BY request_id, id
"""


def _execute_batches(requests: list[SubjectRequest]) -> dict[int, list[_PendingItem]]:
    """Per request, its next EXECUTE_BATCH pending record items, decided or not (those are decided first),
    each with whether its record is still there (a record forgotten by another path meanwhile is `gone`,
    not forgotten again): one query for the group."""
    sql = _EXECUTE_BATCHES_SQL.format(requests=", ".join(["%s"] * len(requests)))
    params = [requests[0].tenant_id, *(r.pk for r in requests), ItemKind.RECORD.value, ItemOutcome.PENDING.value,
              EXECUTE_BATCH]
    found: dict[int, list[_PendingItem]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for pk, request_id, object_id, decision, present in cursor.fetchall():
            found[request_id].append(_PendingItem(pk, request_id, object_id, decision, bool(present)))
    return found


# What a group's execute did to its items, in one statement on PostgreSQL: each item's outcome, forget event
# and tombstone, as one JSON document (a group has two forgets per request: one UPDATE per forget cost two
# round trips per request; parallel arrays were quoted by psycopg element by element).
_ITEMS_RECORD_SQL = f"""
    UPDATE {RequestItem._meta.db_table} AS i
    SET outcome = v.outcome, forget_event_id = v.event_id, tombstone_id = v.tombstone_id
    FROM json_to_recordset(%s::json) AS v(id bigint, outcome text, event_id bigint, tombstone_id uuid)
    WHERE i.id = v.id
"""


def _items_record(items: list[_PendingItem]) -> None:
    """Write what the batch did: one UPDATE for every item acted on (on PostgreSQL; elsewhere one per forget,
    whose outcome, event and tombstone are the same for all of its items), item by item only for those
    refused (decided again, with the refusal's reason)."""
    done = [i for i in items if i.decision]
    for batch in batches(done, UPDATE_BATCH) if connection.vendor == "postgresql" else ():
        document = json_rows([{"id": i.pk, "outcome": i.outcome, "event_id": i.forget_event_id,
                               "tombstone_id": i.tombstone_id or None} for i in batch])  # ids and words only
        with connection.cursor() as cursor:
            cursor.execute(_ITEMS_RECORD_SQL, [document])
    if connection.vendor != "postgresql":
        acted: dict[tuple, list[int]] = {}
        for item in done:
            acted.setdefault((item.outcome, item.forget_event_id, item.tombstone_id), []).append(item.pk)
        for (outcome, event_id, tombstone_id), pks in acted.items():
            RequestItem.objects.filter(pk__in=pks).update(outcome=outcome, forget_event_id=event_id,
                                                          tombstone_id=tombstone_id)
    RequestItem.objects.bulk_update([RequestItem(pk=i.pk, decision=i.decision, reason=i.reason)
                                     for i in items if not i.decision], ["decision", "reason"])


def _execute_forgets(work: list[tuple[SubjectRequest, list[_PendingItem]]]) -> None:
    """The forgets of these requests' decided items (of one tenant): one forget per request and decision, all in
    one `records_forget_many` call; then each item takes its outcome, event and tombstone (or, refused because
    its lock changed since evaluation, is left to be decided again). Raises the call's ApplicationError with
    nothing changed and no item touched."""
    orders, applies = [], []
    for request, done in work:
        present = {i.object_id for i in done if i.present}
        restrict = request.type == RequestType.RESTRICTION
        for decision in (ItemDecision.ERASE, ItemDecision.REDACT, ItemDecision.HIDE):
            by_id = {i.object_id: i for i in done if i.decision == decision}
            acted = sorted(set(by_id) & present)
            applies.append((by_id, present))
            if acted:
                orders.append(ForgetOrder(
                    target=ForgetTarget(record_ids=tuple(acted)), mode=_MODE[decision],
                    derivatives_mode=ForgetMode.SOFT if restrict else ForgetMode.HARD, actor=f"request:{request.pk}",
                    reason=f"{request.get_regulation_display()} {request.get_type_display()} request {request.pk}",
                    authority=_authority(request), path="erasure_workflow",
                    salts_for_receipt=True))  # the notice's receipt carries them (dsr.services.notify)
    results = iter(records_forget_many(tenant=work[0][0].tenant, orders=orders) if orders else ())
    for by_id, present in applies:
        for record_id in set(by_id) - present:
            by_id[record_id].outcome = ItemOutcome.GONE
        if not set(by_id) & present:
            continue
        result = next(results)
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


def _propagation_settle(requests: list[SubjectRequest]) -> None:
    """Artifact items take the outcome their propagation had: deleted and checked gone, entered into
    the archive deletion log, or notified to the agent holding the copy (deferred until it acknowledges).
    Archive and fleet copies are looked up in their logs; every other pending artifact item is settled by
    one UPDATE that checks, in the database, that its artifact is gone. For requests of one tenant at once."""
    tenant = requests[0].tenant
    pending = RequestItem.objects.filter(request_id__in=[r.pk for r in requests], kind=ItemKind.ARTIFACT,
                                         outcome=ItemOutcome.PENDING)
    copies = list(pending.filter(artifact_kind__in=[ArtifactKind.ARCHIVE, ArtifactKind.FLEET_COPY])
                  .values_list("pk", "object_id", "artifact_kind"))
    if copies:
        logged = set(ArchiveDeletion.objects.filter(
            tenant=tenant, artifact_id__in=[a for _, a, kind in copies if kind == ArtifactKind.ARCHIVE])
            .values_list("artifact_id", flat=True))
        notices = {n.artifact_id: n.deadline for n in FleetCopyNotice.objects.filter(
            tenant=tenant, artifact_id__in=[a for _, a, kind in copies if kind == ArtifactKind.FLEET_COPY])}
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
    """Read back through every read path, for the group's requests in one pass. A request is completed
    only when nothing remains that should not; otherwise it stays open with the precise gaps."""
    if (done := found_done(request_id=request_id, step=CONFIRM)) is not None:
        return done
    with transaction.atomic():
        own, group = group_claim(request_id=request_id, step=CONFIRM)
        if not group:
            return StepResult(False, _next_for(own))
        added = _plan_items(group)
        replanned = [r for r in group if added[r.pk]]
        if replanned:
            # Records written for the subject since the plan: they are part of the request too.
            SubjectRequest.objects.filter(pk__in=[r.pk for r in replanned]).update(executed_at=None)
            histories_add(requests=replanned, action="replanned", actor=WORKFLOW, notes={
                r.pk: "new records since the plan" for r in replanned})
        group = [r for r in group if not added[r.pk]]
        items: dict[int, list[tuple]] = defaultdict(list)
        for request_pk, *item in RequestItem.objects.filter(request_id__in=[r.pk for r in group]).values_list(
                "request_id", "kind", "object_id", "decision", "outcome", "forget_event_id"):
            items[request_pk].append(tuple(item))
        found = _confirm_gaps(group, items) if group else {}
        with_gaps = [r for r in group if found[r.pk][0]]
        for request in with_gaps:  # rare: one UPDATE each, with its own gaps
            SubjectRequest.objects.filter(pk=request.pk).update(gaps=found[request.pk][0])
        histories_add(requests=with_gaps, action="confirm_gaps", actor=WORKFLOW,
                      notes={r.pk: f"{len(found[r.pk][0])} gaps remain" for r in with_gaps})
        finals: dict[str, list[SubjectRequest]] = defaultdict(list)
        for request in group:
            if found[request.pk][0]:
                continue
            kept = any(decision == ItemDecision.HIDE for _, _, decision, _, _ in items[request.pk])
            deferred = found[request.pk][1]
            finals[RequestStatus.PARTIALLY_COMPLETED if (kept or deferred) and request.type == RequestType.ERASURE
                   else RequestStatus.COMPLETED].append(request)
        now = timezone.now()
        for final, requests in finals.items():
            requests_transition(requests=requests, to=final, actor=WORKFLOW, action="confirm", gaps=[],
                                confirmed_at=now, notes={
                                    r.pk: f"confirmed; {len(found[r.pk][1])} deferred items" if found[r.pk][1]
                                    else "confirmed" for r in requests})
    if own in replanned:
        return StepResult(True, EXECUTE)
    return StepResult(True, None if own in with_gaps else NOTIFY)


def _confirm_gaps(requests: list[SubjectRequest], items: dict[int, list[tuple]]) -> dict[int, tuple[list, list]]:
    """Probe every forget of these requests (of one tenant), one pass per read path for all of them; sort
    what remains into each request's gaps (should not be there) and deferred items (kept on purpose: a lock's
    deferred erasure, a copy awaiting acknowledgement). `items`: per request id, (kind, object_id, decision,
    outcome, forget_event_id). Returns {request id: (gaps, deferred)}."""
    tenant = requests[0].tenant
    event_ids = sorted({event_id for rows in items.values() for *_, event_id in rows if event_id is not None})
    events = list(ForgetEvent.objects.filter(tenant=tenant, pk__any_of=event_ids).order_by("pk"))
    results = {result.event.pk: result for result in erasures_confirm(tenant=tenant, events=events)}
    live: dict[int, list[int]] = defaultdict(list)
    probe_live = [r.subject_id for r in requests if r.type != RequestType.ACCESS]
    if probe_live:
        for subject_id, pk in Record.objects.filter(tenant=tenant, subject_id__in=probe_live, forgotten_at__isnull=True,
                                                    redacted_at__isnull=True).values_list("subject_id", "pk"):
            live[subject_id].append(pk)
    answers = {}
    for request in requests:
        rows = items[request.pk]
        hidden = {pk for _, pk, decision, _, _ in rows if decision == ItemDecision.HIDE}
        own_events = sorted({event_id for *_, event_id in rows if event_id is not None})
        found = [gap for event_id in own_events if event_id in results for gap in results[event_id].gaps]
        # A hidden record that a read by id still returns is a gap, whatever else is expected of it.
        visible = {gap["record_id"] for gap in found if gap["path"] == "read_by_id"}
        gaps, deferred = [], []
        for gap in found:
            expected = (gap.get("record_id") in hidden and gap["gap"] in ("content_at_rest", "visible")
                        and gap["path"] in ("storage", "keyword_search", "similarity_search")
                        and gap["record_id"] not in visible) or gap["gap"] == "unacknowledged"
            (deferred if expected else gaps).append(gap)
        gaps += [{"kind": kind, "id": pk, "gap": "not_processed"} for kind, pk, _, outcome, _ in rows
                 if outcome == ItemOutcome.PENDING]
        if request.type != RequestType.ACCESS:
            gaps += [{"record_id": pk, "gap": "visible"} for pk in live.get(request.subject_id, [])]
        answers[request.pk] = (gaps, deferred)
    return answers


def _next_for(request: SubjectRequest | Standing | None) -> str | None:
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


# Why an access request's planned item is not in its export (ItemOutcome.EXCLUDED).
NOT_EXPORTED = {"code": "not_exported",
                "detail": "Not live data when the export was made (hidden or forgotten, or an embedding: numbers "
                          "derived from records, not readable data)."}


def access_items_settle(*, request_id: int, export: dict) -> None:
    """An access request's plan says what the subject got: the items in the export are decided EXPORT and
    EXPORTED, the rest (planned from the same subject's records, but not live data) EXCLUDED with the reason.
    Set-based, a batch of ids per UPDATE; dsr migration 0013 did the same to requests exported before."""
    items = RequestItem.objects.filter(request_id=request_id)
    for kind, ids in ((ItemKind.RECORD, [r["id"] for r in export.get("records", [])]),
                      (ItemKind.ARTIFACT, [a["id"] for a in export.get("derived", [])])):
        for batch in batches(ids, UPDATE_BATCH):
            items.filter(kind=kind, object_id__in=batch).update(decision=ItemDecision.EXPORT,
                                                                outcome=ItemOutcome.EXPORTED)
    items.filter(outcome=ItemOutcome.PENDING).update(decision="", outcome=ItemOutcome.EXCLUDED, reason=NOT_EXPORTED)


def requests_stalled(*, older_than_seconds: int = 300):
    """(request id, next step) of running workflows with no history for a while, started ones not yet
    planned included (their first message lost)."""
    from datetime import timedelta

    from django.db.models import Max

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    running = (SubjectRequest.objects.filter(Q(status__in=[RequestStatus.PLANNED, RequestStatus.EXECUTING,
                                                           RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED],
                                               notified_at__isnull=True) | _DUE[PLAN])
               .annotate(last=Max("history__at")).filter(last__lt=cutoff))
    for request in running:
        step = _next_for(request)
        if step:
            yield request.pk, step
