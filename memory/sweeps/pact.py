"""Pact TTL expiry: forget the records whose pact (a contract's retention clause, a `pact` rule) has run out.

A record's lock is the maximum of every rule of its class (retention.locks), so a pact never shortens a
regulatory retention: when the pact has expired but a longer rule or a hold still applies, the lock says so
and the sweep does what the lock permits, no more:
  - lock ended: hard delete, with the derived artifacts;
  - a longer rule that protects only the record's existence: redact (the content goes, as the pact wants;
    the row, id, timestamps and commitment stay, as the law wants); compaction purges the row when the
    lock ends;
  - a hold, or a longer rule that protects the content (write-once): the record waits, untouched. No
    conflict is opened (the law wins silently) but every run puts the waiting records on record, per
    class, with the blocking authority and the earliest date the wait ends.
Authority of each forget: the pact rule (its authority text, e.g. the contract clause).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from memory.models import ForgetMode, Record
from memory.services import ForgetTarget, records_forget
from memory.services.forget import LockedRows
from memory.sweeps.common import SAMPLE, BatchResult, claim_rows, grouped, tenants_of
from retention.locks import class_locks
from retention.models import ContentClass, RetentionRule, RuleKind

# Rows per batch: as compaction (memory.sweeps.compaction says why).
PACT_BATCH = settings.LEDGER_SWEEP_BATCH
ACTOR = "sweep:pact_expiry"


@dataclass(frozen=True)
class PactTTL:
    content_class_id: int
    days: int
    authority: str
    rule_id: int


def pact_ttls() -> dict[int, PactTTL]:
    """Per content class, its longest active pact rule (a pact rule is also a retention: nothing goes
    before the longest pact of the class has run out)."""
    ttls: dict[int, PactTTL] = {}
    for rule in RetentionRule.objects.filter(kind=RuleKind.PACT, retired_at__isnull=True).order_by(
            "content_class_id", "-duration_days", "pk"):
        ttls.setdefault(rule.content_class_id, PactTTL(rule.content_class_id, rule.duration_days, rule.authority,
                                                       rule.pk))
    return ttls


def pact_expired(*, now: datetime, ttls: dict[int, PactTTL]) -> QuerySet:
    """Live records (neither hidden nor redacted) whose class's pact has run out."""
    expired = Q(pk__in=[])
    for ttl in ttls.values():
        expired |= Q(content_class_id=ttl.content_class_id, created_at__lte=now - timedelta(days=ttl.days))
    return Record.objects.filter(expired, forgotten_at__isnull=True, redacted_at__isnull=True)


def _permits(now: datetime) -> Q:
    """What the lock lets the sweep do something about: not held, and either ended or existence-only."""
    return Q(held=False) & (Q(retained_until__isnull=True) | Q(retained_until__lte=now)
                            | Q(lock_protects_content=False))


def pact_expiry_batch(*, after: int | None = None, now: datetime | None = None,
                      batch_size: int | None = None) -> BatchResult:
    """Claim one batch of expired records past `after` and forget them: hard where the lock has ended,
    redact where a longer rule protects only their existence."""
    now = now or timezone.now()
    batch_size = batch_size or PACT_BATCH
    ttls = pact_ttls()
    if not ttls:
        return BatchResult(more=False)
    with transaction.atomic():
        # Each claimed row: ((tenant_id,), what the guard reads of it), read under its lock (as compaction).
        rows = claim_rows(pact_expired(now=now, ttls=ttls).filter(_permits(now)), after=after, limit=batch_size,
                          fields=("tenant_id",))
        result = BatchResult(more=False).claimed([row.pk for _, row in rows], batch_size)
        tenants = tenants_of(extra[0] for extra, _ in rows)

        def key(claimed):
            (tenant_id,), row = claimed
            ended = row.retained_until is None or row.retained_until <= now
            return tenant_id, row.content_class_id, ForgetMode.HARD if ended else ForgetMode.REDACT

        for (tenant_id, class_id, mode), group in grouped(rows, key=key):
            ttl = ttls[class_id]
            locked = LockedRows(tenant_id=tenant_id, rows=tuple(row for _, row in group))
            forget = records_forget(
                tenant=tenants[tenant_id], target=ForgetTarget(record_ids=tuple(row.pk for row in locked.rows)),
                mode=mode, locked=locked,
                # The tombstone cites the rule by its id (legal's wording of its authority, which may name a
                # party to the pact, stays in the signed retention table and in the event's reason).
                derivatives_mode=ForgetMode.HARD, actor=ACTOR, path="pact_expiry",
                authority=f"retention_rule:{ttl.rule_id}",
                reason=f"pact TTL expired: {ttl.days} days (rule {ttl.rule_id}, {ttl.authority})"
                       + ("" if mode == ForgetMode.HARD else "; a longer rule keeps the record's existence, "
                          "so its content is erased and the row is kept until that rule ends"),
            )
            result.forgot(forget)
    return result


def pact_expiry_preview(*, now: datetime) -> dict:
    """What a run would forget now, and what waits; changes nothing."""
    ttls = pact_ttls()
    expired = pact_expired(now=now, ttls=ttls).filter(_permits(now))
    ended = Q(retained_until__isnull=True) | Q(retained_until__lte=now)
    return {
        "would_delete": expired.filter(ended).count(),
        "would_redact": expired.exclude(ended).count(),
        "sample": list(expired.order_by("pk").values_list("pk", flat=True)[:SAMPLE]),
        **pact_expiry_summary(now=now),
    }


def pact_expiry_summary(*, now: datetime) -> dict:
    """The expired records a longer rule or a hold keeps, per content class: on record, no conflict."""
    ttls = pact_ttls()
    waiting = (pact_expired(now=now, ttls=ttls).exclude(_permits(now))
               .values("content_class_id", "held").annotate(n=Count("pk"), until=Min("retained_until"))
               .order_by("content_class_id", "held"))
    rows = list(waiting)
    locks = class_locks({r["content_class_id"] for r in rows})
    names = dict(ContentClass.objects.filter(pk__in=locks).values_list("pk", "name"))
    entries = []
    for row in rows:
        longest = locks[row["content_class_id"]].longest
        entries.append({
            "content_class": names.get(row["content_class_id"]), "content_class_id": row["content_class_id"],
            "records": row["n"], "code": "legal_hold" if row["held"] else "retention_lock",
            "authority": None if row["held"] else (longest.authority if longest else None),
            "until": None if row["held"] else (row["until"].isoformat() if row["until"] else None),
        })
    return {"waiting": entries, "waiting_records": sum(e["records"] for e in entries),
            "pact_classes": len(ttls)}
