"""The governed memory store.

A record carries its own lock (`retained_until`, `held`, `lock_protects_content`): machine-checkable
metadata that the retention engine keeps in step with the retention table and the holds, and that the
guard trigger (memory migration 0003) reads. Nothing here decides whether a forget is allowed: that is
`memory.services.forget`, the one guarded path.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Tenant(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Subject(models.Model):
    """A data subject, known to the tenant by an opaque reference (never an e-mail in clear here).

    `ref` is in normal form (memory.subjects.subject_ref_normalize: NFC, whitespace collapsed). A subject
    with `merged_into` set is a spelling of another subject's reference that rows written before
    normalization used (memory migration 0011 merged them): its records, holds and requests were moved to
    the other subject; the row stays because the write ledger and signed tombstones name its id.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="subjects")
    ref = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="merged")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "ref"], condition=Q(merged_into__isnull=True),
                                               name="subject_unique_ref")]

    def __str__(self) -> str:
        return self.ref


class Scope(models.Model):
    """A node of the scope tree: tenant > user > session > document, any depth.

    `path` is the full path from the tenant's root (`user:42/session:7`); descendants are found through
    `ScopeClosure`, which holds one row per (ancestor, descendant) pair, itself included.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="scopes")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    path = models.CharField(max_length=500)
    depth = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "path"], name="scope_unique_path")]

    def __str__(self) -> str:
        return self.path


class ScopeClosure(models.Model):
    ancestor = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="descendant_links")
    descendant = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="ancestor_links")
    depth = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["ancestor", "descendant"], name="scope_closure_unique")]
        indexes = [models.Index(fields=["descendant", "ancestor"], name="scope_closure_desc_idx")]


class Tier(models.TextChoices):
    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


class GovernedQuerySet(models.QuerySet):
    """`QuerySet.delete()` goes through the guard: a governed row is never deleted by the collector."""

    def delete(self):  # type: ignore[override]
        from memory.services import forget_queryset_delete

        return forget_queryset_delete(self)

    delete.alters_data = True
    delete.queryset_only = True


class Record(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="records")
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="records")
    subject = models.ForeignKey(Subject, null=True, blank=True, on_delete=models.PROTECT, related_name="records")
    content_class = models.ForeignKey("retention.ContentClass", on_delete=models.PROTECT, related_name="records")
    content = models.TextField(blank=True)
    # Salted SHA-256 of the content (hex). The salt reaches only the data subject, in their receipt.
    commitment = models.CharField(max_length=64)
    salt = models.CharField(max_length=32)
    tier = models.CharField(max_length=4, choices=Tier.choices, default=Tier.HOT)
    created_at = models.DateTimeField(db_index=True)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    redacted_at = models.DateTimeField(null=True, blank=True)
    erasure_pending = models.BooleanField(default=False)
    # The forget event that last changed this record: its verification handle.
    # No foreign-key check in PostgreSQL (migration 0007): forget events are permanent, and the check per
    # row cost a bulk forget ~8% of its time.
    forget_event = models.ForeignKey("memory.ForgetEvent", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", db_constraint=False)
    # The lock, kept in step with the retention table and holds by retention.locks. On PostgreSQL the database
    # computes it at INSERT and only its lock functions may change it (memory migration 0013); db_default makes
    # Django read the stored values back (RETURNING) after an INSERT.
    retained_until = models.DateTimeField(null=True, blank=True, default=None, db_default=None)
    held = models.BooleanField(default=False, db_default=False)
    lock_protects_content = models.BooleanField(default=False, db_default=False)

    objects = GovernedQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "subject"], name="record_tenant_subject_idx"),
            # The sweeps' scan: hidden or redacted rows still at rest, in id order (a claim takes the next
            # N of them past its cursor: ORDER BY id LIMIT N, without walking the live rows in between).
            models.Index(fields=["id"], name="record_forgotten_id_idx", condition=Q(forgotten_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"record {self.pk}"

    @property
    def is_forgotten(self) -> bool:
        return self.forgotten_at is not None or self.redacted_at is not None

    def delete(self, *args, **kwargs):  # type: ignore[override]
        return Record.objects.filter(pk=self.pk).delete()


class RecordTag(models.Model):
    record = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["record", "name"], name="record_tag_unique")]
        indexes = [models.Index(fields=["name", "record"], name="record_tag_name_idx")]


class ArtifactKind(models.TextChoices):
    SUMMARY = "summary"
    EMBEDDING = "embedding"
    CACHE = "cache"
    ARCHIVE = "archive"
    FLEET_COPY = "fleet_copy"


class DerivedArtifact(models.Model):
    """A copy made from records: a summary, an embedding, a cache entry, an archive copy, another agent's copy.

    It goes when any of its sources is forgotten; its lineage is `Lineage`.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="artifacts")
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="artifacts")
    kind = models.CharField(max_length=12, choices=ArtifactKind.choices)
    content = models.TextField(blank=True)
    # float32 little-endian vector, for embeddings (see memory.embedding).
    vector = models.BinaryField(null=True, blank=True)
    # The identity of the embedder that made `vector` (memory.embedding.identity_of); read only where there is a
    # vector. '' where it is not known: such a vector is not compared with any query until `manage.py reembed`
    # makes it again (memory 0018 says how the vectors written before it were identified).
    embedder = models.CharField(max_length=100, blank=True, db_default="")
    # Who holds the copy, for fleet copies and archives (an agent name, an archive location).
    holder = models.CharField(max_length=200, blank=True)
    sources = models.ManyToManyField(Record, through="Lineage", related_name="artifacts")
    created_at = models.DateTimeField(db_index=True)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    redacted_at = models.DateTimeField(null=True, blank=True)
    # No foreign-key check in PostgreSQL (migration 0007): forget events are permanent, and the check per
    # row cost a bulk forget ~8% of its time.
    forget_event = models.ForeignKey("memory.ForgetEvent", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", db_constraint=False)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "kind"], name="artifact_tenant_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk}"


class Lineage(models.Model):
    artifact = models.ForeignKey(DerivedArtifact, on_delete=models.CASCADE, related_name="lineage")
    source = models.ForeignKey(Record, on_delete=models.CASCADE, related_name="lineage")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["artifact", "source"], name="lineage_unique")]
        indexes = [models.Index(fields=["source", "artifact"], name="lineage_source_idx")]


class ForgetMode(models.TextChoices):
    SOFT = "soft"
    REDACT = "redact"
    HARD = "hard"


class ForgetStatus(models.TextChoices):
    FORGOTTEN = "forgotten"
    PARTIAL = "partial"
    REFUSED = "refused"


class ForgetEvent(models.Model):
    """One forget, whatever path asked for it: its `id` is the monotonic verification handle.

    Append-only. `outcomes` holds record ids by outcome and the refusals with their reasons; it never
    holds content.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="forget_events")
    public_id = models.UUIDField(unique=True)
    actor = models.CharField(max_length=200)
    path = models.CharField(max_length=40)
    target = models.JSONField()
    mode = models.CharField(max_length=6, choices=ForgetMode.choices)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=ForgetStatus.choices)
    outcomes = models.JSONField()
    artifacts = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"forget #{self.pk}"


class DeletedRecord(models.Model):
    """Which tenant a hard-deleted record id belonged to and which forget deleted it (for 410 answers)."""

    record_id = models.BigIntegerField(primary_key=True)
    # No foreign-key check and no index in the database (migration 0009): the only writer is the hard forget's
    # `DELETE ... RETURNING tenant_id, scope_id` feeding this INSERT in one statement, so the values are those
    # of a row that carried the same (checked) foreign keys a moment before; the check per row cost a purge of
    # 100,000 records ~1 s at COMMIT (bench/bench_compaction.py). Nothing looks rows up by tenant or scope
    # (by id, or by forget event). Django's PROTECT still refuses to delete a tenant or scope named here; the
    # database refuses a tenant's deletion anyway (its forget events keep their foreign key).
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_constraint=False,
                               db_index=False)
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="+", db_constraint=False,
                              db_index=False)
    # No foreign-key check in PostgreSQL (migration 0007): forget events are permanent.
    forget_event = models.ForeignKey(ForgetEvent, on_delete=models.PROTECT, related_name="+", db_constraint=False)
    deleted_at = models.DateTimeField()


class ApiToken(models.Model):
    """An API token: a tenant and a role. Only the SHA-256 of the key is stored."""

    class Role(models.TextChoices):
        AGENT = "agent"
        OPERATOR = "operator"
        LEGAL = "legal"
        AUDITOR = "auditor"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="tokens")
    role = models.CharField(max_length=10, choices=Role.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.role} token {self.prefix}… for {self.tenant}"


class ArchiveDeletion(models.Model):
    """The deletion log of archive copies: a restore from an archive replays it first, so nothing
    forgotten comes back. Append-only; one row per forgotten record per archive copy."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    record_id = models.BigIntegerField(db_index=True)
    artifact_id = models.BigIntegerField()
    holder = models.CharField(max_length=200, blank=True)
    commitment = models.CharField(max_length=64)
    forget_event = models.ForeignKey(ForgetEvent, on_delete=models.PROTECT, related_name="+")
    logged_at = models.DateTimeField()


class FleetCopyNotice(models.Model):
    """A copy held by another agent: that agent is told to forget it and tracked until it acknowledges.
    Unacknowledged past its deadline it is a gap, never ignored. The acknowledgement is signed as a follow-up
    tombstone (`closing_tombstone_id`) that closes the `fleet_copy:N` item of the forget's tombstone; until it
    has one the notice is open (`memory.services.fleet`)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    artifact_id = models.BigIntegerField()
    holder = models.CharField(max_length=200, db_index=True)
    source_ids = models.JSONField()
    mode = models.CharField(max_length=6, choices=ForgetMode.choices)
    forget_event = models.ForeignKey(ForgetEvent, on_delete=models.PROTECT, related_name="+")
    notified_at = models.DateTimeField()
    deadline = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    closing_tombstone_id = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["forget_event", "artifact_id"], name="fleet_notice_unique")]
        indexes = [models.Index(fields=["holder", "deadline"], name="fleet_notice_open_idx",
                                condition=Q(closing_tombstone_id__isnull=True))]


class SweepKind(models.TextChoices):
    COMPACTION = "compaction"
    PACT_EXPIRY = "pact_expiry"
    DEFERRED_ERASURES = "deferred_erasures"
    CONFIRMATIONS = "confirmations"
    SALTS_SHREDDING = "salts_shredding"


class SweepStatus(models.TextChoices):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    # Its worker died and its chain of batches was lost: a later run of the same kind took over.
    INTERRUPTED = "interrupted"


class SweepRun(models.Model):
    """One run of a sweep (memory.sweeps): when, what it did, what went wrong. A dry run holds the report of
    what it would do in `report` and changed nothing else. A run whose worker died stays `running` until a
    later run of its kind marks it `interrupted` and takes over: the work is claimed from the database,
    so nothing is lost or done twice."""

    kind = models.CharField(max_length=20, choices=SweepKind.choices)
    status = models.CharField(max_length=12, choices=SweepStatus.choices, default=SweepStatus.RUNNING)
    dry_run = models.BooleanField(default=False)
    actor = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    # Set by every batch: a running run with an old heartbeat lost its worker.
    heartbeat_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The last id this run's pass has claimed (each run makes one pass over the id space).
    cursor = models.BigIntegerField(null=True, blank=True)
    batches = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    report = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    resumed_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        indexes = [
            models.Index(fields=["kind", "-started_at"], name="sweeprun_kind_started_idx"),
            models.Index(fields=["kind", "heartbeat_at"], name="sweeprun_running_idx",
                         condition=Q(status="running")),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.pk}{' (dry run)' if self.dry_run else ''}"


class SweepBatch(models.Model):
    """One committed batch of a sweep run, written in the batch's own transaction: it exists exactly when
    the batch's forgets (and their tombstones) exist. Append-only."""

    run = models.ForeignKey(SweepRun, on_delete=models.PROTECT, related_name="batch_log")
    at = models.DateTimeField()
    first_id = models.BigIntegerField(null=True, blank=True)
    last_id = models.BigIntegerField(null=True, blank=True)
    counts = models.JSONField(default=dict)
    forget_event_ids = models.JSONField(default=list)
    tombstone_ids = models.JSONField(default=list)

    class Meta:
        indexes = [models.Index(fields=["run", "at"], name="sweepbatch_run_idx")]
