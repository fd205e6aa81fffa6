"""Failure alerts: what went wrong and is not fixed yet, one row per cause; the webhooks that hear of them and
every attempt to deliver to one.

An alert is keyed by (tenant, kind, cause): `key` spells the three in one string so that one partial unique
index (open alerts only) makes a repeat of the cause find the open alert instead of adding a second; the
tenant is nullable (a sweep or the audit of the whole store is no tenant's), and a NULL in a plain composite
unique index would never collide, on PostgreSQL before NULLS NOT DISTINCT and on SQLite alike. Once the
alert is resolved, the same cause happening again is a new alert (and a new mail).

Models only: the producers call alerts.services; nothing here sends or decides.
"""
from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from alerts.validators import webhook_secret_validate, webhook_url_validate


class AlertKind(models.TextChoices):
    WORKFLOW_FAILED = "workflow_failed", "Workflow step failed"
    SWEEP_FAILED = "sweep_failed", "Sweep failed"
    COVERAGE_GAP = "coverage_gap", "Coverage gap"
    DEADLINE_NEAR = "deadline_near", "Deadline near, work left"


class AlertLevel(models.TextChoices):
    ERROR = "error"
    WARNING = "warning"


class Alert(models.Model):
    key = models.CharField(max_length=300, editable=False)
    tenant = models.ForeignKey("memory.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    # What the alert is about, as an id: "request:42", a sweep's kind, "class:7". With the tenant and the kind
    # it is the alert's identity; never a subject's reference or a record's content.
    cause = models.CharField(max_length=200)
    level = models.CharField(max_length=10, choices=AlertLevel.choices, default=AlertLevel.ERROR)
    title = models.CharField(max_length=300)
    detail = models.TextField(blank=True)
    # The admin page of the cause (a request, a sweep run, an audit report), for the operator to follow.
    link = models.CharField(max_length=300, blank=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    occurrences = models.PositiveIntegerField(default=1)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=300, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=200, blank=True)
    mailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One open alert per cause: the conditional insert of alerts.services.alert_raise targets it.
            models.UniqueConstraint(fields=["key"], condition=Q(resolved_at__isnull=True), name="alert_open_key_unique"),
        ]
        indexes = [
            # The admin banner's count: open alerts nobody acknowledged, a handful at any time.
            models.Index(fields=["id"], name="alert_banner_idx",
                         condition=Q(resolved_at__isnull=True, acknowledged_at__isnull=True)),
            # Resolving by cause (alerts.services.alerts_resolve): the open alerts only, a handful.
            models.Index(fields=["kind", "cause"], name="alert_open_cause_idx", condition=Q(resolved_at__isnull=True)),
            models.Index(fields=["-last_seen_at"], name="alert_last_seen_idx"),
        ]
        permissions = [("acknowledge_alert", "Can acknowledge an alert")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.title}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class WebhookEndpoint(models.Model):
    """Where alerts are POSTed, signed with `secret` (README.md, "Failure alerts"). A tenant's endpoint hears of
    that tenant's alerts; one with no tenant hears of every alert (the service's own, e.g. a sweep's)."""

    tenant = models.ForeignKey("memory.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                               help_text="Empty: every alert, the whole service's included.")
    url = models.CharField("URL", max_length=500, validators=[webhook_url_validate],
                           help_text="http:// or https://. Redirects are not followed.")
    secret = models.CharField(max_length=200, validators=[webhook_secret_validate],
                              help_text="The HMAC-SHA256 key the receiver checks the signature with.")
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tenant"], name="webhook_active_tenant_idx", condition=Q(active=True))]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class WebhookDelivery(models.Model):
    """One attempt to POST one alert to one endpoint. Attempts of the same delivery share `delivery_id`
    (sent as X-Ledger-Delivery, so a receiver can drop a repeat). Append-only."""

    delivery_id = models.UUIDField(default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.PROTECT, related_name="deliveries")
    alert = models.ForeignKey(Alert, on_delete=models.PROTECT, related_name="deliveries")
    event = models.CharField(max_length=30, default="alert.raised")
    attempt = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    ok = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["alert", "endpoint"], name="webhookdelivery_alert_idx")]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"delivery {self.delivery_id} attempt {self.attempt}"
