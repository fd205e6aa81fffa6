"""Fixtures for the admin's tests: a staff user per role (in the group the migration makes), logged-in
clients, and the data behind the screens: requests in every state, conflicts of each kind, a hold."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from dsr.models import (
    ItemDecision,
    ItemKind,
    ItemOutcome,
    RequestItem,
    RequestStatus,
    RequestTransition,
    RetentionConflict,
    SubjectRequest,
)
from dsr.roles import ROLES, roles_sync
from memory.models import Subject, Tenant
from retention.models import ContentClass
from retention.services import hold_place
from tests.dsr.test_workflow_steps import run_to_end
from tests.factories import record, rule

PASSWORD = "pw-for-tests-only"


def staff_user(role: str) -> User:
    """A staff user in the role's group (`superuser` makes a superuser). Groups are re-made first: a
    transactional test's flush empties the tables the migration filled."""
    if role == "superuser":
        return User.objects.create_superuser("root", "root@example.org", PASSWORD)
    if not Group.objects.filter(name__in=ROLES).count() == len(ROLES) or not Group.objects.get(
            name=role).permissions.exists():
        roles_sync()
    user = User.objects.create_user(f"{role}-ann", f"{role}@example.org", PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def client_as(db):
    made: dict[str, Client] = {}

    def login(role: str) -> Client:
        if role not in made:
            client = Client()
            client.force_login(staff_user(role))
            made[role] = client
        return made[role]

    return login


# --- data ------------------------------------------------------------------------------------------------

@dataclass
class Conflicts:
    """A verified erasure request run to its end in-process, whose subject has one record under a
    governance write-once rule, one under a compliance write-once rule, one under a legal hold, and two
    free records: three conflicts, one per way legal can decide."""

    tenant: Tenant
    request: SubjectRequest
    governance: RetentionConflict
    compliance: RetentionConflict
    hold: RetentionConflict
    records: dict


def conflicts_make(tenant_name: str = "acme", subject: str = "subject-31") -> Conflicts:
    tenant, _ = Tenant.objects.get_or_create(name=tenant_name)
    chat, _ = ContentClass.objects.get_or_create(tenant=tenant, name="chat")
    contracts, _ = ContentClass.objects.get_or_create(tenant=tenant, name="contracts")
    trades, _ = ContentClass.objects.get_or_create(tenant=tenant, name="trade-ledger")
    rule(tenant, contracts, days=5 * 365, authority="Company policy 12 (contracts)", protects="content",
         mode="governance")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4(f)", protects="content", mode="compliance")
    records = {
        "free": [record(tenant, chat, scope="user:31/session:1", content="call me at 555 0100", subject=subject),
                 record(tenant, chat, scope="user:31/session:2", content="I live on Elm Street", subject=subject)],
        "governance": record(tenant, contracts, scope="user:31/session:1", content="signed the lease",
                             subject=subject),
        "compliance": record(tenant, trades, scope="user:31/session:1", content="sold 50 ACME", subject=subject),
        "hold": record(tenant, chat, scope="user:31/session:3", content="the disputed chat", subject=subject),
    }
    hold_place(tenant=tenant, matter="Roe v. Acme", authority="court order 26-cv-31",
               record_ids=[records["hold"].pk], actor="legal")
    now = timezone.now()
    request = SubjectRequest.objects.create(
        tenant=tenant, subject=records["free"][0].subject, type="erasure", regulation="gdpr",
        received_at=now, due_date=(now + timedelta(days=30)).date(), contact_email="subject31@example.org",
        status=RequestStatus.VERIFIED, identity_verified_by="admin:operator-ann", identity_method="account",
        identity_verified_at=now,
    )
    run_to_end(request.pk)
    by_record = {c.record_id: c for c in RetentionConflict.objects.filter(request=request)}
    return Conflicts(tenant=tenant, request=SubjectRequest.objects.get(pk=request.pk),
                     governance=by_record[records["governance"].pk], compliance=by_record[records["compliance"].pk],
                     hold=by_record[records["hold"].pk], records=records)


def requests_bulk(n: int, *, tenant_name: str = "bulk", items_each: int = 3) -> list[SubjectRequest]:
    """`n` requests in every state, written set-based: overdue, due this week, later, done in past weeks
    (for the chart), each with plan items (some kept with a deferred erasure), history and a conflict."""
    tenant, _ = Tenant.objects.get_or_create(name=tenant_name)
    now = timezone.now()
    today = now.date()
    subjects = Subject.objects.bulk_create([Subject(tenant=tenant, ref=f"{tenant_name}-subject-{i}")
                                            for i in range(n)])
    cycle = [RequestStatus.RECEIVED, RequestStatus.VERIFIED, RequestStatus.EXECUTING, RequestStatus.AWAITING_LEGAL,
             RequestStatus.PARTIALLY_COMPLETED, RequestStatus.COMPLETED, RequestStatus.CLOSED]
    requests = []
    for i, subject in enumerate(subjects):
        status = cycle[i % len(cycle)]
        done = status in (RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED, RequestStatus.CLOSED)
        received = now - timedelta(days=(i * 3) % 60)
        requests.append(SubjectRequest(
            tenant=tenant, subject=subject, type=["erasure", "access", "erasure", "restriction"][i % 4],
            regulation=["gdpr", "ccpa", "other"][i % 3], received_at=received,
            due_date=today + timedelta(days=(i % 20) - 5), contact_email=f"s{i}@example.org", status=status,
            confirmed_at=now - timedelta(weeks=i % 10, hours=i) if done else None,
        ))
    requests = SubjectRequest.objects.bulk_create(requests)
    items, history, conflicts = [], [], []
    for i, req in enumerate(requests):
        for j in range(items_each):
            kept = j == 0 and i % 2 == 0
            items.append(RequestItem(
                request=req, kind=ItemKind.RECORD, object_id=i * 1000 + j,
                decision=ItemDecision.HIDE if kept else ItemDecision.ERASE,
                outcome=ItemOutcome.HIDDEN if kept else ItemOutcome.DELETED,
                reason={"code": "retention_lock", "authority": "SEC 17a-4", "locked_until": None} if kept else None,
                deferred_until=now + timedelta(days=(i % 40) - 3) if kept else None,
            ))
        history += [RequestTransition(request=req, action="received", actor="api", to_status="received", at=now),
                    RequestTransition(request=req, action="note", actor="admin:x", note="checked", at=now)]
        conflicts.append(RetentionConflict(
            request=req, tenant=tenant, record_id=i * 1000, code="retention_lock", authority="SEC 17a-4",
            blocking=[{"type": "rule", "rule_id": 0, "authority": "SEC 17a-4", "mode": "compliance", "until": None}],
            status=["open", "deferred", "upheld"][i % 3], opened_at=now - timedelta(hours=i),
            deferred_to=today + timedelta(days=i % 9) if i % 3 == 1 else None,
        ))
    RequestItem.objects.bulk_create(items)
    RequestTransition.objects.bulk_create(history)
    RetentionConflict.objects.bulk_create(conflicts)
    return requests
