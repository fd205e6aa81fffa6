"""The one guarded destructive path. Every forget of records, whoever asks (the API, the admin,
management commands, `QuerySet.delete()`, the sweeps), is decided and performed by `records_forget`.

A forget reads the target rows, decides per record (`hidden` / `redacted` / `deleted` / `refused` with
a machine-readable reason), writes the forget event and the signed tombstone, and only then runs the
destructive statements, set-based, in batches, in the same transaction. Each destructive statement
repeats the lock condition in its WHERE clause and its row count is checked: if a lock changed between
the read and the write (a hold placed meanwhile), the whole forget rolls back and is decided again.
The database trigger (migration memory 0003) is the last line behind all of this.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q, Value
from django.db.models.functions import Coalesce
from django.db.models.sql import DeleteQuery
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
from memory.lookups import batches
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
    """Decide and perform a forget of the target's records; the only function that destroys records.

    `derivatives_mode` is what happens to the artifacts derived from the records acted on (by default
    the forget's own mode): an erasure workflow hides a locked record but erases its copies, which no
    mandate covers.
    `closes` names the deferred items of earlier tombstones that this forget completes (a sweep purging
    hidden records, a deferred erasure): `[{"tombstone_id": str, "handle": str, "items": ["record:12"]}]`,
    signed into the statement as `propagation.closes`.
    `locked`: the target's rows as the caller read them under lock in this transaction (`LockedRows`), so
    that they are not read again; used for the first attempt only.
    """
    derivatives_mode = derivatives_mode or mode
    if mode not in ForgetMode.values or derivatives_mode not in ForgetMode.values:
        raise errors.invalid("invalid_mode", f"mode must be one of {ForgetMode.values}.")
    if not isinstance(reason, str) or len(reason) > 2000:
        raise errors.invalid("invalid_reason", "reason must be a string of at most 2000 characters.")
    if locked is not None and (locked.tenant_id != tenant.pk or target.scope is not None or target.tag is not None
                               or target.subjects or tuple(r.pk for r in locked.rows) != target.record_ids):
        # A programming error, not a request's: the rows would not be the ones the target names.
        raise ValueError("locked rows must be the listed records of the target, of this tenant, in id order")
    for attempt in range(MAX_ATTEMPTS):
        try:
            with transaction.atomic():
                return _forget_once(tenant=tenant, target=target, mode=mode, actor=actor, reason=reason,
                                    authority=authority, path=path, derivatives_mode=derivatives_mode,
                                    closes=closes, locked=locked if attempt == 0 else None)
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


def _fetch(query) -> list[tuple]:
    """The rows of a `values_list` query of plain columns (numbers, text, booleans, times; no JSON). On
    PostgreSQL they come straight off the cursor: Django's per-row iteration cost more than the query itself
    in bulk forgets. SQLite answers booleans as 0/1 and times as text: Django converts them."""
    connection = connections[query.db]
    if connection.vendor != "postgresql":
        return list(query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def guard_fetch(query) -> list[tuple]:
    """The rows of a `guard_values` query, in one query."""
    return _fetch(query)


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
        rows += _rows(Record.objects.filter(tenant=tenant, pk__in=batch))
    return _refusal_reasons(tenant, [r for r in rows if _decide(r, mode, now) == "refused"], mode, now)


def _forget_once(*, tenant, target, mode, actor, reason, authority, path, derivatives_mode,
                 closes=None, locked: LockedRows | None = None) -> ForgetResult:
    now = timezone.now()
    # Locked rows exist (they were read under lock in this transaction): no existence check, no second read.
    rows = list(locked.rows) if locked is not None else _rows(target.records(tenant))
    decided = {row.pk: _decide(row, mode, now) for row in rows}
    refusals = _refusal_reasons(tenant, [r for r in rows if decided[r.pk] == "refused"], mode, now)
    acted = [r for r in rows if decided[r.pk] != "refused"]
    artifacts = _artifacts_of([r.pk for r in acted])

    results = [{"record_id": r.pk, "outcome": decided[r.pk], **({"reason": refusals[r.pk]} if r.pk in refusals else {})}
               for r in rows]
    status = (ForgetStatus.REFUSED if rows and not acted
              else ForgetStatus.PARTIAL if refusals else ForgetStatus.FORGOTTEN)
    tombstone_id = uuid.uuid4()
    event = ForgetEvent.objects.create(
        tenant=tenant, public_id=tombstone_id, actor=actor, path=path, target=target.describe(tenant), mode=mode,
        reason=reason, status=status, created_at=now,
        outcomes=_outcomes_by_kind(results),
        artifacts={OUTCOME[derivatives_mode]: [a.pk for a in artifacts]} if artifacts else {},
    )
    issued = None
    if acted:
        deferred = _copies_track(tenant=tenant, artifacts=artifacts, rows={r.pk: r for r in acted},
                                 mode=derivatives_mode, event=event, now=now)
        issued = _tombstone_issue(tenant=tenant, event=event, rows=rows, decided=decided, refusals=refusals,
                                  artifacts=artifacts, derivatives_mode=derivatives_mode, deferred=deferred,
                                  authority=authority, now=now, closes=closes)
    _execute(mode=mode, acted=acted, artifact_ids=[a.pk for a in artifacts],
             derivatives_mode=derivatives_mode, event=event, now=now)
    return ForgetResult(event=event, status=status, results=results, erasure_pending=bool(acted),
                        tombstone_id=str(tombstone_id) if issued else None, artifacts=event.artifacts)


def _decide(row: _Row, mode: str, now: datetime) -> str:
    if mode == ForgetMode.SOFT:
        return "redacted" if row.redacted else "hidden"
    if mode == ForgetMode.REDACT:
        if row.held or (row.locked(now) and row.protects_content):
            return "refused"
        return "redacted"
    return "refused" if row.locked(now) else "deleted"


def _permitted_modes(row: _Row, now: datetime) -> list[str]:
    modes = [ForgetMode.SOFT.value]
    if not row.held and not (row.locked(now) and row.protects_content):
        modes.append(ForgetMode.REDACT.value)
    if not row.locked(now):
        modes.append(ForgetMode.HARD.value)
    return modes


def _refusal_reasons(tenant: Tenant, refused: list[_Row], mode: str, now: datetime) -> dict[int, dict]:
    """Per refused record: the code, every blocking rule or hold with its authority, the lock's end, and
    the modes still permitted. Queries: one for the rules, one per active hold (holds are few)."""
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
    reasons = {}
    for row in refused:
        lock = locks[row.content_class_id]
        blocking = list(holds_by_record.get(row.pk, []))
        if row.retained_until is not None and row.retained_until > now:
            rules = lock.content_rules if (mode == ForgetMode.REDACT and not row.held) else \
                ([lock.longest] if lock.longest else [])
            blocking += [{
                "type": "rule", "rule_id": rule.pk, "kind": rule.kind, "mode": rule.mode,
                "protects": rule.protects, "authority": rule.authority, "duration_days": rule.duration_days,
                "until": row.retained_until.isoformat(),
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


def _artifacts_of(record_ids: list[int]) -> list[_Artifact]:
    """The derived artifacts of these records in id order, each with its sources among them (in id order),
    one query per batch: an artifact goes when any one of its sources goes."""
    found: dict[int, _Artifact] = {}
    for batch in batches(record_ids, BATCH_SIZE):
        query = (Lineage.objects.filter(source_id__any_of=batch)
                 .values_list("artifact_id", "artifact__kind", "artifact__holder", "source_id"))
        for artifact_id, kind, holder, source_id in _fetch(query):
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


def _copies_track(*, tenant, artifacts: list[_Artifact], rows: dict[int, "_Row"], mode: str, event, now) -> list[dict]:
    """Archive copies enter the deletion log that a restore replays; copies held by other agents are
    notified and tracked until acknowledged. Returns the deferred items for the tombstone."""
    ArchiveDeletion.objects.bulk_create([
        ArchiveDeletion(tenant=tenant, record_id=source, artifact_id=a.pk, holder=a.holder,
                        commitment=rows[source].commitment, forget_event=event, logged_at=now)
        for a in artifacts if a.kind == ArtifactKind.ARCHIVE for source in a.sources
    ], batch_size=BATCH_SIZE)
    deadline = now + FLEET_ACK_WINDOW
    fleet = [a for a in artifacts if a.kind == ArtifactKind.FLEET_COPY]
    FleetCopyNotice.objects.bulk_create([
        FleetCopyNotice(tenant=tenant, artifact_id=a.pk, holder=a.holder, source_ids=a.sources, mode=mode,
                        forget_event=event, notified_at=now, deadline=deadline) for a in fleet
    ], batch_size=BATCH_SIZE)
    return [{"item": f"fleet_copy:{a.pk}", "action": "acknowledge", "holder": a.holder,
             "deadline": deadline.isoformat()} for a in fleet]


def _outcomes_by_kind(results: list[dict]) -> dict:
    outcomes: dict = {"hidden": [], "redacted": [], "deleted": [], "refused": []}
    for item in results:
        if item["outcome"] == "refused":
            outcomes["refused"].append({"record_id": item["record_id"], "code": item["reason"]["code"]})
        else:
            outcomes[item["outcome"]].append(item["record_id"])
    return outcomes


def _tombstone_issue(*, tenant, event, rows, decided, refusals, artifacts, derivatives_mode, deferred, authority,
                     now, closes=None):
    from tombstones.services import tombstone_issue

    # A hidden record's content is purged later (compaction when no lock holds it, a deferred erasure when
    # its lock ends). Records due at the same time share one deferred item listing them (`items`, the form
    # `propagation.closes` uses): a bulk forget's 100,000 hidden records make a few items, not 100,000.
    compaction_deadline = (now + COMPACTION_GRACE).isoformat()
    purges: dict[str | None, list[str]] = {}
    for row in rows:
        if decided[row.pk] == "hidden":
            deadline = (None if row.held else row.retained_until.isoformat() if row.locked(now)
                        else compaction_deadline)
            purges.setdefault(deadline, []).append(f"record:{row.pk}")
    deferred = list(deferred) + [
        {"items": items, "action": "purge_content", "deadline": deadline,
         **({"awaiting": "legal_hold_release"} if deadline is None else {})}
        for deadline, items in sorted(purges.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]
    statement = {
        "request": {"actor": event.actor, "authority": authority or event.reason or "memory forget",
                    "reason": event.reason, "path": event.path},
        "scope": {"tenant_id": str(tenant.pk), "target": event.target},
        "execution": {
            "mode": event.mode,
            "path": event.path,
            "handle": str(event.pk),
            "records": [{"record_id": str(r.pk), "commitment": r.commitment, "tier": r.tier, "outcome": decided[r.pk]}
                        if r.pk not in refusals else
                        {"record_id": str(r.pk), "commitment": r.commitment, "tier": r.tier, "outcome": decided[r.pk],
                         "reason": refusals[r.pk]["code"]} for r in rows],
        },
        "propagation": {
            "derivatives": [{"artifact_id": str(a.pk), "kind": a.kind, "outcome": OUTCOME[derivatives_mode]}
                            for a in artifacts],
            "deferred": deferred,
            **({"closes": closes} if closes else {}),
        },
        "time": now.isoformat(),
    }
    salts = {str(r.pk): r.salt for r in rows if decided[r.pk] != "refused"}
    return tombstone_issue(tombstone_id=event.public_id, tenant_id=tenant.pk, statement=statement,
                           subject_salts=salts)


def lock_ended(now: datetime) -> Q:
    """The row's lock has ended: no hold, and no retention date in the future (as the guard reads it)."""
    return Q(held=False) & (Q(retained_until__isnull=True) | Q(retained_until__lte=now))


def _execute(*, mode, acted, artifact_ids, derivatives_mode, event, now) -> None:
    """The destructive statements: one per batch per table, each guarded and counted. Derivatives go
    first, while their lineage still names them."""
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
    lineage, and write a DeletedRecord row for each row deleted; returns how many were deleted.

    No collector (PERFORMANCE.md: ~3x faster). On PostgreSQL it is one statement: the DELETE's RETURNING
    feeds the INSERT of the DeletedRecord rows, so they are exactly the rows deleted and the row count is
    the DELETE's; tags and lineage go by ON DELETE CASCADE (migration memory 0003). Elsewhere (SQLite,
    whose foreign keys do not cascade): INSERT ... SELECT of the DeletedRecord rows, the tags and lineage,
    then the guarded DELETE, whose row count is returned (the caller rolls everything back if it is short).
    """
    connection = connections[records.db]
    query = records.query.chain(klass=DeleteQuery)
    delete_sql, delete_params = query.get_compiler(connection=connection).as_sql()
    table = connection.ops.quote_name(Record._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _DELETED_COLUMNS)
    if connection.vendor == "postgresql":
        sql = (f"WITH gone AS ({delete_sql} RETURNING {table}.id, {table}.tenant_id, {table}.scope_id) "
               f"INSERT INTO {connection.ops.quote_name(DeletedRecord._meta.db_table)} ({columns}) "
               "SELECT id, tenant_id, scope_id, %s, %s FROM gone")
        with connection.cursor() as cursor:
            cursor.execute(sql, [*delete_params, event.pk, now])
            return cursor.rowcount
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
    cascades = connections[DerivedArtifact.objects.db].vendor == "postgresql"
    for batch in batches(artifact_ids, BATCH_SIZE):
        artifacts = DerivedArtifact.objects.filter(pk__any_of=batch)
        if mode == ForgetMode.SOFT:
            artifacts.filter(forgotten_at__isnull=True).update(forgotten_at=now, forget_event=event)
        elif mode == ForgetMode.REDACT:
            artifacts.update(content="", vector=None, redacted_at=now, forgotten_at=Coalesce("forgotten_at", Value(now)),
                             forget_event=event)
        else:
            if not cascades:  # PostgreSQL's foreign key cascades to the lineage (migration memory 0003)
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
