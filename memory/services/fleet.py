"""Copies held by other agents: they fetch what they must forget and acknowledge it."""
from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from memory import errors
from memory.models import FleetCopyNotice, Tenant


def fleet_notices_pending(*, tenant: Tenant, holder: str) -> QuerySet:
    if not isinstance(holder, str) or not 0 < len(holder) <= 200:
        raise errors.invalid("invalid_parameter", "holder must be 1 to 200 characters.", parameter="holder")
    return FleetCopyNotice.objects.filter(tenant=tenant, holder=holder, acknowledged_at__isnull=True).order_by("pk")


def fleet_notice_acknowledge(*, tenant: Tenant, notice_id: int) -> FleetCopyNotice:
    """Record that the holder forgot its copy. Acknowledging twice is harmless and keeps the first time."""
    notice = FleetCopyNotice.objects.filter(tenant=tenant, pk=notice_id).first() if 0 < notice_id < 2**63 else None
    if notice is None:
        raise errors.not_found("No such notice.")
    FleetCopyNotice.objects.filter(pk=notice.pk, acknowledged_at__isnull=True).update(acknowledged_at=timezone.now())
    notice.refresh_from_db()
    return notice
