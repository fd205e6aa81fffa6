"""Content classes, the retention table (rules, versioned) and legal holds.

Rules and holds decide the lock that each record carries (`memory.Record.retained_until`, `held`,
`lock_protects_content`); `retention.services` keeps the two in step, set-based.
"""
from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class ContentClass(models.Model):
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="content_classes")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "content classes"
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="content_class_unique_name")]

    def __str__(self) -> str:
        return self.name


class RuleKind(models.TextChoices):
    REGULATORY = "regulatory"
    PACT = "pact"
    OPERATIONAL = "operational"


class RuleMode(models.TextChoices):
    # Legal may shorten, retire or override with a written justification (audited).
    GOVERNANCE = "governance"
    # Nobody may shorten, retire or override it, not even a superuser; it can only be extended.
    COMPLIANCE = "compliance"


class RuleProtects(models.TextChoices):
    # The row, id, timestamps and commitment must survive: soft and redact stay permitted.
    EXISTENCE = "existence"
    # Write-once (SEC 17a-4): the content must survive too; only soft stays permitted.
    CONTENT = "content"


class RetentionRule(models.Model):
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="retention_rules")
    content_class = models.ForeignKey(ContentClass, on_delete=models.PROTECT, related_name="rules")
    kind = models.CharField(max_length=12, choices=RuleKind.choices)
    duration_days = models.PositiveIntegerField()
    authority = models.CharField(max_length=200)
    mode = models.CharField(max_length=10, choices=RuleMode.choices, default=RuleMode.GOVERNANCE)
    protects = models.CharField(max_length=9, choices=RuleProtects.choices, default=RuleProtects.EXISTENCE)
    created_at = models.DateTimeField(auto_now_add=True)
    # A retired rule stops applying but stays on record; compliance rules are never retired.
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["content_class"], name="rule_active_class_idx", condition=Q(retired_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.content_class}: {self.duration_days} days ({self.authority})"


class RetentionTableVersion(models.Model):
    """Every change to a tenant's retention table makes a new numbered version holding the whole table.

    Signed and chained (retention.versions): the coverage audit takes its mandates from the latest version whose
    signature verifies and whose chain holds, not from the rule rows. Append-only in the database (retention
    migration 0005): an INSERT without a signature, any UPDATE but the late signing of a version made before
    versions were signed, and any DELETE are refused.
    """

    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="retention_versions")
    number = models.PositiveIntegerField()
    actor = models.CharField(max_length=200)
    change = models.TextField()
    # One dict per active rule: id, content_class (name), content_class_id, kind, duration_days, authority, mode,
    # protects. Versions made before migration 0005 have no content_class_id.
    rules = models.JSONField()
    # SHA-256 of the RFC 8785 canonical form of `rules`.
    digest = models.CharField(max_length=64)
    # Set before the row is written (not auto_now_add): the signature covers it.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # SHA-256 of the signed statement of the version this one follows (retention.versions.version_digest): the
    # hash chain; "" for the first.
    previous_digest = models.CharField(max_length=64, blank=True, default="")
    # The tombstones app's key (SigningKey.kid) that signed `retention.versions.version_statement`, and the
    # Ed25519 signature over its DSSE pre-authentication encoding. Empty only on versions made before 0005
    # that are not signed yet.
    kid = models.CharField(max_length=64, blank=True, default="")
    signature = models.BinaryField(blank=True, default=b"")
    # Made before versions were signed, and signed afterwards, as found then (retention.versions.versions_sign_late).
    signed_late = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "number"], name="retention_version_unique")]
        ordering = ["tenant", "-number"]

    def __str__(self) -> str:
        return f"{self.tenant} retention table v{self.number}"


class LegalHold(models.Model):
    """A hold covers a subject, a content class, a scope (with descendants) or listed records.

    Holds are never deleted: a released hold keeps who released it, when and why.
    """

    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="legal_holds")
    matter = models.CharField(max_length=200)
    authority = models.CharField(max_length=200, blank=True)
    placed_by = models.CharField(max_length=200)
    placed_at = models.DateTimeField()
    subject = models.ForeignKey("memory.Subject", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    content_class = models.ForeignKey(ContentClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    scope = models.ForeignKey("memory.Scope", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=200, blank=True)
    release_reason = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant"], name="hold_active_idx", condition=Q(released_at__isnull=True))]

    def __str__(self) -> str:
        return self.matter

    @property
    def is_active(self) -> bool:
        return self.released_at is None


class HoldRecord(models.Model):
    """A record listed by a hold. A plain id, not a foreign key: the hold's history outlives the record."""

    hold = models.ForeignKey(LegalHold, on_delete=models.PROTECT, related_name="listed_records")
    record_id = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hold", "record_id"], name="hold_record_unique")]
        indexes = [models.Index(fields=["record_id"], name="hold_record_record_idx")]


class LockRecomputeGrant(models.Model):
    """Present only inside the transaction of `retention.services.locks_recompute`.

    The guard trigger refuses to shorten a record's lock (lower `retained_until`, clear `held` or
    `lock_protects_content`) unless this table has a row: uncommitted rows are visible only to their
    own transaction, so a stray UPDATE elsewhere cannot unlock a record and then delete it.
    """

    granted_at = models.DateTimeField(auto_now_add=True)


class WriteLedgerEntry(models.Model):
    """Every record ever written: one row per INSERT into memory_record, written by a database trigger
    (retention migration 0002), so raw SQL and bulk loads are ledgered too. Append-only: the database
    refuses UPDATE and DELETE. Plain ids, not foreign keys: the ledger outlives the records.

    The coverage audit (retention.audit) applies the mandates to this ledger to know which records must
    be at rest, and compares with what is.
    """

    record_id = models.BigIntegerField()
    tenant_id = models.BigIntegerField()
    content_class_id = models.BigIntegerField()
    subject_id = models.BigIntegerField(null=True)
    scope_id = models.BigIntegerField()
    # The record's own creation time (what retention counts from) and when the row reached the table.
    created_at = models.DateTimeField()
    written_at = models.DateTimeField()
    # Ledgered by the migration from rows already at rest, not by the trigger at write time.
    backfilled = models.BooleanField(default=False)

    class Meta:
        verbose_name_plural = "write ledger entries"
        indexes = [models.Index(fields=["record_id"], name="writeledger_record_idx")]

    def __str__(self) -> str:
        return f"record {self.record_id} written {self.written_at:%Y-%m-%d %H:%M}"


class TombstonedDeletion(models.Model):
    """A record id that a signed tombstone lists with outcome `deleted`: the coverage audit's index of the
    tombstones' statements, so that each statement is parsed once, not at every audit. Filled by the audit
    (retention.audit) in log order; append-only (the database refuses UPDATE and DELETE). The audit believes
    an entry that excuses a mandated record only after reading the tombstone itself and verifying it."""

    tombstone_id = models.UUIDField()
    leaf_index = models.BigIntegerField()
    tenant_id = models.BigIntegerField()
    record_id = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["record_id"], name="tombstoned_record_idx")]


class AuditStatus(models.TextChoices):
    CLEAN = "clean"
    FINDINGS = "findings"  # records kept past their time or erasures overdue, no coverage gap
    GAPS = "gaps"          # mandated records missing: a violation
    FAILED = "failed"


class CoverageReport(models.Model):
    """One run of the coverage audit: per content class, what the mandates expect at rest and what is.
    Kept per run; never changed after it finishes."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    actor = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=AuditStatus.choices)
    # Totals over all classes (the columns of `classes`), and the per-class rows with samples of ids.
    totals = models.JSONField(default=dict)
    classes = models.JSONField(default=list)
    anomalies = models.JSONField(default=list, blank=True)
    gaps = models.BigIntegerField(default=0)
    kept_past_mandate = models.BigIntegerField(default=0)
    erasure_overdue = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0)
    error = models.TextField(blank=True)
    # The log position up to which the tombstones' statements are indexed (retention.TombstonedDeletion).
    tombstones_indexed_to = models.BigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-started_at"], name="coveragereport_started_idx")]

    def __str__(self) -> str:
        return f"coverage audit {self.pk} ({self.status})"
