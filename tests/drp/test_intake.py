"""DRP intake: discovery, exercise, status, revoke, key setup. Every answer is validated against the DRP 0.9.4
schemas (schemas/), and every accepted request against the spec's exercise schema."""
import pytest
from django.core.management import call_command

from drp.models import Agent, DataRightsRequest
from dsr.models import RequestTransition, SubjectRequest
from memory.auth import token_hash
from tests.drp.conftest import AgentKeys, assert_valid, exercise, is_valid, stamp

pytestmark = pytest.mark.django_db


def test_discovery_document_is_the_spec_business_entry_and_public(client):
    response = client.get("/.well-known/data-rights.json")
    assert response.status_code == 200
    document = response.json()
    assert_valid(document, "business")
    assert document["supported_actions"] == ["deletion", "access"]
    assert document["drp.version"] == "0.9.4" and document["api_base"] == "http://testserver"


def test_deletion_exercise_becomes_a_received_erasure_request_through_dsr(drp, tenant):
    message = exercise(agent_id="AGENT_A", **{"agent-request-id": "aa-1"})
    assert is_valid(message, "exercise-request")

    response = drp.post(message)

    assert response.status_code == 200, response.content
    status = response.json()
    assert_valid(status, "exercise-status")
    assert status["status"] == "in_progress" and "reason" not in status and status["agent_request_id"] == "aa-1"
    row = DataRightsRequest.objects.get(request_id=status["request_id"])
    sr = row.subject_request
    assert (sr.tenant, sr.type, sr.regulation, sr.channel, sr.status, sr.subject.ref, sr.contact_email) == (
        tenant, "erasure", "ccpa", "api", "received", "cust-1001", "ann@example.org")
    assert status["expected_by"] == f"{sr.due_date.isoformat()}T23:59:59Z"
    # the identity claims are evidence for the operator, never a verification, and no value is kept
    assert sr.identity_verified_at is None
    assert row.claims == {"email": "verified", "phone_number": "unverified", "name": "given"}
    history = list(RequestTransition.objects.filter(request=sr).values_list("action", "actor", "note"))
    assert [h[:2] for h in history] == [("received", "drp:AGENT_A"), ("drp_identity_claims", "drp:AGENT_A")]
    assert "email (verified)" in history[1][2]
    stored = str(list(DataRightsRequest.objects.values())) + str(history)
    assert "+14155550100" not in stored and "Ann Example" not in stored and "ann@example.org" not in stored


def test_subject_ref_is_normalized_as_dsr_does(drp):
    status = drp.create(subject_ref="  cust-1001 \t")
    other = drp.create(subject_ref="cust-1001", **{"agent-request-id": "x"})
    rows = DataRightsRequest.objects.filter(request_id__in=[status["request_id"], other["request_id"]])
    assert {r.subject_request.subject_id for r in rows} == {rows[0].subject_request.subject_id}


def test_access_exercise_becomes_an_access_request_without_regime_as_voluntary(drp):
    status = drp.create(exercise="access", regime=...)
    sr = DataRightsRequest.objects.get(request_id=status["request_id"]).subject_request
    assert (sr.type, sr.regulation) == ("access", "other")


@pytest.mark.parametrize("right", ["sale:opt_out", "sale:opt_in", "sale:opt-out", "access:categories",
                                   "access:specific"])
def test_right_not_fulfilled_here_is_denied_claim_not_covered_and_creates_no_subject_request(drp, right):
    status = drp.create(exercise=right)
    assert (status["status"], status["reason"]) == ("denied", "claim_not_covered") and status["processing_details"]
    assert SubjectRequest.objects.count() == 0
    assert drp.status(status["request_id"]) == status


def test_exercise_without_subject_ref_is_denied_no_match_and_keeps_nothing_personal(drp):
    status = drp.create(subject_ref=...)
    assert (status["status"], status["reason"]) == ("denied", "no_match")
    assert SubjectRequest.objects.count() == 0
    assert "ann@example.org" not in str(list(DataRightsRequest.objects.values()))


def test_trailing_slash_of_older_versions_is_accepted(drp):
    response = drp.post(exercise(), url="/v1/data-rights-request/")
    assert response.status_code == 200, response.content


def test_status_is_only_for_the_agent_that_made_the_request(drp, other_drp, foreign_drp):
    status = drp.create()
    for other in (other_drp, foreign_drp):
        response = other.client.get(f"/v1/data-rights-request/{status['request_id']}")
        assert response.status_code == 403
        assert_valid(response.json(), "error")
        assert response.json()["error"] == "not_your_request"


def test_revoke_closes_the_subject_request_and_answers_revoked(drp):
    status = drp.create()
    assert is_valid({"reason": "I changed my mind"}, "revoke-request")

    response = drp.revoke(status["request_id"])

    assert response.status_code == 200, response.content
    assert_valid(response.json(), "exercise-status")
    assert response.json()["status"] == "revoked"
    sr = DataRightsRequest.objects.get(request_id=status["request_id"]).subject_request
    assert sr.status == "closed" and sr.closing_reason == "Revoked by authorized agent AGENT_A: I changed my mind"
    assert drp.status(status["request_id"])["status"] == "revoked"
    again = drp.revoke(status["request_id"])
    assert again.status_code == 409 and again.json()["error"] == "already_revoked"


def test_revoke_signed_with_another_key_is_refused_and_changes_nothing(drp):
    status = drp.create()
    response = drp.revoke(status["request_id"], keys=AgentKeys())
    assert response.status_code == 403 and response.json()["error"] == "invalid_signature"
    assert drp.status(status["request_id"])["status"] == "in_progress"


def test_key_setup_issues_a_new_token_and_the_old_one_stops_working(drp):
    message = {"agent-id": "AGENT_A", "business-id": "FORGETTING_LEDGER", "issued-at": stamp(seconds=-1),
               "expires-at": stamp(minutes=5), "drp.version": "0.9.4"}
    assert is_valid(message, "agent-setup-request")
    old = drp.client.get("/v1/agent/AGENT_A")
    assert old.status_code == 200 and old.json() == {}

    response = drp.client.generic("POST", "/v1/agent/AGENT_A", drp.keys.sign(message), content_type="text/plain",
                                  HTTP_AUTHORIZATION="")

    assert response.status_code == 200, response.content
    assert_valid(response.json(), "agent-setup-response")
    assert response.json()["agent-id"] == "AGENT_A"
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 401
    drp.client.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 200
    assert drp.client.get("/v1/agent/AGENT_B").status_code == 403
    # the same setup message, captured and sent again, mints nothing
    replay = drp.client.generic("POST", "/v1/agent/AGENT_A", drp.keys.sign(message), content_type="text/plain")
    assert replay.status_code == 403 and replay.json()["error"] == "replayed_request"
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 200


def test_key_setup_signed_with_another_key_is_forbidden(drp):
    message = {"agent-id": "AGENT_A", "business-id": "FORGETTING_LEDGER", "issued-at": stamp(seconds=-1),
               "expires-at": stamp(minutes=5), "drp.version": "0.9.4"}
    response = drp.client.generic("POST", "/v1/agent/AGENT_A", AgentKeys().sign(message), content_type="text/plain")
    assert response.status_code == 403 and response.json()["error"] == "invalid_signature"
    assert_valid(response.json(), "error")
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 200


def test_register_command_prints_the_token_once_and_keeps_only_its_hash(tenant, capsys):
    keys = AgentKeys()
    call_command("drp_agent_register", "--tenant", "acme", "--agent-id", "CMD_AGENT", "--verify-key", keys.verify_key)
    token = capsys.readouterr().out.strip()
    agent = Agent.objects.get(agent_id="CMD_AGENT")
    assert agent.tenant == tenant and agent.token_hash == token_hash(token) and token not in str(vars(agent))
    assert agent.business_id == "FORGETTING_LEDGER" and agent.active


def test_register_command_refuses_a_bad_verify_key(tenant):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="invalid_verify_key"):
        call_command("drp_agent_register", "--tenant", "acme", "--agent-id", "CMD_AGENT", "--verify-key", "nope")
    assert not Agent.objects.exists()


def test_admin_registers_an_agent_and_shows_its_token_once(admin_client, tenant):
    keys = AgentKeys()
    form = {"agent_id": "ADMIN_AGENT", "tenant": tenant.pk, "business_id": "", "name": "Agent from the admin",
            "verify_key": keys.verify_key, "active": "on"}

    response = admin_client.post("/admin/drp/agent/add/", form, follow=True)

    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"] if "shown once" in str(m)]
    assert len(shown) == 1
    token = shown[0].rsplit(": ", 1)[1]
    agent = Agent.objects.get(agent_id="ADMIN_AGENT")
    assert agent.token_hash == token_hash(token) and agent.business_id == "FORGETTING_LEDGER"
    page = admin_client.get(f"/admin/drp/agent/{agent.pk}/change/")
    assert page.status_code == 200 and token.encode() not in page.content


def test_admin_refuses_a_bad_verify_key_as_a_form_error(admin_client, tenant):
    form = {"agent_id": "ADMIN_AGENT", "tenant": tenant.pk, "business_id": "", "verify_key": "bm9wZQ==",
            "active": "on"}
    response = admin_client.post("/admin/drp/agent/add/", form)
    assert response.status_code == 200 and b"verify_key must be a base64 Ed25519" in response.content
    assert not Agent.objects.exists()


def test_status_reads_a_bounded_number_of_queries(drp, django_assert_max_num_queries):
    status = drp.create()
    with django_assert_max_num_queries(3):  # the token's agent, the request with its subject request, the history
        drp.status(status["request_id"])


def test_a_denied_request_cannot_be_revoked(drp):
    status = drp.create(exercise="sale:opt_out")
    response = drp.revoke(status["request_id"])
    assert response.status_code == 409 and response.json()["error"] == "not_revocable"
    assert drp.status(status["request_id"])["status"] == "denied"
