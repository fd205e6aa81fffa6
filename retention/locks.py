"""The lock each record carries, computed from the retention table and the holds.

retained_until = created_at + the longest active rule for the record's content class (a pact TTL can
therefore never shorten a regulatory retention: the maximum wins); held = some active hold covers it;
lock_protects_content = some active rule of the class protects content (write-once). When a class
mixes an existence rule and a shorter content rule, content stays protected for the whole lock: the
safe side, since the record carries one date.

On PostgreSQL the database computes and changes locks (memory migration 0013): a BEFORE INSERT trigger
gives each new record its lock, and SECURITY DEFINER functions recompute them from the rules and holds;
only those may shorten a lock, and the application role cannot write the lock columns. Every change of a
tenant's rules or holds first takes the tenant's retention-table lock (`retention_table_lock`), which
record writes take in shared mode: a record written while a rule or hold is placed gets it (no race).
On SQLite (the embedded default: one role, writes serialized by the database) the same computation runs
here, in the ORM.

All updates are set-based: one UPDATE per content class or per hold, never one per record.
"""
from __future__ import annotations

from datetime import timedelta

from django.db import connection, transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, Value
from django.utils import timezone

from memory.models import Record, ScopeClosure
from retention.models import (
    ContentClass,
    HoldRecord,
    LegalHold,
    LockRecomputeGrant,
    RetentionRule,
    RuleProtects,
)


# pg_advisory_xact_lock(int4, int4): this constant names the retention table's lock (memory migration 0013).
TABLE_LOCK_CLASS = 72051


class ClassLock:
    """The longest active rule of a content class and whether any active rule protects content."""

    def __init__(self, rules: list[RetentionRule]):
        self.rules = rules
        self.longest = max(rules, key=lambda r: (r.duration_days, r.mode == "compliance"), default=None)
        self.content_rules = [r for r in rules if r.protects == RuleProtects.CONTENT]

    def rules_in_force(self, created_at, now, *, content_only: bool = False) -> list[RetentionRule]:
        """Every active rule that still keeps a record created at `created_at`, longest first (compliance
        before governance on a tie): each one keeps it, whichever is longest."""
        rules = self.content_rules if content_only else self.rules
        kept = [r for r in rules if created_at + timedelta(days=r.duration_days) > now]
        return sorted(kept, key=lambda r: (-r.duration_days, r.mode != "compliance", r.pk))

    @property
    def duration(self) -> timedelta | None:
        return timedelta(days=self.longest.duration_days) if self.longest else None

    @property
    def protects_content(self) -> bool:
        return bool(self.content_rules)


def class_locks(content_class_ids) -> dict[int, ClassLock]:
    rules: dict[int, list[RetentionRule]] = {cid: [] for cid in content_class_ids}
    for rule in RetentionRule.objects.filter(content_class_id__in=content_class_ids, retired_at__isnull=True):
        rules[rule.content_class_id].append(rule)
    return {cid: ClassLock(rs) for cid, rs in rules.items()}


def active_holds_covering(record_ref) -> "Exists":
    """EXISTS(an active hold covers the record named by `record_ref`, an OuterRef to a Record)."""
    scope_hit = ScopeClosure.objects.filter(ancestor=OuterRef("scope_id"), descendant=OuterRef(OuterRef("scope_id")))
    listed = HoldRecord.objects.filter(hold=OuterRef("pk"), record_id=OuterRef(OuterRef("pk")))
    return Exists(
        LegalHold.objects.filter(tenant=record_ref("tenant_id"), released_at__isnull=True)
        .filter(
            Q(subject_id=record_ref("subject_id"))
            | Q(content_class_id=record_ref("content_class_id"))
            | Q(Exists(scope_hit))
            | Q(Exists(listed))
        )
    )


def hold_covered_records(hold: LegalHold):
    """The records a hold covers, active or not (used to recompute and to preview a hold)."""
    records = Record.objects.filter(tenant_id=hold.tenant_id)
    if hold.subject_id:
        return records.filter(subject_id=hold.subject_id)
    if hold.content_class_id:
        return records.filter(content_class_id=hold.content_class_id)
    if hold.scope_id:
        return records.filter(scope_id__in=ScopeClosure.objects.filter(ancestor_id=hold.scope_id).values("descendant_id"))
    return records.filter(pk__in=HoldRecord.objects.filter(hold=hold).values("record_id"))


class lock_grant:
    """Inside this block the guard trigger lets the lock be shortened (see LockRecomputeGrant)."""

    def __enter__(self):
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.grant = LockRecomputeGrant.objects.create()
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                LockRecomputeGrant.objects.filter(pk=self.grant.pk).delete()
        finally:
            return self._atomic.__exit__(exc_type, exc, tb)


def retention_table_lock(tenant_id: int, *, shared: bool = False) -> None:
    """Take the tenant's retention-table lock until the transaction ends (PostgreSQL; SQLite serializes writes
    itself). Exclusive for a change of rules or holds, taken before any other lock of that transaction (so
    that no writer holding a row lock waits for it while it waits for the writer); shared for a record write."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, (%s %% 2147483647)::integer)", [TABLE_LOCK_CLASS, tenant_id])


def _pg_call(function: str, argument) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s)", [argument])
        return cursor.fetchone()[0]


def locks_recompute_for_classes(content_class_ids) -> int:
    """Recompute retained_until and lock_protects_content for every record of these classes."""
    if connection.vendor == "postgresql":
        return _pg_call("retention_locks_recompute_classes", sorted(content_class_ids))
    changed = 0
    locks = class_locks(list(content_class_ids))
    with lock_grant():
        for cid, lock in locks.items():
            retained_until = Value(None) if lock.duration is None else _created_plus(lock.duration)
            changed += Record.objects.filter(content_class_id=cid).update(
                retained_until=retained_until, lock_protects_content=lock.protects_content
            )
    return changed


def locks_recompute_for_hold(hold: LegalHold) -> int:
    """Recompute `held` for every record the hold covers (placing sets it, releasing may clear it)."""
    if connection.vendor == "postgresql":
        return _pg_call("retention_locks_recompute_hold", hold.pk)
    with lock_grant():
        return hold_covered_records(hold).update(held=active_holds_covering(OuterRef))


def lock_override(*, record_id: int) -> None:
    """End the governance lock of one record (legal's override of a retention conflict), in the caller's
    transaction. The database refuses it (IntegrityError, `legal_hold:` / `retention_lock:`) while an active
    hold or any compliance rule still keeps the record, whichever lock is longest."""
    if connection.vendor == "postgresql":
        _pg_call("retention_lock_override", record_id)
        return
    from django.db import IntegrityError

    record = Record.objects.select_for_update().get(pk=record_id)
    if record.held:
        raise IntegrityError(f"legal_hold: record {record_id} is under legal hold; override refused")
    lock = class_locks([record.content_class_id])[record.content_class_id]
    keeping = [r for r in lock.rules_in_force(record.created_at, timezone.now()) if r.mode == "compliance"]
    if keeping:
        raise IntegrityError(f"retention_lock: record {record_id} is kept by compliance "
                             + ", ".join(f"rule {r.pk} ({r.authority})" for r in keeping) + "; override refused")
    with lock_grant():
        Record.objects.filter(pk=record_id).update(retained_until=None, lock_protects_content=False)


def lock_for_new_record(*, tenant_id: int, content_class: ContentClass, created_at, subject_id, scope_id) -> dict:
    """The lock columns Python gives a record about to be written, in the writing transaction (which takes
    `retention_table_lock(tenant_id, shared=True)` first). On PostgreSQL none: the database computes them at
    INSERT, and Django reads them back. On SQLite: one query for the rules, one for holds."""
    if connection.vendor == "postgresql":
        return {}
    lock = class_locks([content_class.pk])[content_class.pk]
    ancestors = ScopeClosure.objects.filter(descendant_id=scope_id).values("ancestor_id")
    covers = Q(content_class=content_class) | Q(scope_id__in=ancestors)
    if subject_id:
        covers |= Q(subject_id=subject_id)
    # A hold on listed records cannot name a record that does not exist yet.
    held = LegalHold.objects.filter(tenant_id=tenant_id, released_at__isnull=True).filter(covers).exists()
    return {
        "retained_until": created_at + lock.duration if lock.duration else None,
        "lock_protects_content": lock.protects_content,
        "held": held,
    }


def _created_plus(duration: timedelta):
    return ExpressionWrapper(F("created_at") + Value(duration), output_field=DateTimeField())


__all__ = [
    "ClassLock",
    "active_holds_covering",
    "class_locks",
    "hold_covered_records",
    "lock_for_new_record",
    "lock_override",
    "locks_recompute_for_classes",
    "locks_recompute_for_hold",
    "retention_table_lock",
]
