"""The lock each record carries, computed from the retention table and the holds.

retained_until = created_at + the longest active rule for the record's content class (a pact TTL can
therefore never shorten a regulatory retention: the maximum wins); held = some active hold covers it;
lock_protects_content = some active rule of the class protects content (write-once). When a class
mixes an existence rule and a shorter content rule, content stays protected for the whole lock: the
safe side, since the record carries one date.

All updates here are set-based: one UPDATE per content class or per hold, never one per record.
"""
from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, Value

from memory.models import Record, ScopeClosure
from retention.models import (
    ContentClass,
    HoldRecord,
    LegalHold,
    LockRecomputeGrant,
    RetentionRule,
    RuleProtects,
)


class ClassLock:
    """The longest active rule of a content class and whether any active rule protects content."""

    def __init__(self, rules: list[RetentionRule]):
        self.rules = rules
        self.longest = max(rules, key=lambda r: (r.duration_days, r.mode == "compliance"), default=None)
        self.content_rules = [r for r in rules if r.protects == RuleProtects.CONTENT]

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


def locks_recompute_for_classes(content_class_ids) -> int:
    """Recompute retained_until and lock_protects_content for every record of these classes."""
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
    with lock_grant():
        return hold_covered_records(hold).update(held=active_holds_covering(OuterRef))


def lock_for_new_record(*, tenant_id: int, content_class: ContentClass, created_at, subject_id, scope_id) -> dict:
    """The lock columns of a record about to be written (one query for the rules, one for holds)."""
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
    "locks_recompute_for_classes",
    "locks_recompute_for_hold",
]
