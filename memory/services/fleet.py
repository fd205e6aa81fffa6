"""Copies held by other agents: they fetch what they must forget and acknowledge it.

An acknowledgement is signed: a follow-up tombstone whose `propagation.closes` names the `fleet_copy:N` item that
the forget's tombstone deferred (as a compaction's tombstone closes the `purge_content` items it completes), so
that the closing of every deferred item is on the public log. Confirm-erasure requires that tombstone, not only
the notice's time (`memory.services.confirm`).
"""
from __future__ import annotations

import json
import uuid

from django.db import transaction
from django.db.models import QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory import errors
from memory.models import ArtifactKind, FleetCopyNotice, ForgetMode, Tenant
from tombstones.vocabulary import AUTHORITY_MEMORY_FORGET, is_authority

PATH = "fleet_ack"
# What the holder did to its copy, as a derivative's outcome: the forget's mode for derivatives.
_OUTCOME = {ForgetMode.SOFT.value: "hidden", ForgetMode.REDACT.value: "redacted", ForgetMode.HARD.value: "deleted"}


def fleet_notices_pending(*, tenant: Tenant, holder: str) -> QuerySet:
    """The holder's notices with no signed acknowledgement yet (one acknowledged before acknowledgements were
    signed is listed again: acknowledging it now signs it)."""
    if not isinstance(holder, str) or not 0 < len(holder) <= 200:
        raise errors.invalid("invalid_parameter", "holder must be 1 to 200 characters.", parameter="holder")
    return FleetCopyNotice.objects.filter(tenant=tenant, holder=holder, closing_tombstone_id__isnull=True).order_by("pk")


def fleet_notice_acknowledge(*, tenant: Tenant, notice_id: int, actor: str) -> FleetCopyNotice:
    """Record that the holder forgot its copy, and sign it as a follow-up tombstone that closes the forget's
    `fleet_copy:N` item. `actor`: who acknowledges, as a tombstone states it (`token:12`).

    Idempotent: the notice's row lock serializes acknowledgements, and one that finds the closing tombstone
    issued changes nothing (the first time and tombstone are kept). A notice acknowledged before
    acknowledgements were signed keeps its time and gets its tombstone now."""
    from tombstones.services import tombstone_issue

    if not 0 < notice_id < 2**63:
        raise errors.not_found("No such notice.")
    with transaction.atomic():
        notice = (FleetCopyNotice.objects.select_for_update(of=("self",)).select_related("forget_event")
                  .filter(tenant=tenant, pk=notice_id).first())
        if notice is None:
            raise errors.not_found("No such notice.")
        if notice.closing_tombstone_id is None:
            now = timezone.now()
            tombstone_id = uuid.uuid4()
            tombstone_issue(tombstone_id=tombstone_id, tenant_id=tenant.pk,
                            statement=_statement(tenant=tenant, notice=notice, actor=actor, now=now))
            FleetCopyNotice.objects.filter(pk=notice.pk).update(
                acknowledged_at=Coalesce("acknowledged_at", Value(now)), closing_tombstone_id=tombstone_id)
            notice.refresh_from_db()
    return notice


def _statement(*, tenant: Tenant, notice: FleetCopyNotice, actor: str, now) -> dict:
    """The acknowledgement's statement: the copy handled as the forget asked (a derivative of kind fleet_copy),
    on the forget's own authority, closing its deferred item. Nothing personal: the holder's name stays on the
    notice."""
    event = notice.forget_event
    item = f"fleet_copy:{notice.artifact_id}"
    return {
        "request": {"actor": actor, "authority": _authority_of(event.public_id), "path": PATH},
        "scope": {"tenant_id": str(tenant.pk), "target": {"artifact_ids": [str(notice.artifact_id)]}},
        "execution": {"mode": str(notice.mode), "path": PATH, "records": []},
        "propagation": {
            "derivatives": [{"artifact_id": str(notice.artifact_id), "kind": ArtifactKind.FLEET_COPY.value,
                             "outcome": _OUTCOME[notice.mode]}],
            "deferred": [],
            "closes": [{"tombstone_id": str(event.public_id), "handle": str(event.pk), "action": "acknowledge",
                        "items": [item]}],
        },
        "time": now.isoformat(),
    }


def _authority_of(tombstone_id: uuid.UUID) -> str:
    """The forget's authority, as its tombstone states it (a version 1 statement's may be free text: then the
    memory forget's)."""
    from tombstones.models import Tombstone

    payload = Tombstone.objects.filter(pk=tombstone_id).values_list("payload", flat=True).first()
    authority = json.loads(bytes(payload)).get("request", {}).get("authority") if payload is not None else None
    return authority if is_authority(authority) else AUTHORITY_MEMORY_FORGET
