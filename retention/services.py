"""Legal's levers: content classes, the retention table (versioned) and legal holds.

Every change here takes the tenant's retention-table lock first (`retention.locks.retention_table_lock`: a
record written meanwhile waits, or is waited for, so it gets the new lock) and recomputes the locks it
affects on the records, set-based, in the same transaction.
"""
from __future__ import annotations

import hashlib
from typing import Iterable

import rfc8785
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from memory.models import Record, Scope, Subject, Tenant
from retention import errors
from retention.locks import (
    hold_covered_records,
    locks_recompute_for_classes,
    locks_recompute_for_hold,
    retention_table_lock,
)
from retention.models import (
    ContentClass,
    HoldRecord,
    LegalHold,
    RetentionRule,
    RetentionTableVersion,
    RuleKind,
    RuleMode,
    RuleProtects,
)

# A retention longer than this is a typo, not a mandate (the longest real ones are "life + 70 years").
MAX_DURATION_DAYS = 200 * 366


def content_class_create(*, tenant: Tenant, name: str, description: str = "", actor: str) -> ContentClass:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise errors.invalid("invalid_name", "A content class needs a name of 1 to 100 characters.")
    try:
        with transaction.atomic():
            return ContentClass.objects.create(tenant=tenant, name=name, description=description)
    except IntegrityError:
        raise errors.conflict("duplicate_content_class", f"The content class {name!r} already exists.") from None


def _validate_rule_fields(*, kind: str, duration_days: int, authority: str, mode: str, protects: str) -> None:
    if kind not in RuleKind.values:
        raise errors.invalid("invalid_kind", f"kind must be one of {RuleKind.values}.")
    if mode not in RuleMode.values:
        raise errors.invalid("invalid_mode", f"mode must be one of {RuleMode.values}.")
    if protects not in RuleProtects.values:
        raise errors.invalid("invalid_protects", f"protects must be one of {RuleProtects.values}.")
    if isinstance(duration_days, bool) or not isinstance(duration_days, int) or not 0 < duration_days <= MAX_DURATION_DAYS:
        raise errors.invalid("invalid_duration", f"duration_days must be an integer from 1 to {MAX_DURATION_DAYS}.")
    if not (authority or "").strip():
        raise errors.invalid("authority_required", "A rule must name its authority (a law, a pact clause, a policy).")


def rule_create(
    *,
    tenant: Tenant,
    content_class: ContentClass,
    kind: str,
    duration_days: int,
    authority: str,
    mode: str = RuleMode.GOVERNANCE,
    protects: str = RuleProtects.EXISTENCE,
    actor: str,
) -> RetentionRule:
    _validate_rule_fields(kind=kind, duration_days=duration_days, authority=authority, mode=mode, protects=protects)
    if content_class.tenant_id != tenant.pk:
        raise errors.not_found("No such content class.")
    with transaction.atomic():
        retention_table_lock(tenant.pk)
        rule = RetentionRule.objects.create(
            tenant=tenant, content_class=content_class, kind=kind, duration_days=duration_days,
            authority=authority.strip(), mode=mode, protects=protects,
        )
        _version_new(tenant=tenant, actor=actor,
                     change=f"added rule {rule.pk}: {content_class.name} {kind} {duration_days} days ({rule.authority}, {mode})")
        locks_recompute_for_classes([content_class.pk])
    return rule


def rule_change_duration(*, rule: RetentionRule, duration_days: int, actor: str, justification: str) -> RetentionRule:
    """Change a rule's duration. A compliance rule can only be extended, whoever asks."""
    _validate_rule_fields(kind=rule.kind, duration_days=duration_days, authority=rule.authority,
                          mode=rule.mode, protects=rule.protects)
    if not (justification or "").strip():
        raise errors.invalid("justification_required", "Changing a retention rule needs a written justification.")
    with transaction.atomic():
        retention_table_lock(rule.tenant_id)
        rule = RetentionRule.objects.select_for_update().get(pk=rule.pk)
        if rule.retired_at is not None:
            raise errors.conflict("rule_retired", "This rule is retired; add a new one instead.")
        if rule.mode == RuleMode.COMPLIANCE and duration_days < rule.duration_days:
            raise errors.conflict(
                "compliance_lock",
                "A compliance-mode rule can never be shortened; it can only be extended.",
                rule_id=rule.pk, authority=rule.authority, duration_days=rule.duration_days,
            )
        before = rule.duration_days
        rule.duration_days = duration_days
        rule.save(update_fields=["duration_days"])
        _version_new(tenant=rule.tenant, actor=actor,
                     change=f"rule {rule.pk} duration {before} -> {duration_days} days: {justification.strip()}")
        locks_recompute_for_classes([rule.content_class_id])
    return rule


def rule_retire(*, rule: RetentionRule, actor: str, justification: str) -> RetentionRule:
    """Stop applying a governance rule (kept on record). A compliance rule can never be retired."""
    if not (justification or "").strip():
        raise errors.invalid("justification_required", "Retiring a retention rule needs a written justification.")
    with transaction.atomic():
        retention_table_lock(rule.tenant_id)
        rule = RetentionRule.objects.select_for_update().get(pk=rule.pk)
        if rule.mode == RuleMode.COMPLIANCE:
            raise errors.conflict("compliance_lock", "A compliance-mode rule can never be retired or overridden.",
                                  rule_id=rule.pk, authority=rule.authority)
        if rule.retired_at is not None:
            return rule
        rule.retired_at = timezone.now()
        rule.save(update_fields=["retired_at"])
        _version_new(tenant=rule.tenant, actor=actor, change=f"retired rule {rule.pk}: {justification.strip()}")
        locks_recompute_for_classes([rule.content_class_id])
    return rule


def _version_new(*, tenant: Tenant, actor: str, change: str) -> RetentionTableVersion:
    """Snapshot the tenant's whole active retention table as the next numbered version."""
    # Version numbers are serialized per tenant by the retention-table lock every caller holds (on SQLite, by
    # its single writer). Not the tenant row: a FOR UPDATE there would wait for every record write's foreign-key
    # check while holding the lock those writes wait for.
    rules = [
        {
            "id": r.pk, "content_class": r.content_class.name, "kind": r.kind, "duration_days": r.duration_days,
            "authority": r.authority, "mode": r.mode, "protects": r.protects,
        }
        for r in RetentionRule.objects.filter(tenant=tenant, retired_at__isnull=True)
        .select_related("content_class").order_by("pk")
    ]
    number = (RetentionTableVersion.objects.filter(tenant=tenant).aggregate(n=Max("number"))["n"] or 0) + 1
    return RetentionTableVersion.objects.create(
        tenant=tenant, number=number, actor=actor, change=change, rules=rules,
        digest=hashlib.sha256(rfc8785.dumps(rules)).hexdigest(),
    )


def hold_place(
    *,
    tenant: Tenant,
    matter: str,
    actor: str,
    authority: str = "",
    subject: Subject | None = None,
    content_class: ContentClass | None = None,
    scope: Scope | None = None,
    record_ids: Iterable[int] | None = None,
) -> LegalHold:
    """Place a hold on exactly one of: a subject, a content class, a scope (with descendants), listed records."""
    record_ids = sorted(set(record_ids or []))
    targets = [t for t in (subject, content_class, scope, record_ids or None) if t]
    if len(targets) != 1:
        raise errors.invalid("invalid_hold_target",
                             "A hold covers exactly one of: subject, content_class, scope, record_ids.")
    if not (matter or "").strip():
        raise errors.invalid("matter_required", "A hold must name its matter.")
    for owned in (subject, content_class, scope):
        if owned is not None and owned.tenant_id != tenant.pk:
            raise errors.not_found("No such subject, content class or scope.")
    with transaction.atomic():
        retention_table_lock(tenant.pk)
        if record_ids:
            # Lock the listed rows: a sweep or forget deleting one of them meanwhile either committed first (the
            # row is gone: refused here) or waits for this hold and then finds the record held.
            found = len(Record.objects.filter(tenant=tenant, pk__in=record_ids).order_by("pk").select_for_update()
                        .values_list("pk", flat=True))
            if found != len(record_ids):
                raise errors.not_found("Some of the listed records do not exist.", record_ids=record_ids)
        hold = LegalHold.objects.create(
            tenant=tenant, matter=matter.strip(), authority=(authority or "").strip(), placed_by=actor,
            placed_at=timezone.now(), subject=subject, content_class=content_class, scope=scope,
        )
        HoldRecord.objects.bulk_create([HoldRecord(hold=hold, record_id=rid) for rid in record_ids])
        locks_recompute_for_hold(hold)
    return hold


def hold_release(*, hold: LegalHold, actor: str, reason: str) -> LegalHold:
    """Release a hold (kept on record with who, when and why); records it alone covered become unheld."""
    if not (reason or "").strip():
        raise errors.invalid("reason_required", "Releasing a hold needs a reason.")
    with transaction.atomic():
        retention_table_lock(hold.tenant_id)
        hold = LegalHold.objects.select_for_update().get(pk=hold.pk)
        if hold.released_at is not None:
            raise errors.conflict("hold_released", "This hold was already released.",
                                  released_at=hold.released_at.isoformat())
        hold.released_at = timezone.now()
        hold.released_by = actor
        hold.release_reason = reason.strip()
        hold.save(update_fields=["released_at", "released_by", "release_reason"])
        locks_recompute_for_hold(hold)
    return hold


def hold_preview_count(*, hold: LegalHold) -> int:
    """How many records a hold (placed or not yet saved) covers."""
    return hold_covered_records(hold).count()
