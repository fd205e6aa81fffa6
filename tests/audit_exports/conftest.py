"""A ledger with one of everything an audit exports, made by real service calls: an erasure request received,
verified and run through the workflow (history, plan items, tombstones), a conflict legal upheld, a rule
extended (a new table version), a hold placed and released, a sweep run; and another tenant's rows.

Markers that must never reach an export: a record content (still at rest: kept by a compliance rule, a hold
and as another subject's live record), the subject's reference, the subject's e-mail address."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

import pytest

from dsr.models import RetentionConflict, SubjectRequest
from dsr.services import request_create, request_verify_identity
from dsr.services.conflicts import conflict_uphold
from memory.models import Tenant
from memory.services.tokens import token_issue
from memory.sweeps.runs import sweep_run_sync
from retention.models import ContentClass, LegalHold, RetentionRule
from retention.services import hold_place, hold_release, rule_change_duration
from tests.admin.conftest import client_as  # noqa: F401  (a fixture: staff clients per role)
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario
from tests.factories import record, rule

MARKER = "MARKER-content-5e1d93"
SUBJECT_REF = "SUBJREF-a71c-person"
EMAIL = "marker-person-77@example.org"
KINDS = ["requests", "request-transitions", "request-items", "conflicts", "retention-versions", "holds",
         "sweep-runs"]


@dataclass
class World:
    tenant: Tenant
    other: Tenant
    request: SubjectRequest
    other_request: SubjectRequest
    conflict: RetentionConflict
    rule: RetentionRule
    hold: LegalHold
    other_hold: LegalHold


def world_make() -> World:
    scenario = erasure_scenario(subject=SUBJECT_REF)
    tenant = scenario.tenant
    trades = ContentClass.objects.get(tenant=tenant, name="trade-ledger")
    chat = ContentClass.objects.get(tenant=tenant, name="chat")
    record(tenant, trades, scope="user:7/session:5", content=f"{MARKER} kept by the rule", subject=SUBJECT_REF)
    record(tenant, chat, scope="user:8/session:1", content=f"{MARKER} someone else's", subject="another-person")

    request = request_create(tenant=tenant, subject_ref=SUBJECT_REF, type="erasure", regulation="gdpr",
                             channel="email", contact_email=EMAIL, actor="api")
    request = request_verify_identity(request=request, actor="admin:operator-ann", method="signed-in account")
    run_to_end(request.pk)
    conflict = RetentionConflict.objects.filter(request=request, code="retention_lock").order_by("pk").first()
    conflict = conflict_uphold(conflict=conflict, actor="admin:legal-ann",
                               justification="=SEC 17a-4 keeps trade records for seven years")
    conflict.refresh_from_db()

    governed = rule(tenant, chat, days=30, authority="Policy 4 (chat)", mode="governance")
    governed = rule_change_duration(rule=governed, duration_days=60, actor="admin:legal-ann",
                                    justification="chat kept two months")
    hold = hold_place(tenant=tenant, matter="Roe v. Acme", authority="court order 26-cv-99",
                      subject=request.subject, actor="admin:legal-ann")
    hold = hold_release(hold=hold, actor="admin:legal-bob", reason="case settled")
    sweep_run_sync(kind="compaction", actor="test")

    other = Tenant.objects.create(name="globex")
    other_chat = ContentClass.objects.create(tenant=other, name="chat")
    theirs = record(other, other_chat, scope="user:9", content="their content", subject="their-person")
    other_request = request_create(tenant=other, subject_ref="their-person", type="access", regulation="ccpa",
                                   channel="api", actor="api")
    other_hold = hold_place(tenant=other, matter="Globex matter", authority="their court",
                            record_ids=[theirs.pk], actor="their-legal")
    return World(tenant=tenant, other=other, request=SubjectRequest.objects.get(pk=request.pk),
                 other_request=other_request, conflict=conflict, rule=governed, hold=hold, other_hold=other_hold)


@pytest.fixture
def world(db, mailoutbox):
    return world_make()


@pytest.fixture
def token_for():
    from rest_framework.test import APIClient

    def make(tenant_name: str, role: str) -> APIClient:
        _, key = token_issue(tenant_name=tenant_name, role=role)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def csv_rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body(response).decode())))


def json_doc(response) -> dict:
    return json.loads(body(response))
