"""Statements, tombstones and receipts for the tombstones tests (independent of the memory app's services)."""
from __future__ import annotations

import base64
import json
import secrets
import uuid

import factory
from django.db import transaction

from memory.models import Tenant
from tombstones.services import receipt_build, tombstone_issue
from tombstones.verification import commitment_of


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tenant-{n}")


def statement_make(contents: list[str] | None = None, *, outcome: str = "deleted",
                   authority: str = "GDPR Art. 17") -> tuple[dict, dict[str, str]]:
    """A statement over records with these contents, and the subject's salts (record id -> salt)."""
    contents = ["alice@example.org", "Alice's address: 1 Main St"] if contents is None else contents
    salts = {str(1000 + i): secrets.token_hex(16) for i in range(len(contents))}
    records = [{"record_id": record_id, "commitment": commitment_of(content, salt), "tier": "hot", "outcome": outcome}
               for (record_id, salt), content in zip(salts.items(), contents)]
    statement = {
        "request": {"actor": "user:7", "authority": authority, "path": "api"},
        "scope": {"target": {"subject_ids": ["42"]}},
        "execution": {"mode": "hard", "records": records, "path": "api"},
        "propagation": {"derivatives": [{"artifact_id": "77", "kind": "embedding", "outcome": "deleted"},
                                        {"artifact_id": "78", "kind": "summary", "outcome": "deleted"}],
                        "deferred": [{"item": "fleet_copy:79", "action": "acknowledge",
                                      "deadline": "2026-03-01T00:00:00Z"}]},
        "time": "2025-12-02T10:00:00Z",
    }
    return statement, salts


def tombstone_make(tenant: Tenant | None = None, contents: list[str] | None = None, **kwargs):
    tenant = tenant or TenantFactory()
    statement, salts = statement_make(contents, **kwargs)
    with transaction.atomic():
        return tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                               subject_salts=salts)


def receipt_make(**kwargs) -> dict:
    return receipt_build(tombstone_id=tombstone_make(**kwargs).id)


def payload_of(receipt: dict) -> dict:
    return json.loads(base64.b64decode(receipt["envelope"]["payload"]))


def with_payload(receipt: dict, statement: dict) -> dict:
    """The receipt with its payload replaced (as a tamperer would: re-encoded, signature unchanged)."""
    changed = json.loads(json.dumps(receipt))
    changed["envelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return changed
