"""Public tombstones carry nothing personal (DESIGN.md invariant 6): a forget by scope, tag or subject publishes
internal ids or a salted commitment, never the scope path, tag, subject reference, token or reason; the readable
form stays on the forget event (the tenant's private audit); the issuer refuses a statement that would leak,
whichever path built it; tombstones signed before (statement version 1) still verify."""
from __future__ import annotations

import base64
import json
import uuid

import pytest
from django.conf import settings
from django.db import transaction

from config.errors import ApplicationError
from dsr.models import Regulation, RequestType, SubjectRequest
from dsr.services.workflow import _authority
from memory.models import ApiToken, FleetCopyNotice, ForgetEvent, Record, Scope
from memory.services import ForgetTarget, records_forget
from memory.sweeps import sweep_run_sync
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import ContentClassFactory, record, rule
from tests.tombstones.factories import statement_make
from tombstones.canonical import canonical_json
from tombstones.models import Tombstone
from tombstones.services import receipt_build, tombstone_issue, tombstone_verify
from tombstones.services import issue as issue_module
from tombstones.services.statement import ADDED_FIELDS, statement_complete
from tombstones.verification import GENUINE, commitment_of
from tombstones.vocabulary import STATEMENT_VERSION, is_authority

pytestmark = pytest.mark.django_db

PERSONAL = "carol@example.com"


def published(client, tombstone_id: str) -> tuple[str, dict]:
    """The tombstone as anyone reads it at /api/v1/tombstones/{id}: the response text and the statement."""
    response = client.get(f"/api/v1/tombstones/{tombstone_id}")
    assert response.status_code == 200
    return response.content.decode(), json.loads(base64.b64decode(response.json()["payload"]))


def forget(agent, target: dict, reason: str = f"{PERSONAL} called and asked us") -> dict:
    answer = agent.post("/api/v1/memory/forget", {"target": target, "mode": "hard", "reason": reason}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["handle"]


@pytest.fixture
def token(agent) -> ApiToken:
    return ApiToken.objects.get(role="agent")


def test_a_forget_by_scope_publishes_the_scope_id_not_its_path(agent, tenant, chat, token, client):
    kept = record(tenant, chat, scope=f"user:{PERSONAL}/session:1", subject="s-1")
    handle = forget(agent, {"scope": f"user:{PERSONAL}"})

    text, statement = published(client, handle["tombstone_id"])

    assert "carol" not in text and token.prefix not in text and "called" not in text
    event = ForgetEvent.objects.get(pk=handle["sequence"])
    scope_id = str(Scope.objects.get(tenant=tenant, path=f"user:{PERSONAL}").pk)
    assert statement["scope"]["target"] == {"scope_id": scope_id}
    assert statement["request"] == {"actor": f"token:{token.pk}", "authority": "memory forget", "path": "api"}
    assert statement["version"] == STATEMENT_VERSION == 2
    # The readable form stays in the tenant's audit.
    assert (event.target["scope"], event.actor, event.reason) == (f"user:{PERSONAL}", f"token:{token.prefix}",
                                                                  f"{PERSONAL} called and asked us")
    assert [r["record_id"] for r in statement["execution"]["records"]] == [str(kept.pk)]


def test_a_forget_by_tag_publishes_a_salted_commitment_the_tenant_can_open(agent, tenant, chat, client):
    tag = f"patient-{PERSONAL}"
    record(tenant, chat, tags=[tag])
    handle = forget(agent, {"tag": tag})

    text, statement = published(client, handle["tombstone_id"])

    assert "carol" not in text
    event = ForgetEvent.objects.get(pk=handle["sequence"])
    assert event.target["tag"] == tag
    assert statement["scope"]["target"] == {"tag_commitment": commitment_of(tag, event.target["tag_salt"])}
    assert statement["scope"]["target"]["tag_commitment"] != commitment_of(tag, "00" * 16)


def test_a_forget_by_subject_publishes_subject_ids(agent, tenant, chat, client):
    kept = record(tenant, chat, subject=PERSONAL)
    handle = forget(agent, {"subject": PERSONAL})

    text, statement = published(client, handle["tombstone_id"])

    assert "carol" not in text
    assert statement["scope"]["target"] == {"subject_ids": [str(kept.subject_id)]}


@pytest.mark.parametrize("actor, path, public_actor, public_path", [
    ("cli:carol", "management_command", "system:management_command", "management_command"),
    ("system:queryset.delete", "queryset_delete", "system:queryset_delete", "queryset_delete"),
    ("request:12", "erasure_workflow", "request:12", "erasure_workflow"),
    ("operator:carol", "a path of a test", "system:unspecified", "other"),
])
def test_an_actor_or_path_given_in_no_public_form_is_published_as_a_named_one(tenant, chat, actor, path,
                                                                              public_actor, public_path):
    result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(record(tenant, chat).pk,)), mode="hard",
                            actor=actor, path=path, reason="free text")
    statement = json.loads(bytes(Tombstone.objects.get(pk=result.tombstone_id).payload))
    assert statement["request"] == {"actor": public_actor, "authority": "memory forget", "path": public_path}
    assert statement["execution"]["path"] == public_path
    assert (result.event.actor, result.event.path) == (actor, path)


@pytest.mark.parametrize("extra", [{"public_actor": "admin:carol"}, {"authority": "contract with Carol Smith"}])
def test_a_forget_whose_statement_would_name_someone_is_refused_and_changes_nothing(tenant, chat, extra):
    kept = record(tenant, chat)
    events = ForgetEvent.objects.count()
    with pytest.raises(ApplicationError) as refused, transaction.atomic():
        records_forget(tenant=tenant, target=ForgetTarget(record_ids=(kept.pk,)), mode="hard", actor="t", **extra)
    assert refused.value.code == "statement_invalid"
    assert Record.objects.filter(pk=kept.pk).exists() and ForgetEvent.objects.count() == events


def test_every_authority_a_subject_request_cites_is_in_the_vocabulary():
    for regulation in Regulation.values:
        for kind in RequestType.values:
            assert is_authority(_authority(SubjectRequest(regulation=regulation, type=kind))), (regulation, kind)


def test_no_path_publishes_a_name_a_reason_or_a_free_text_authority(agent, tenant, chat, client, mailoutbox,
                                                                     django_capture_on_commit_callbacks):
    """The API, a DSR workflow, a pact expiry (whose rule's authority names a person), compaction, a fleet copy's
    acknowledgement: every stored tombstone is a version 2 statement the schema accepts, with no personal text."""
    # A pact whose authority names a party, an agent's copy, a soft forget for compaction, a subject request
    notes = ContentClassFactory(tenant=tenant, name="notes")
    rule(tenant, notes, days=30, kind="pact", authority=f"pact with {PERSONAL}")
    record(tenant, notes, content="old note", age_days=40)
    source = record(tenant, chat, scope=f"user:{PERSONAL}/session:2", subject=PERSONAL,
                    content="copied")
    agent.post("/api/v1/memory/records", {"derived_from": [source.pk], "kind": "fleet_copy", "content": "copied",
                                          "holder": f"agent-of-{PERSONAL}"}, format="json")
    hidden = record(tenant, chat, subject=PERSONAL, tags=[PERSONAL])
    agent.post("/api/v1/memory/forget", {"target": {"tag": PERSONAL}, "mode": "soft", "reason": PERSONAL},
               format="json")
    forget(agent, {"scope": f"user:{PERSONAL}"})
    notice = FleetCopyNotice.objects.get()
    agent.post(f"/api/v1/memory/fleet-notices/{notice.pk}/ack")
    sweep_run_sync(kind="pact_expiry", actor="test")
    Record.objects.filter(pk=hidden.pk).update(forgotten_at=hidden.created_at)  # past the compaction grace
    with django_capture_on_commit_callbacks(execute=True):
        sweep_run_sync(kind="compaction", actor="test")
    request = verified_request(erasure_scenario(tenant_name=tenant.name, subject=f"subject-{PERSONAL}"),
                               subject=f"subject-{PERSONAL}")
    run_to_end(request.pk)

    paths = set()
    for tombstone in Tombstone.objects.all():
        payload = bytes(tombstone.payload)
        assert b"carol" not in payload, payload
        statement = json.loads(payload)
        assert statement["version"] == STATEMENT_VERSION
        statement_complete(tombstone_id=tombstone.pk, log_origin=settings.LEDGER_LOG_ORIGIN,
                           statement={k: v for k, v in statement.items() if k not in ADDED_FIELDS})
        paths.add(statement["request"]["path"])
    assert paths == {"api", "fleet_ack", "pact_expiry", "compaction", "erasure_workflow"}


def test_a_version_1_tombstone_signed_before_still_verifies_and_its_free_text_is_not_shown(tenant, monkeypatch):
    # Given a tombstone signed as version 1 statements were: a scope path, free text, a token's characters
    statement, salts = statement_make(["my old data"])
    statement["request"] = {"actor": "token:ab12cd34", "authority": f"asked by {PERSONAL}", "reason": "free text",
                            "path": "api"}
    statement["scope"] = {"target": {"scope": f"user:{PERSONAL}"}}

    def v1_payload(*, tombstone_id, statement, log_origin):
        completed = {**statement, "version": 1, "log_origin": log_origin, "tombstone_id": str(tombstone_id)}
        return canonical_json(completed), completed["execution"]["records"]

    monkeypatch.setattr(issue_module, "statement_payload", v1_payload)
    with transaction.atomic():
        old = tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.pk, statement=statement,
                              subject_salts=salts)
    monkeypatch.undo()

    # Then its receipt verifies, coverage included, and the page's summary does not repeat the free text
    receipt = receipt_build(tombstone_id=old.pk)
    report = tombstone_verify(document=receipt, content="my old data", salt=salts["1000"])
    assert report.code == GENUINE and report.coverage.covered
    assert report.summary["version"] == 1 and PERSONAL not in report.summary["authority"]
    assert report.summary["request_path"] == "api"
