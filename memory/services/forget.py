"""The one guarded destructive path. Every forget of records, whoever asks (the API, the admin,
management commands, `QuerySet.delete()`, the sweeps), is decided and performed by `records_forget`, which
is `records_forget_many` of one target (the erasure workflow forgets a group of requests' targets in one call).

A forget reads the target rows, decides per record (`hidden` / `redacted` / `deleted` / `refused` with
a machine-readable reason), writes the forget event and the signed tombstone (one each per target), and only
then runs the destructive statements, set-based across the targets (each row stamped with its own target's
event), in batches, in the same transaction. Each destructive statement
repeats the lock condition in its WHERE clause and its row count is checked: if a lock changed between
the read and the write (a hold placed meanwhile), the whole forget rolls back and is decided again.
The database trigger (migration memory 0003) is the last line behind all of this.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import repeat
from typing import NamedTuple

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory import errors
from memory.models import (
    ArchiveDeletion,
    ArtifactKind,
    DeletedRecord,
    DerivedArtifact,
    ForgetEvent,
    ForgetMode,
    ForgetStatus,
    FleetCopyNotice,
    Lineage,
    Record,
    RecordTag,
    Tenant,
)
from memory.lookups import array_literal, batches, json_rows
from memory.services.targets import MAX_TARGET_ITEMS, ForgetTarget
from retention.locks import class_locks, hold_covered_records
from retention.models import LegalHold

# Ids per destructive statement: one statement per batch, well under PostgreSQL's 65,535 and SQLite's
# 32,766 bound parameters, and large enough that round trips do not dominate.
BATCH_SIZE = 5_000
# How often a forget whose rows changed under it is decided again before giving up.
MAX_ATTEMPTS = 3
# A hidden record with no lock is purged by compaction within this many days (the deferred deadline).
COMPACTION_GRACE = timedelta(days=settings.LEDGER_COMPACTION_GRACE_DAYS)
# How long another agent has to acknowledge that it forgot its copy before the copy is a gap.
FLEET_ACK_WINDOW = timedelta(days=settings.LEDGER_FLEET_ACK_DAYS)

OUTCOME = {ForgetMode.SOFT: "hidden", ForgetMode.REDACT: "redacted", ForgetMode.HARD: "deleted"}


@dataclass
class ForgetResult:
    event: ForgetEvent
    status: str
    results: list[dict]
    erasure_pending: bool
    tombstone_id: str | None
    artifacts: dict = field(default_factory=dict)

    def as_api(self) -> dict:
        return {
            "status": self.status,
            "results": self.results,
            "erasure_pending": self.erasure_pending,
            "handle": {"sequence": self.event.pk, "tombstone_id": self.tombstone_id},
        }


class _RowsChanged(Exception):
    """A destructive statement touched fewer rows than decided: a lock changed meanwhile."""


class _Row(NamedTuple):
    """What the guard reads of one record: a plain tuple (a bulk forget builds 100,000 of them)."""
    pk: int
    scope_id: int
    content_class_id: int
    commitment: str
    salt: str
    tier: str
    forgotten: bool
    redacted: bool
    retained_until: datetime | None
    held: bool
    protects_content: bool

    def locked(self, now: datetime) -> bool:
        return self.held or (self.retained_until is not None and self.retained_until > now)


# The name callers outside this module use for it (a sweep's claim reads rows with `guard_values`).
GuardRow = _Row

_ROW_FIELDS = ("pk", "scope_id", "content_class_id", "commitment", "salt", "tier", "r_forgotten", "r_redacted",
               "retained_until", "held", "lock_protects_content")


class LockedRows(NamedTuple):
    """The target's rows, in id order, as the caller read them (`guard_values` under `SELECT ... FOR UPDATE`)
    in the transaction it calls `records_forget` in. A sweep's claim locks and reads the rows anyway; reading
    them a second time cost a bulk purge ~5% of its time (bench/bench_compaction.py).

    Sound because the row locks last until the transaction ends: no other transaction can place a hold,
    change a lock or delete a row meanwhile. The forget still decides every row itself, its destructive
    statements still repeat the lock condition and check their row counts, and when one comes up short (the
    caller's own transaction changed a row after reading it) the forget is decided again from a fresh read.
    """
    tenant_id: int
    rows: tuple[_Row, ...]


@dataclass(frozen=True)
class ForgetOrder:
    """One target of `records_forget_many`, with everything `records_forget` takes for it (see there)."""
    target: ForgetTarget
    mode: str
    actor: str
    reason: str = ""
    authority: str = ""
    path: str = "api"
    derivatives_mode: str | None = None
    closes: list[dict] | None = None
    locked: LockedRows | None = None


def records_forget(
    *,
    tenant: Tenant,
    target: ForgetTarget,
    mode: str,
    actor: str,
    reason: str = "",
    authority: str = "",
    path: str = "api",
    derivatives_mode: str | None = None,
    closes: list[dict] | None = None,
    locked: LockedRows | None = None,
) -> ForgetResult:
    """Decide and perform a forget of the target's records; the only function that destroys records
    (a forget of one target through `records_forget_many`).

    `derivatives_mode` is what happens to the artifacts derived from the records acted on (by default
    the forget's own mode): an erasure workflow hides a locked record but erases its copies, which no
    mandate covers.
    `closes` names the deferred items of earlier tombstones that this forget completes (a sweep purging
    hidden records, a deferred erasure): `[{"tombstone_id": str, "handle": str, "items": ["record:12"]}]`,
    signed into the statement as `propagation.closes`.
    `locked`: the target's rows as the caller read them under lock in this transaction (`LockedRows`), so
    that they are not read again; used for the first attempt only.
    """
    order = ForgetOrder(target=target, mode=mode, actor=actor, reason=reason, authority=authority, path=path,
                        derivatives_mode=derivatives_mode, closes=closes, locked=locked)
    return records_forget_many(tenant=tenant, orders=[order])[0]


def records_forget_many(*, tenant: Tenant, orders: list[ForgetOrder]) -> list[ForgetResult]:
    """Forget several independent targets of one tenant in one call: each is decided on its own and gets its
    own forget event and its own signed tombstone, exactly as `records_forget` of each would, but the
    statements are set-based across them: one read of the listed targets' rows, one lineage query, one
    INSERT of the events, one issue of the tombstones (one lock of the log), one destructive statement per
    table and mode (per batch of BATCH_SIZE rows), each row with its own target's event.

    All or nothing: when one target fails (unknown records, a lock that keeps changing, the guard trigger's
    refusal), the call raises that error and nothing of any target is changed; the caller may forget the
    targets one by one to learn which failed (the erasure workflow does). When a destructive statement comes
    up short (a hold placed between the read and the write), every target is decided again.

    The targets must not share records (a `ValueError`: a programming error). An artifact derived from
    records of two targets goes with the first of them in `orders`, as it would if they were forgotten one
    after the other with the first's derivatives erased; the later target does not list it.
    """
    normalized = []
    for order in orders:
        derivatives_mode = order.derivatives_mode or order.mode
        if order.mode not in ForgetMode.values or derivatives_mode not in ForgetMode.values:
            raise errors.invalid("invalid_mode", f"mode must be one of {ForgetMode.values}.")
        if not isinstance(order.reason, str) or len(order.reason) > 2000:
            raise errors.invalid("invalid_reason", "reason must be a string of at most 2000 characters.")
        locked, target = order.locked, order.target
        if locked is not None and (locked.tenant_id != tenant.pk or target.scope is not None
                                   or target.tag is not None or target.subjects
                                   or tuple(r.pk for r in locked.rows) != target.record_ids):
            # A programming error, not a request's: the rows would not be the ones the target names.
            raise ValueError("locked rows must be the listed records of the target, of this tenant, in id order")
        normalized.append(replace(order, derivatives_mode=derivatives_mode))
    if not normalized:
        return []
    for attempt in range(MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return _forget_once(tenant=tenant, orders=normalized, use_locked=attempt == 0)
        except _RowsChanged:
            if attempt == MAX_ATTEMPTS - 1:
                raise errors.conflict("concurrent_change", "The records' locks kept changing during the forget; "
                                      "nothing was changed. Try again.") from None
        except DatabaseError as exc:
            raise _guard_error(exc) from exc
    raise AssertionError("unreachable")


def _guard_error(exc: DatabaseError) -> Exception:
    """Map the guard trigger's refusal to its stable code; anything else is a real failure."""
    text = str(exc)
    for code in ("legal_hold", "retention_lock", "redaction_final"):
        if f"{code}:" in text:
            return errors.conflict(code, "The database guard refused to destroy a locked record; "
                                   "nothing was changed.", guard="database_trigger")
    return exc


def guard_values(records, *extra: str):
    """`records` (a queryset) in id order as tuples: the `extra` columns, then what the guard reads of the row
    (`_Row`'s fields, `guard_row`). Read it with `guard_fetch`. A sweep's claim adds FOR UPDATE to it and
    hands the rows to `records_forget` (`LockedRows`)."""
    return records.order_by("pk").annotate(
        r_forgotten=ExpressionWrapper(Q(forgotten_at__isnull=False), output_field=BooleanField()),
        r_redacted=ExpressionWrapper(Q(redacted_at__isnull=False), output_field=BooleanField()),
    ).values_list(*extra, *_ROW_FIELDS)


def guard_fetch(query) -> list[tuple]:
    """The rows of a `values_list` query of plain columns (numbers, text, booleans, times; no JSON), such as
    `guard_values`'s, in one query. On PostgreSQL they come straight off the cursor: Django's per-row iteration
    cost more than the query itself in bulk forgets. SQLite answers booleans as 0/1 and times as text: Django
    converts them."""
    connection = connections[query.db]
    if connection.vendor != "postgresql":
        return list(query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def guard_row(values: tuple) -> _Row:
    """What the guard reads of a row, from the `_Row` columns of a `guard_values` tuple (after its extras)."""
    return _Row._make(values)


def _rows(records) -> list[_Row]:
    """The rows of `records` (a queryset) in id order, in one query."""
    return list(map(_Row._make, guard_fetch(guard_values(records))))


def records_refusals(*, tenant: Tenant, record_ids: list[int], mode: str) -> dict[int, dict]:
    """What a forget in `mode` would refuse among these records, with the reasons it would give; nothing is
    changed. The erasure workflow plans with it; `records_forget` decides again when it acts."""
    now = timezone.now()
    rows = []
    for batch in batches(record_ids, BATCH_SIZE):
        rows += _rows(Record.objects.filter(tenant=tenant, pk__any_of=batch))
    return _refusal_reasons(tenant, [r for r in rows if _decide(r, mode, now) == "refused"], mode, now)


def records_refusals_chain(*, tenant: Tenant, records, key: str, modes: Sequence[str]
                           ) -> tuple[list[tuple], list[dict[int, dict]]]:
    """`records_refusals` for the records of a queryset, in one read, and for several modes in turn: what a
    forget in each of `modes` would refuse (with the reasons it would give) among those the mode before it
    refused. Answers the records' `(key, id)` pairs in id order (`key`: a column of theirs, such as
    `subject_id`) and one dict of refusals per mode; nothing is changed. The erasure workflow's plan decides
    with it (hard erasure, else redaction, else hide) in the same read that lists the subject's records."""
    now = timezone.now()
    values = guard_fetch(guard_values(records, key))
    candidates = [guard_row(value[1:]) for value in values]
    refusals = []
    for mode in modes:
        reasons = _refusal_reasons(tenant, [r for r in candidates if _decide(r, mode, now) == "refused"], mode, now)
        refusals.append(reasons)
        candidates = [r for r in candidates if r.pk in reasons]
    return [value[:2] for value in values], refusals


@dataclass
class _Plan:
    """One target of a forget as decided: its rows, decisions, refusals, artifacts and event."""
    order: ForgetOrder
    rows: list[_Row]
    decided: dict[int, str]
    refusals: dict[int, dict]
    acted: list[_Row]
    artifacts: list["_Artifact"] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    status: str = ""
    event: ForgetEvent | None = None
    deferred: list[dict] = field(default_factory=list)


def _forget_once(*, tenant, orders: list[ForgetOrder], use_locked: bool) -> list[ForgetResult]:
    now = timezone.now()
    plans = []
    for order, rows in zip(orders, _targets_rows(tenant, orders, use_locked)):
        mode = order.mode
        decided = {row.pk: _decide(row, mode, now) for row in rows}
        refused = [r for r in rows if decided[r.pk] == "refused"] if "refused" in decided.values() else []
        refusals = _refusal_reasons(tenant, refused, mode, now)
        plans.append(_Plan(order=order, rows=rows, decided=decided, refusals=refusals,
                           acted=[r for r in rows if decided[r.pk] != "refused"] if refused else rows))
    _artifacts_split(plans)

    events = []
    for plan in plans:
        order, rows, decided, refusals = plan.order, plan.rows, plan.decided, plan.refusals
        plan.results = _results(decided, refusals)
        plan.status = (ForgetStatus.REFUSED if rows and not plan.acted
                       else ForgetStatus.PARTIAL if refusals else ForgetStatus.FORGOTTEN)
        plan.event = ForgetEvent(
            tenant=tenant, public_id=uuid.uuid4(), actor=order.actor, path=order.path,
            target=order.target.describe(tenant), mode=order.mode, reason=order.reason, status=plan.status,
            created_at=now, outcomes=_outcomes_by_kind(plan.results, decided=None if refusals else decided),
            artifacts={OUTCOME[order.derivatives_mode]: [a.pk for a in plan.artifacts]} if plan.artifacts else {},
        )
        events.append(plan.event)
    _events_insert(events)  # one INSERT ... RETURNING id: the handles
    issuing = [plan for plan in plans if plan.acted]
    if issuing:
        _copies_track(tenant=tenant, plans=issuing, now=now)
        _tombstone_issue(tenant=tenant, plans=issuing, now=now)
    _execute(plans=plans, now=now)
    return [ForgetResult(event=plan.event, status=plan.status, results=plan.results, erasure_pending=bool(plan.acted),
                         tombstone_id=str(plan.event.public_id) if plan.acted else None,
                         artifacts=plan.event.artifacts) for plan in plans]


# A call's events in one statement on PostgreSQL, their rows as one JSON document made by orjson, each event's
# id read back by its public id. Django's bulk_create binds every JSON value through psycopg's Jsonb
# (`json.dumps`, then quoting each element of an array): ~3% of the erasure workflow's CPU in bench_workflow.py,
# and a sweep batch's event holds ~165 kB of JSON.
_EVENT_COLUMNS = ("tenant_id", "public_id", "actor", "path", "target", "mode", "reason", "status", "outcomes",
                  "artifacts", "created_at")
_EVENTS_INSERT_SQL = f"""
    INSERT INTO {ForgetEvent._meta.db_table} ({", ".join(_EVENT_COLUMNS)})
    SELECT {", ".join(f"v.{column}" for column in _EVENT_COLUMNS)}
    FROM json_to_recordset(%s::json) AS v(tenant_id bigint, public_id uuid, actor text, path text, target jsonb,
        mode text, reason text, status text, outcomes jsonb, artifacts jsonb, created_at timestamptz)
    RETURNING public_id, id
"""


def _events_insert(events: list[ForgetEvent]) -> None:
    """Insert new events and set their ids. Elsewhere than PostgreSQL, or for a value orjson refuses (a key
    that is not a str, an int past 64 bits, what `json` refuses: `json_rows`), `bulk_create` as JSONField
    would write them, or fail as it did."""
    connection = connections[ForgetEvent.objects.db]
    document = json_rows([{column: getattr(event, column) for column in _EVENT_COLUMNS} for event in events]) \
        if connection.vendor == "postgresql" else None
    if document is None:
        ForgetEvent.objects.bulk_create(events)
        return
    with connection.cursor() as cursor:
        cursor.execute(_EVENTS_INSERT_SQL, [document])
        ids = dict(cursor.fetchall())
    for event in events:
        event.pk = ids[uuid.UUID(str(event.public_id))]
        event._state.adding, event._state.db = False, connection.alias


def _targets_rows(tenant: Tenant, orders: list[ForgetOrder], use_locked: bool) -> list[list[_Row]]:
    """Each target's rows in id order. Rows read under lock by the caller are taken as they are (they exist: no
    existence check, no second read); the listed records of all other targets are read in one query (per batch
    of BATCH_SIZE ids), which also finds the unknown ones; a scope, tag or subjects target reads its own."""
    listed = sorted({pk for order in orders if order.target.record_ids and not (use_locked and order.locked)
                     for pk in order.target.record_ids})
    found: dict[int, _Row] = {}
    for batch in batches(listed, BATCH_SIZE):
        found.update((row.pk, row) for row in _rows(Record.objects.filter(tenant=tenant, pk__any_of=batch)))
    per_target, seen = [], set()
    for order in orders:
        target = order.target
        if use_locked and order.locked is not None:
            rows = list(order.locked.rows)
        elif target.record_ids:
            target.records_check(found)
            rows = [found[pk] for pk in sorted(target.record_ids)]
        else:
            rows = _rows(target.records(tenant))
        ids = {row.pk for row in rows}
        if not seen.isdisjoint(ids):
            raise ValueError("the targets of one forget must not share records")
        seen |= ids
        per_target.append(rows)
    return per_target


def _decide(row: _Row, mode: str, now: datetime) -> str:
    if mode == ForgetMode.SOFT:
        return "redacted" if row.redacted else "hidden"
    if mode == ForgetMode.REDACT:
        if row.held or (row.locked(now) and row.protects_content):
            return "refused"
        return "redacted"
    return "refused" if row.locked(now) else "deleted"


def _results(decided: dict[int, str], refusals: dict[int, dict]) -> list[dict]:
    """The answer's per-record results, in the rows' order (`decided`'s): outcome, and a refusal's reason."""
    if not refusals:
        return [{"record_id": pk, "outcome": outcome} for pk, outcome in decided.items()]
    return [{"record_id": pk, "outcome": outcome, "reason": refusals[pk]} if pk in refusals
            else {"record_id": pk, "outcome": outcome} for pk, outcome in decided.items()]


def _permitted_modes(row: _Row, now: datetime) -> list[str]:
    modes = [ForgetMode.SOFT.value]
    if not row.held and not (row.locked(now) and row.protects_content):
        modes.append(ForgetMode.REDACT.value)
    if not row.locked(now):
        modes.append(ForgetMode.HARD.value)
    return modes


def _refusal_reasons(tenant: Tenant, refused: list[_Row], mode: str, now: datetime) -> dict[int, dict]:
    """Per refused record: the code, every blocking rule or hold with its authority, the lock's end, and
    the modes still permitted. Queries: one for the rules, one per active hold (holds are few), one for the
    rule-locked records' creation times."""
    if not refused:
        return {}
    locks = class_locks({r.content_class_id for r in refused})
    holds_by_record: dict[int, list[dict]] = {}
    held_ids = [r.pk for r in refused if r.held]
    if held_ids:
        for hold in LegalHold.objects.filter(tenant=tenant, released_at__isnull=True).order_by("pk"):
            for batch in batches(held_ids, BATCH_SIZE):
                covered = hold_covered_records(hold).filter(pk__in=batch)
                for pk in covered.values_list("pk", flat=True):
                    holds_by_record.setdefault(pk, []).append({
                        "type": "hold", "hold_id": hold.pk, "matter": hold.matter,
                        "authority": hold.authority or hold.matter, "placed_at": hold.placed_at.isoformat(),
                        "until": None,
                    })
    rule_locked = [r.pk for r in refused if r.retained_until is not None and r.retained_until > now]
    created = {}
    for batch in batches(rule_locked, BATCH_SIZE):
        created.update(Record.objects.filter(pk__any_of=batch).values_list("pk", "created_at"))
    reasons = {}
    for row in refused:
        lock = locks[row.content_class_id]
        blocking = list(holds_by_record.get(row.pk, []))
        if row.pk in created:
            # Every rule that still keeps the record, each with its own end: a longer governance rule must not
            # hide a compliance one (legal's override reads this list).
            rules = lock.rules_in_force(created[row.pk], now,
                                        content_only=mode == ForgetMode.REDACT and not row.held)
            blocking += [{
                "type": "rule", "rule_id": rule.pk, "kind": rule.kind, "mode": rule.mode,
                "protects": rule.protects, "authority": rule.authority, "duration_days": rule.duration_days,
                "until": (created[row.pk] + timedelta(days=rule.duration_days)).isoformat(),
            } for rule in rules]
        first = blocking[0] if blocking else {}
        reasons[row.pk] = {
            "code": "legal_hold" if row.held else "retention_lock",
            "detail": ("An active legal hold covers this record." if row.held else
                       "A retention rule protects this record's content." if mode == ForgetMode.REDACT else
                       "A retention rule requires this record to be kept."),
            "authority": first.get("authority"),
            "locked_until": None if row.held else row.retained_until.isoformat() if row.retained_until else None,
            "blocking": blocking,
            "permitted_modes": _permitted_modes(row, now),
        }
    return reasons


class _Artifact(NamedTuple):
    """A derived artifact of the records acted on: a plain tuple (a purge of 100,000 records finds 200,000;
    dataclass instances cost ~1 s of it, bench/bench_compaction.py)."""
    pk: int
    kind: str
    holder: str
    sources: list[int]


# Each lineage row's artifact is read by its primary key, row by row: `LATERAL (... OFFSET 0)` keeps the
# planner from making it a join of its choosing. With the batch's 10,000 lineage rows against an artifact table
# of 200,000 (bench/bench_compaction.py), PostgreSQL chose a (parallel) hash join that reads both tables whole
# for every batch: 75-85 ms against 25-35 ms; on a larger table the per-row lookup is the plan it would pick.
# The lineage rows are found per source id from the `unnest`ed array (an index-only scan of lineage_source_idx
# per id): with `source_id = ANY(...)` the planner read the whole lineage table (200,000 rows in the bench) and
# filtered it, ~10 ms of the server's CPU a batch of 5,000 ids against ~4 (the query 24-25 ms -> 16 ms).
_LINEAGE_SQL = (
    f"SELECT l.artifact_id, a.kind, a.holder, l.source_id FROM unnest(%s::bigint[]) AS v(id) "
    f"JOIN {Lineage._meta.db_table} l ON l.source_id = v.id "
    f"CROSS JOIN LATERAL (SELECT kind, holder FROM {DerivedArtifact._meta.db_table} "
    "WHERE id = l.artifact_id OFFSET 0) a"
)


def _artifacts_of(record_ids: list[int]) -> list[_Artifact]:
    """The derived artifacts of these records in id order, each with its sources among them (in id order),
    one query per batch: an artifact goes when any one of its sources goes."""
    found: dict[int, _Artifact] = {}
    connection = connections[Lineage.objects.db]
    for batch in batches(record_ids, BATCH_SIZE):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # The ids as one array literal, as `any_of` binds them (memory/lookups.py).
                cursor.execute(_LINEAGE_SQL, [array_literal(batch)])
                lineage = cursor.fetchall()
        else:
            lineage = (Lineage.objects.filter(source_id__any_of=batch)
                       .values_list("artifact_id", "artifact__kind", "artifact__holder", "source_id"))
        for artifact_id, kind, holder, source_id in lineage:
            artifact = found.get(artifact_id)
            if artifact is None:
                found[artifact_id] = _Artifact(artifact_id, kind, holder, [source_id])
            else:
                artifact.sources.append(source_id)
    artifacts = [found[pk] for pk in sorted(found)]
    for artifact in artifacts:
        if len(artifact.sources) > 1:
            artifact.sources.sort()
    return artifacts


def _artifacts_split(plans: list[_Plan]) -> None:
    """Each target's derived artifacts (of its records acted on), from one lineage query for all targets. An
    artifact with sources in several targets goes with the first of them, with its sources in that target."""
    acting = [plan for plan in plans if plan.acted]
    if len(acting) == 1:  # a single forget, a sweep batch: every artifact found is its, with all its sources
        acting[0].artifacts = _artifacts_of([row.pk for row in acting[0].acted])  # rows are in id order
        return
    target_of = {row.pk: index for index, plan in enumerate(plans) for row in plan.acted}
    for artifact in _artifacts_of(sorted(target_of)):
        first = min(target_of[source] for source in artifact.sources)
        sources = [source for source in artifact.sources if target_of[source] == first]
        plans[first].artifacts.append(artifact if len(sources) == len(artifact.sources)
                                      else artifact._replace(sources=sources))


_TRACKED_KINDS = frozenset({ArtifactKind.ARCHIVE.value, ArtifactKind.FLEET_COPY.value})


def _copies_track(*, tenant, plans: list[_Plan], now) -> None:
    """Archive copies enter the deletion log that a restore replays; copies held by other agents are
    notified and tracked until acknowledged. Sets each target's deferred items for its tombstone. One INSERT
    per table for all the targets."""
    archived, notices = [], []
    deadline = now + FLEET_ACK_WINDOW
    for plan in plans:
        # One pass over the artifacts (a sweep batch has 10,000, of which usually none is tracked).
        tracked = [a for a in plan.artifacts if a.kind in _TRACKED_KINDS]
        archives = [a for a in tracked if a.kind == ArtifactKind.ARCHIVE]
        commitments = {r.pk: r.commitment for r in plan.acted} if archives else {}
        event, mode = plan.event, plan.order.derivatives_mode
        archived += [ArchiveDeletion(tenant=tenant, record_id=source, artifact_id=a.pk, holder=a.holder,
                                     commitment=commitments[source], forget_event=event, logged_at=now)
                     for a in archives for source in a.sources]
        fleet = [a for a in tracked if a.kind == ArtifactKind.FLEET_COPY]
        notices += [FleetCopyNotice(tenant=tenant, artifact_id=a.pk, holder=a.holder, source_ids=a.sources,
                                    mode=mode, forget_event=event, notified_at=now, deadline=deadline)
                    for a in fleet]
        plan.deferred = [{"item": f"fleet_copy:{a.pk}", "action": "acknowledge", "holder": a.holder,
                          "deadline": deadline.isoformat()} for a in fleet]
    ArchiveDeletion.objects.bulk_create(archived, batch_size=BATCH_SIZE)
    FleetCopyNotice.objects.bulk_create(notices, batch_size=BATCH_SIZE)


def _outcomes_by_kind(results: list[dict], *, decided: dict[int, str] | None = None) -> dict:
    """The event's record ids by outcome (refusals with their code). `decided`, when nothing was refused: the
    same from the decisions, without a pass over the results' dicts."""
    outcomes: dict = {"hidden": [], "redacted": [], "deleted": [], "refused": []}
    if decided is not None:
        values = set(decided.values())
        if len(values) == 1:  # the common case: one outcome for every record (a sweep batch: all deleted)
            outcomes[values.pop()] = list(decided)
        else:
            for pk, outcome in decided.items():
                outcomes[outcome].append(pk)
        return outcomes
    for item in results:
        if item["outcome"] == "refused":
            outcomes["refused"].append({"record_id": item["record_id"], "code": item["reason"]["code"]})
        else:
            outcomes[item["outcome"]].append(item["record_id"])
    return outcomes


def _tombstone_issue(*, tenant, plans: list[_Plan], now) -> None:
    """One signed tombstone per target, all issued by one `tombstones_issue_many` (one lock of the log)."""
    from tombstones.services import TombstoneRequest, tombstones_issue_many

    requests = []
    for plan in plans:
        record_ids = [str(r.pk) for r in plan.rows]  # once, for the statement and the salts
        salts = (dict(zip(record_ids, [r.salt for r in plan.rows])) if plan.acted is plan.rows
                 else {str(r.pk): r.salt for r in plan.acted})
        requests.append(TombstoneRequest(
            tombstone_id=plan.event.public_id, tenant_id=tenant.pk, subject_salts=salts,
            statement=_statement(tenant=tenant, plan=plan, now=now, record_ids=record_ids)))
    tombstones_issue_many(requests=requests)


def _statement(*, tenant, plan: _Plan, now, record_ids: list[str]) -> dict:
    """The tombstone's statement; `record_ids`: the rows' ids as strings, in the rows' order."""
    event, rows, decided, refusals = plan.event, plan.rows, plan.decided, plan.refusals
    outcomes = list(decided.values())  # in the rows' order, as `decided` was built
    # A hidden record's content is purged later (compaction when no lock holds it, a deferred erasure when
    # its lock ends). Records due at the same time share one deferred item listing them (`items`, the form
    # `propagation.closes` uses): a bulk forget's 100,000 hidden records make a few items, not 100,000.
    compaction_deadline = (now + COMPACTION_GRACE).isoformat()
    purges: dict[str | None, list[str]] = {}
    for row, outcome in zip(rows, outcomes) if "hidden" in decided.values() else ():
        if outcome == "hidden":
            deadline = (None if row.held else row.retained_until.isoformat() if row.locked(now)
                        else compaction_deadline)
            purges.setdefault(deadline, []).append(f"record:{row.pk}")
    deferred = list(plan.deferred) + [
        {"items": items, "action": "purge_content", "deadline": deadline,
         **({"awaiting": "legal_hold_release"} if deadline is None else {})}
        for deadline, items in sorted(purges.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]
    closes = plan.order.closes
    derivatives_outcome = OUTCOME[plan.order.derivatives_mode]
    return {
        "request": {"actor": event.actor, "authority": plan.order.authority or event.reason or "memory forget",
                    "reason": event.reason, "path": event.path},
        "scope": {"tenant_id": str(tenant.pk), "target": event.target},
        "execution": {
            # The mode's plain string, not the ForgetMode member callers pass: canonical_json's fast path takes
            # exact JSON types only, and one str subclass sent the whole statement (5,000 records and 10,000
            # artifacts a sweep batch) through its Python walk and json.dumps: ~45 ms of CPU a batch.
            "mode": str(event.mode),
            "path": event.path,
            "handle": str(event.pk),
            "records": [{"record_id": record_id, "commitment": r.commitment, "tier": r.tier, "outcome": outcome}
                        if not refusals or r.pk not in refusals else
                        {"record_id": record_id, "commitment": r.commitment, "tier": r.tier, "outcome": outcome,
                         "reason": refusals[r.pk]["code"]} for record_id, r, outcome in zip(record_ids, rows, outcomes)],
        },
        "propagation": {
            "derivatives": [{"artifact_id": str(a.pk), "kind": a.kind, "outcome": derivatives_outcome}
                            for a in plan.artifacts],
            "deferred": deferred,
            **({"closes": closes} if closes else {}),
        },
        "time": now.isoformat(),
    }


def lock_ended(now: datetime) -> Q:
    """The row's lock has ended: no hold, and no retention date in the future (as the guard reads it)."""
    return Q(held=False) & (Q(retained_until__isnull=True) | Q(retained_until__lte=now))


def _execute(*, plans: list[_Plan], now) -> None:
    """The destructive statements, all guarded and counted: on PostgreSQL one per table and mode (per batch of
    BATCH_SIZE rows) for all the targets, each row stamped with its own target's event; elsewhere (SQLite)
    the statements of each target in turn. Derivatives go first, while their lineage still names them."""
    if connections[Record.objects.db].vendor != "postgresql":
        for plan in plans:
            _execute_one(mode=plan.order.mode, acted=plan.acted, artifact_ids=[a.pk for a in plan.artifacts],
                         derivatives_mode=plan.order.derivatives_mode, event=plan.event, now=now)
        return
    artifacts: dict[str, list[tuple[int, int]]] = {}
    records: dict[str, list[tuple[int, int]]] = {}
    for plan in plans:
        order, event_id = plan.order, plan.event.pk
        artifacts.setdefault(order.derivatives_mode, []).extend(zip([a.pk for a in plan.artifacts], repeat(event_id)))
        records.setdefault(order.mode, []).extend(zip(
            [r.pk for r in plan.acted] if order.mode != ForgetMode.SOFT else
            [r.pk for r in plan.acted if not (r.forgotten or r.redacted)], repeat(event_id)))
    with connections[Record.objects.db].cursor() as cursor:
        for mode, pairs in artifacts.items():
            for batch in batches(pairs, BATCH_SIZE):
                cursor.execute(_ARTIFACTS_SQL[mode], _pairs_params(mode, batch, now, artifacts=True))
        for mode, pairs in records.items():
            sql, lock_params = _records_sql(mode, now)
            for batch in batches(pairs, BATCH_SIZE):
                cursor.execute(sql, [*_pairs_params(mode, batch, now), *lock_params])
                if cursor.rowcount != len(batch):
                    raise _RowsChanged()


_RECORDS = Record._meta.db_table
_ARTIFACTS = DerivedArtifact._meta.db_table
_PAIRS = "unnest(%s::bigint[], %s::bigint[]) AS v(id, event_id)"
# PostgreSQL's statements per mode, each row's forget event from its own target (`v.event_id`). Parameters:
# the ids, their events, then `now` as many times as the statement names it, then the lock condition's.
_ARTIFACTS_SQL = {
    ForgetMode.SOFT: f'UPDATE "{_ARTIFACTS}" SET forgotten_at = %s, forget_event_id = v.event_id FROM {_PAIRS} '
                     f'WHERE "{_ARTIFACTS}".id = v.id AND "{_ARTIFACTS}".forgotten_at IS NULL',
    ForgetMode.REDACT: f'UPDATE "{_ARTIFACTS}" SET content = \'\', vector = NULL, redacted_at = %s, '
                       f'forgotten_at = COALESCE("{_ARTIFACTS}".forgotten_at, %s), forget_event_id = v.event_id '
                       f'FROM {_PAIRS} WHERE "{_ARTIFACTS}".id = v.id',
    # PostgreSQL's foreign key cascades to the lineage (migration memory 0003). A deleted artifact keeps no
    # event, so only its id is bound, as a set to join (`IN (SELECT unnest(...))`), looked up by primary key one
    # by one: with `id = ANY(...)` the planner scanned the whole artifact table for 5,000 ids when it is as small
    # as the bench's 200,000 rows (bench/bench_compaction.py: median 45.6 ms a statement against 35.6 ms).
    ForgetMode.HARD: f'DELETE FROM "{_ARTIFACTS}" WHERE id IN (SELECT unnest(%s::bigint[]))',
}
_NOW_PARAMS = {ForgetMode.SOFT: 1, ForgetMode.REDACT: 2, ForgetMode.HARD: 0}


def _pairs_params(mode: str, pairs, now, *, artifacts: bool = False) -> list:
    ids, events = zip(*pairs)
    if mode == ForgetMode.HARD and artifacts:
        return [array_literal(ids)]
    # The UPDATEs name `now` before the FROM clause (the hard delete's INSERT names it after the WHERE).
    return [*[now] * _NOW_PARAMS[mode], array_literal(ids), array_literal(events)]


def _lock_where(condition: Q) -> tuple[str, list]:
    """The lock condition as SQL on the records table (the same `Q` the ORM's statements use elsewhere)."""
    query = Record.objects.filter(condition).query
    compiler = query.get_compiler(connection=connections[Record.objects.db])
    sql, params = compiler.compile(query.where)
    return sql, list(params)


def _records_sql(mode: str, now) -> tuple[str, list]:
    """The records' statement for `mode` and the lock condition's parameters that follow the pairs'. Each
    repeats the lock condition in its WHERE (the caller checks the row count): a hold placed since the rows
    were read makes it come up short."""
    if mode == ForgetMode.SOFT:  # permitted under any lock: the row and its content stay
        return (f'UPDATE "{_RECORDS}" SET forgotten_at = %s, erasure_pending = true, forget_event_id = v.event_id '
                f'FROM {_PAIRS} WHERE "{_RECORDS}".id = v.id'), []
    if mode == ForgetMode.REDACT:
        where, params = _lock_where(Q(held=False) & (lock_ended(now) | Q(lock_protects_content=False)))
        return (f'UPDATE "{_RECORDS}" SET content = \'\', redacted_at = %s, '
                f'forgotten_at = COALESCE("{_RECORDS}".forgotten_at, %s), erasure_pending = true, '
                f'forget_event_id = v.event_id FROM {_PAIRS} WHERE "{_RECORDS}".id = v.id AND {where}'), params
    # The DELETE's RETURNING feeds the INSERT of the DeletedRecord rows (the 410 answers), so they are
    # exactly the rows deleted and the row count is the DELETE's; tags and lineage go by ON DELETE CASCADE
    # (migration memory 0003).
    where, params = _lock_where(lock_ended(now))
    columns = ", ".join(_DELETED_COLUMNS)
    return (f'WITH gone AS (DELETE FROM "{_RECORDS}" USING {_PAIRS} WHERE "{_RECORDS}".id = v.id AND {where} '
            f'RETURNING "{_RECORDS}".id, "{_RECORDS}".tenant_id, "{_RECORDS}".scope_id, v.event_id) '
            f'INSERT INTO "{DeletedRecord._meta.db_table}" ({columns}) '
            f'SELECT id, tenant_id, scope_id, event_id, %s FROM gone'), [*params, now]


def _execute_one(*, mode, acted, artifact_ids, derivatives_mode, event, now) -> None:
    """One target's destructive statements through the ORM (SQLite): one per batch per table, each guarded
    and counted. Derivatives go first, while their lineage still names them."""
    _artifacts_forget(artifact_ids, derivatives_mode, event, now)
    ids = [r.pk for r in acted if not (mode == ForgetMode.SOFT and (r.forgotten or r.redacted))]
    for batch in batches(ids, BATCH_SIZE):
        records = Record.objects.filter(pk__any_of=batch)
        if mode == ForgetMode.SOFT:
            changed = records.update(forgotten_at=now, erasure_pending=True, forget_event=event)
        elif mode == ForgetMode.REDACT:
            changed = records.filter(Q(held=False) & (lock_ended(now) | Q(lock_protects_content=False))).update(
                content="", redacted_at=now, forgotten_at=Coalesce("forgotten_at", Value(now)),
                erasure_pending=True, forget_event=event)
        else:
            changed = _records_delete(records.filter(lock_ended(now)), event=event, now=now)
        if changed != len(batch):
            raise _RowsChanged()


# What a hard delete writes for each record it deletes: the DeletedRecord row (the 410 answers).
_DELETED_COLUMNS = ("record_id", "tenant_id", "scope_id", "forget_event_id", "deleted_at")


def _records_delete(records, *, event, now) -> int:
    """DELETE the rows of `records` (whose WHERE clause carries the lock condition) with their tags and
    lineage, and write a DeletedRecord row for each row deleted; returns how many were deleted. SQLite's (on
    PostgreSQL, `_records_sql`'s one statement for all the targets).

    No collector (PERFORMANCE.md: ~3x faster). SQLite's foreign keys do not cascade: INSERT ... SELECT of the
    DeletedRecord rows, the tags and lineage, then the guarded DELETE, whose row count is returned (the caller
    rolls everything back if it is short).
    """
    connection = connections[records.db]
    columns = ", ".join(connection.ops.quote_name(c) for c in _DELETED_COLUMNS)
    select_sql, select_params = records.values_list("pk", "tenant_id", "scope_id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {connection.ops.quote_name(DeletedRecord._meta.db_table)} ({columns}) "
                       f"SELECT acted.*, %s, %s FROM ({select_sql}) AS acted",
                       [event.pk, connection.ops.adapt_datetimefield_value(now), *select_params])
    ids = records.values("pk")
    RecordTag.objects.filter(record_id__in=ids)._raw_delete(RecordTag.objects.db)
    Lineage.objects.filter(source_id__in=ids)._raw_delete(Lineage.objects.db)
    return records._raw_delete(records.db)


def _artifacts_forget(artifact_ids: list[int], mode: str, event, now) -> None:
    """One target's artifacts through the ORM (SQLite; on PostgreSQL, `_ARTIFACTS_SQL` for all the targets)."""
    for batch in batches(artifact_ids, BATCH_SIZE):
        artifacts = DerivedArtifact.objects.filter(pk__any_of=batch)
        if mode == ForgetMode.SOFT:
            artifacts.filter(forgotten_at__isnull=True).update(forgotten_at=now, forget_event=event)
        elif mode == ForgetMode.REDACT:
            artifacts.update(content="", vector=None, redacted_at=now, forgotten_at=Coalesce("forgotten_at", Value(now)),
                             forget_event=event)
        else:  # SQLite's foreign keys do not cascade
            Lineage.objects.filter(artifact_id__any_of=batch)._raw_delete(Lineage.objects.db)
            artifacts._raw_delete(DerivedArtifact.objects.db)


def forget_queryset_delete(queryset) -> tuple[int, dict[str, int]]:
    """`Record.objects....delete()` and `record.delete()`: a hard forget through the guard, all or nothing.

    Refused as a whole (409 `retention_lock` / `legal_hold`) when any record is locked: a bulk delete
    that silently kept some rows would lie to its caller.
    """
    by_tenant: dict[int, list[int]] = {}
    for pk, tenant_id in queryset.order_by().values_list("pk", "tenant_id"):
        by_tenant.setdefault(tenant_id, []).append(pk)
    deleted = 0
    with transaction.atomic():
        for tenant_id, ids in sorted(by_tenant.items()):
            tenant = Tenant.objects.get(pk=tenant_id)
            for batch in batches(ids, MAX_TARGET_ITEMS):
                result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(batch)),
                                        mode=ForgetMode.HARD, actor="system:queryset.delete", path="queryset_delete",
                                        reason="QuerySet.delete()")
                refused = [r for r in result.results if r["outcome"] == "refused"]
                if refused:
                    first = refused[0]["reason"]
                    raise errors.conflict(first["code"], "Some records are locked; nothing was deleted.",
                                          refused=refused[:100])
                deleted += len(result.results)
    return deleted, {Record._meta.label: deleted}
