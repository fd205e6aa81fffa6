"""Subject requests, their history, the erasure workflow's per-record plan, and retention conflicts.

The workflow keeps all of its state here, in the database: a step reads what is left to do from
`RequestItem` rows and never trusts memory of a previous run (DESIGN.md invariant 8).
"""
from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce


class RequestType(models.TextChoices):
    ERASURE = "erasure"
    ACCESS = "access"
    RESTRICTION = "restriction"


class Regulation(models.TextChoices):
    GDPR = "gdpr", "GDPR"
    CCPA = "ccpa", "CCPA"
    OTHER = "other", "Other"


class Channel(models.TextChoices):
    API = "api"
    EMAIL = "email"
    WEB_FORM = "web_form"
    LETTER = "letter"
    PHONE = "phone"


class RequestStatus(models.TextChoices):
    RECEIVED = "received"
    VERIFIED = "verified"
    PLANNED = "planned"
    EXECUTING = "executing"
    AWAITING_LEGAL = "awaiting_legal"
    COMPLETED = "completed"
    PARTIALLY_COMPLETED = "partially_completed"
    REFUSED = "refused"
    CLOSED = "closed"


# A request in one of these needs no more work: it leaves the due-date queues.
DONE_STATUSES = [RequestStatus.COMPLETED.value, RequestStatus.REFUSED.value, RequestStatus.CLOSED.value]


class SubjectRequest(models.Model):
    # No index of its own: `request_tenant_status_idx` (tenant, status) leads with it, and every UPDATE of a
    # request's status writes each of its indexes (bench_workflow.py).
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="subject_requests",
                               db_index=False)
    subject = models.ForeignKey("memory.Subject", on_delete=models.PROTECT, related_name="requests")
    type = models.CharField(max_length=12, choices=RequestType.choices)
    regulation = models.CharField(max_length=5, choices=Regulation.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.API)
    # Where the subject is told the outcome (never shown on a public page).
    contact_email = models.EmailField(blank=True)
    received_at = models.DateTimeField()
    # The original due date (dsr.deadlines), the one an extension replaces, and the date that holds now:
    # a stored generated column, so the overdue queue is one indexed comparison and cannot drift.
    due_date = models.DateField()
    extended_due_date = models.DateField(null=True, blank=True)
    effective_due_date = models.GeneratedField(expression=Coalesce("extended_due_date", "due_date"),
                                               output_field=models.DateField(), db_persist=True)
    extension_reason = models.TextField(blank=True)
    extension_notified_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=RequestStatus.choices, default=RequestStatus.RECEIVED)
    identity_verified_by = models.CharField(max_length=200, blank=True)
    identity_method = models.CharField(max_length=200, blank=True)
    identity_verified_at = models.DateTimeField(null=True, blank=True)
    closing_reason = models.TextField(blank=True)
    # Workflow bookkeeping: which steps are done (each step checks its own mark and the items).
    # `workflow_started_at`: an operator (or the API) started the workflow. A verified request that nobody
    # started is not planned by a task that plans a group of requests (dsr/services/workflow.py).
    workflow_started_at = models.DateTimeField(null=True, blank=True)
    planned_at = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    propagated_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    gaps = models.JSONField(default=list, blank=True)
    export = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Overdue and soon-due queues: open requests by their effective due date.
            # dsr.selectors filter with the same `exclude(status__in=DONE_STATUSES)` so the planner uses it.
            models.Index(fields=["effective_due_date"], name="request_open_effective_due_idx",
                         condition=~Q(status__in=DONE_STATUSES)),
            models.Index(fields=["tenant", "status"], name="request_tenant_status_idx"),
            # The workflow's claims (dsr/services/workflow.py `group_claim`: a tenant's requests due at a step,
            # by id) and its stalled-request check look only at requests not yet notified, a handful at any
            # time; by (tenant, status) the notify step's claim read every finished request the tenant ever
            # had (10,400 in a bench store: 40-55 ms a group, ~1 ms a request, growing with the store).
            models.Index(fields=["tenant", "status", "id"], name="request_in_flight_idx",
                         condition=Q(notified_at__isnull=True)),
            # The admin's request queue (dsr/admin.py): every view is ordered by (effective_due_date, id);
            # filtered by status, or not at all, these serve the order and the LIMIT without a sort.
            models.Index(fields=["status", "effective_due_date", "id"], name="request_status_due_idx"),
            models.Index(fields=["effective_due_date", "id"], name="request_due_idx"),
            # The dashboard's erasures completed per week (dsr/dashboard.py), answered from the index alone.
            models.Index(fields=["confirmed_at"], include=["type", "status"], name="request_confirmed_idx",
                         condition=Q(confirmed_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.get_type_display()} request {self.pk}"

    # Django's generated get_FOO_display() builds a dict of the field's choices at every call (~14 µs here);
    # the workflow calls these for every notice and every forget (bench_workflow.py). The same answers: the
    # choice's label, or the value itself when it is not a choice.
    def get_type_display(self) -> str:
        return _choice_label(RequestType, self.type)

    def get_regulation_display(self) -> str:
        return _choice_label(Regulation, self.regulation)

    def get_status_display(self) -> str:
        return _choice_label(RequestStatus, self.status)


def _choice_label(choices: type[models.TextChoices], value):
    try:
        return choices(value).label
    except ValueError:
        return value


class RequestTransition(models.Model):
    """The append-only history of a request: every status move and every act on it, with who did it."""

    request = models.ForeignKey(SubjectRequest, on_delete=models.PROTECT, related_name="history")
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, blank=True)
    action = models.CharField(max_length=40)
    actor = models.CharField(max_length=200)
    note = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "pk"]


class ItemKind(models.TextChoices):
    RECORD = "record"
    ARTIFACT = "artifact"


class ItemDecision(models.TextChoices):
    ERASE = "erase"          # hard delete: nothing forbids it
    REDACT = "redact"        # the lock protects existence only: content goes, the row stays
    HIDE = "hide"            # the lock protects content or a hold applies: hide and restrict, defer erasure
    PROPAGATE = "propagate"  # a derived artifact: erased with its source
    EXPORT = "export"        # an access request: the item is given to the subject in the export


class ItemOutcome(models.TextChoices):
    PENDING = "pending"
    DELETED = "deleted"
    REDACTED = "redacted"
    HIDDEN = "hidden"
    NOTIFIED = "notified"    # a copy held by another agent: told, awaiting acknowledgement
    LOGGED = "logged"        # an archive copy: entered into the deletion log a restore replays
    GONE = "gone"            # already gone when the step ran (forgotten by another path)
    EXPORTED = "exported"    # an access request: in the export made for the subject
    # An access request: planned, but not live data when the export was made (hidden or forgotten, or an
    # embedding: numbers derived from records, not readable data), so not in the export; `reason` says why.
    EXCLUDED = "excluded"


class RequestItem(models.Model):
    """One record or derived artifact in a request's plan, with the decision and what happened."""

    # No index of its own: `request_item_unique` leads with it, and every item insert and update (none is HOT:
    # `decision` and `outcome` are in the kept-records indexes' conditions) writes each of the table's indexes.
    request = models.ForeignKey(SubjectRequest, on_delete=models.PROTECT, related_name="items", db_index=False)
    kind = models.CharField(max_length=8, choices=ItemKind.choices)
    # Plain ids, not foreign keys: the plan outlives what it erased.
    object_id = models.BigIntegerField()
    artifact_kind = models.CharField(max_length=12, blank=True)
    decision = models.CharField(max_length=9, choices=ItemDecision.choices, blank=True)
    outcome = models.CharField(max_length=8, choices=ItemOutcome.choices, default=ItemOutcome.PENDING)
    reason = models.JSONField(null=True, blank=True)
    deferred_until = models.DateTimeField(null=True, blank=True)
    forget_event_id = models.BigIntegerField(null=True, blank=True)
    tombstone_id = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["request", "kind", "object_id"], name="request_item_unique")]
        # No (request, outcome) index: a request's items are found by `request_item_unique` (a few dozen rows,
        # or a few thousand for a large subject; the steps read them by request and kind), and one more index
        # cost every item insert and update its entry (migration 0010).
        indexes = [
            # Records kept hidden by a request (deferred erasures, restrictions): the deferred-erasures sweep's
            # scan, and what compaction leaves alone (memory.sweeps.compaction).
            models.Index(fields=["object_id"], name="request_item_kept_idx",
                         condition=Q(kind="record", decision="hide", outcome="hidden")),
            # The same kept records by the date their erasure comes due: the admin dashboard's list.
            models.Index(fields=["deferred_until"], name="request_item_kept_due_idx",
                         condition=Q(kind="record", decision="hide", outcome="hidden")),
        ]


class ConflictStatus(models.TextChoices):
    OPEN = "open"
    UPHELD = "upheld"
    OVERRIDDEN = "overridden"
    DEFERRED = "deferred"
    # The lock ended before legal decided (or after a deferral came due): the deferred-erasures sweep erased it.
    LAPSED = "lapsed"


class RetentionConflict(models.Model):
    """An erasure that a rule or a hold blocks, for legal to decide. Never deleted."""

    request = models.ForeignKey(SubjectRequest, on_delete=models.PROTECT, related_name="conflicts")
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="+")
    record_id = models.BigIntegerField()
    code = models.CharField(max_length=20)
    authority = models.CharField(max_length=200)
    blocking = models.JSONField()
    locked_until = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=ConflictStatus.choices, default=ConflictStatus.OPEN)
    opened_at = models.DateTimeField()
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    justification = models.TextField(blank=True)
    deferred_to = models.DateField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["request", "record_id"], name="conflict_unique_record")]
        indexes = [
            models.Index(fields=["opened_at"], name="conflict_open_idx", condition=Q(status="open")),
            # The admin's conflicts queue filtered by state (deferred, decided), oldest first.
            models.Index(fields=["status", "opened_at", "id"], name="conflict_status_opened_idx"),
        ]

    def __str__(self) -> str:
        return f"conflict {self.pk}: record {self.record_id} ({self.authority})"


class SubjectNotice(models.Model):
    """What was sent to the subject (the outcome, an extension), as sent: the proof that they were told."""

    # No index of its own: `notice_once_per_kind` (request, kind) leads with it.
    request = models.ForeignKey(SubjectRequest, on_delete=models.PROTECT, related_name="notices", db_index=False)
    kind = models.CharField(max_length=20)
    to = models.CharField(max_length=254)
    subject_line = models.CharField(max_length=300)
    body = models.TextField()
    receipt = models.JSONField(null=True, blank=True)
    # Written before sending (an outbox), set once the mail backend took it: a crash in between resends.
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["request", "kind"], name="notice_once_per_kind")]
