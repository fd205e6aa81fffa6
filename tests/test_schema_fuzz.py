"""The whole OpenAPI schema, fuzzed in-process (schemathesis over the Django WSGI app, on the test database):
every operation, called with the token of the role that may call it, answers no 5xx and only what the
schema documents (status codes, bodies, content types).

Bounded and repeatable: a fixed seed, derandomized Hypothesis, a fixed number of examples per operation.
"""
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.config import SchemathesisConfig

from memory.services.tokens import token_issue
from retention.services import hold_place
from tests.factories import ContentClassFactory, TenantFactory, record, rule

EXAMPLES_PER_OPERATION = 40
CONFIG = {
    "seed": 19,
    "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True},
               "stateful": {"enabled": False}},
    "checks": {"enabled": False, "not_a_server_error": {"enabled": True},
               "status_code_conformance": {"enabled": True}, "content_type_conformance": {"enabled": True},
               "response_schema_conformance": {"enabled": True}},
}


def _role(path: str) -> str | None:
    """The role whose token an operation takes (public operations take none)."""
    if path.startswith("/api/v1/memory/"):
        return "agent"
    if path.startswith(("/api/v1/retention/", "/api/v1/holds")):
        return "legal"
    if path.startswith(("/api/v1/requests", "/api/v1/audit/")):
        return "operator"
    return None


@pytest.fixture
def tokens(db, settings):
    """A tenant with a little of everything, and a token for each role."""
    # Django's test client does this too: the end of a request must not close the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    settings.LEDGER_PUBLIC_API_RATE_LIMIT = 10**6
    tenant = TenantFactory(name="acme")
    chat = ContentClassFactory(tenant=tenant, name="chat")
    ContentClassFactory(tenant=tenant, name="notes")  # no rule: its records have no lock
    first = record(tenant, chat, content="hello world", subject="s-1", tags=["t"])
    record(tenant, chat, content="hello again", subject="s-2", scope="user:2")
    rule(tenant, chat, days=30)
    hold_place(tenant=tenant, matter="m", actor="test", record_ids=[first.pk])
    yield {role: token_issue(tenant_name="acme", role=role)[1] for role in ("agent", "legal", "operator")}
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


# The schema as the app serves it, loaded when the tests are collected (serving it needs no database).
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(),
                                         config=SchemathesisConfig.from_dict(CONFIG))


@schema.parametrize()
@hypothesis_settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_operation_answers_as_its_schema_documents(case, tokens):
    role = _role(case.path)
    headers = {"Authorization": f"Token {tokens[role]}"} if role else {}
    case.call_and_validate(headers=headers)


def test_answers_on_real_objects_match_the_schema(tokens):
    """Fuzzing seldom names an existing id: this walks every operation through its successful answers (and
    the documented refusals of real objects), each checked against the schema as the fuzzer checks."""

    def call(role, method, path, status, *, path_parameters=None, query=None, body=None):
        kwargs = {"path_parameters": path_parameters or {}, "query": query or {}}
        if body is not None:
            kwargs["body"] = body
        case = schema[path][method].Case(**kwargs)
        response = case.call_and_validate(headers={"Authorization": f"Token {tokens[role]}"} if role else {})
        assert response.status_code == status, response.text
        return response.json()

    # The agent writes, reads, searches, forgets and confirms.
    written = call("agent", "POST", "/api/v1/memory/records", 201, body={
        "scope": "user:42/session:7", "subject": "s-9", "content_class": "chat", "content": "journey",
        "tags": ["j"]})
    record_id = {"record_id": written["id"]}
    unlocked = call("agent", "POST", "/api/v1/memory/records", 201, body={
        "scope": "user:43", "content_class": "notes", "content": "no subject, no lock"})
    assert unlocked["subject"] is None and unlocked["locked_until"] is None
    call("agent", "POST", "/api/v1/memory/records", 201, body={
        "derived_from": [written["id"]], "kind": "fleet_copy", "content": "copy", "holder": "agent-b"})
    call("agent", "GET", "/api/v1/memory/records", 200, query={"scope": "user:42"})
    call("agent", "GET", "/api/v1/memory/records/{record_id}", 200, path_parameters=record_id)
    call("agent", "GET", "/api/v1/memory/records/{record_id}/artifacts", 200, path_parameters=record_id)
    for mode in ("keyword", "similar"):
        assert call("agent", "GET", "/api/v1/memory/search", 200, query={"q": "journey", "mode": mode})["results"]
    forgotten = call("agent", "POST", "/api/v1/memory/forget", 200, body={
        "target": {"record_id": written["id"]}, "mode": "soft", "reason": "asked"})
    call("agent", "GET", "/api/v1/memory/records/{record_id}", 410, path_parameters=record_id)
    call("agent", "POST", "/api/v1/memory/confirm-erasure", 409, body={"handle": forgotten["handle"]})
    notices = call("agent", "GET", "/api/v1/memory/fleet-notices", 200, query={"holder": "agent-b"})["results"]
    call("agent", "POST", "/api/v1/memory/fleet-notices/{notice_id}/ack", 200,
         path_parameters={"notice_id": notices[0]["id"]})
    held = call("agent", "GET", "/api/v1/memory/search", 200, query={"q": "hello world"})["results"][0]["record"]
    refused = call("agent", "POST", "/api/v1/memory/forget", 409, body={"target": {"record_id": held["id"]},
                                                                         "mode": "hard"})
    assert refused["status"] == "refused" and refused["results"][0]["reason"]["code"] == "legal_hold"

    # Legal's levers.
    call("legal", "GET", "/api/v1/retention/classes", 200)
    call("legal", "POST", "/api/v1/retention/classes", 201, body={"name": "ledger", "description": "trades"})
    call("legal", "POST", "/api/v1/retention/classes", 409, body={"name": "ledger"})
    call("legal", "GET", "/api/v1/retention/rules", 200)
    created = call("legal", "POST", "/api/v1/retention/rules", 201, body={
        "content_class": "ledger", "kind": "regulatory", "duration_days": 2555, "authority": "SEC 17a-4",
        "mode": "compliance", "protects": "content"})
    rule_id = {"rule_id": created["id"]}
    call("legal", "GET", "/api/v1/retention/rules/{rule_id}", 200, path_parameters=rule_id)
    call("legal", "PATCH", "/api/v1/retention/rules/{rule_id}", 200, path_parameters=rule_id,
         body={"duration_days": 3000, "justification": "longer"})
    call("legal", "PATCH", "/api/v1/retention/rules/{rule_id}", 409, path_parameters=rule_id,
         body={"duration_days": 10, "justification": "shorter"})
    call("legal", "POST", "/api/v1/retention/rules/{rule_id}/retire", 409, path_parameters=rule_id,
         body={"justification": "no"})
    governance = call("legal", "POST", "/api/v1/retention/rules", 201, body={
        "content_class": "chat", "kind": "pact", "duration_days": 90, "authority": "pact 7"})
    call("legal", "POST", "/api/v1/retention/rules/{rule_id}/retire", 200,
         path_parameters={"rule_id": governance["id"]}, body={"justification": "ended"})
    call("legal", "GET", "/api/v1/holds", 200)
    hold = call("legal", "POST", "/api/v1/holds", 201, body={"matter": "case 1", "authority": "court",
                                                             "subject": "s-2"})
    call("legal", "POST", "/api/v1/holds/{hold_id}/release", 200, path_parameters={"hold_id": hold["id"]},
         body={"reason": "settled"})
    call("legal", "POST", "/api/v1/holds/{hold_id}/release", 409, path_parameters={"hold_id": hold["id"]},
         body={"reason": "again"})

    # The operator's subject requests.
    received = call("operator", "POST", "/api/v1/requests", 201, body={
        "subject": "s-2", "type": "erasure", "regulation": "gdpr", "channel": "email",
        "received_at": "2026-01-05T09:30:00+01:00", "contact_email": "s2@example.com"})
    request_id = {"request_id": received["id"]}
    call("operator", "GET", "/api/v1/requests/{request_id}", 200, path_parameters=request_id)
    call("operator", "POST", "/api/v1/requests/{request_id}/start", 409, path_parameters=request_id, body={})
    call("operator", "POST", "/api/v1/requests/{request_id}/verify-identity", 200, path_parameters=request_id,
         body={"method": "passport"})
    call("operator", "POST", "/api/v1/requests/{request_id}/reject-identity", 409, path_parameters=request_id,
         body={"reason": "too late"})
    call("operator", "POST", "/api/v1/requests/{request_id}/start", 200, path_parameters=request_id, body={})
    call("operator", "GET", "/api/v1/requests/{request_id}/export", 404, path_parameters=request_id)
    other = call("operator", "POST", "/api/v1/requests", 201, body={
        "subject": "s-1", "type": "access", "regulation": "ccpa", "channel": "api",
        "contact_email": "s1@example.com"})
    call("operator", "POST", "/api/v1/requests/{request_id}/extend", 200, path_parameters={"request_id": other["id"]},
         body={"reason": "many systems"})
    call("operator", "POST", "/api/v1/requests/{request_id}/reject-identity", 200,
         path_parameters={"request_id": other["id"]}, body={"reason": "no match"})

    # The public log.
    tombstone_id = forgotten["handle"]["tombstone_id"]
    call(None, "GET", "/.well-known/tombstone-keys.json", 200)
    call(None, "GET", "/api/v1/log/checkpoint", 200)
    call(None, "GET", "/api/v1/tombstones/{tombstone_id}", 200, path_parameters={"tombstone_id": tombstone_id})
    call(None, "GET", "/api/v1/log/inclusion", 200, query={"tombstone_id": tombstone_id})
    call(None, "GET", "/api/v1/log/consistency", 200, query={"first": 1})
