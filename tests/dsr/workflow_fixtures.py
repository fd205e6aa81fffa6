"""A subject spread over three scopes, with a summary and embeddings derived from the records, one
record under a 7-year write-once rule and one under a legal hold: the issue's erasure scenario."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from django.utils import timezone

from dsr.models import RequestStatus, SubjectRequest
from memory.models import Record, Tenant
from memory.services import artifact_write
from retention.models import ContentClass
from retention.services import hold_place
from tests.factories import record, rule


@dataclass
class Scenario:
    tenant: Tenant
    free: list[Record]
    under_rule: Record
    under_hold: Record
    summary_id: int
    request: SubjectRequest | None = None


def erasure_scenario(tenant_name: str = "acme", subject: str = "subject-7", protects: str = "content") -> Scenario:
    tenant, _ = Tenant.objects.get_or_create(name=tenant_name)
    chat, _ = ContentClass.objects.get_or_create(tenant=tenant, name="chat")
    trades, _ = ContentClass.objects.get_or_create(tenant=tenant, name="trade-ledger")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4(f)", protects=protects, mode="compliance")
    free = [
        record(tenant, chat, scope="user:7/session:1", content="my address is 12 Tangerine Lane", subject=subject),
        record(tenant, chat, scope="user:7/session:2", content="my phone is 555 0199", subject=subject),
        record(tenant, chat, scope="user:7/session:2/document:9", content="my cat is called Falcon",
               subject=subject),
    ]
    under_rule = record(tenant, trades, scope="user:7/session:1", content="bought 100 ACME", subject=subject)
    under_hold = record(tenant, chat, scope="user:7/session:3", content="the disputed message", subject=subject)
    hold_place(tenant=tenant, matter="Doe v. Acme", authority="court order 26-cv-7", record_ids=[under_hold.pk],
               actor="legal")
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[free[0].pk, free[1].pk],
                             content="lives on Tangerine Lane, phone 555 0199")
    return Scenario(tenant, free, under_rule, under_hold, summary.pk)


def verified_request(scenario: Scenario, subject: str = "subject-7", type: str = "erasure") -> SubjectRequest:
    received = timezone.now()
    request = SubjectRequest.objects.create(
        tenant=scenario.tenant, subject=scenario.free[0].subject, type=type, regulation="gdpr",
        received_at=received, due_date=date.today() + timedelta(days=30), contact_email="subject@example.org",
        status=RequestStatus.VERIFIED, identity_verified_by="operator", identity_method="test",
        identity_verified_at=received,
    )
    scenario.request = request
    return request
