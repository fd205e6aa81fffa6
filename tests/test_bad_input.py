"""Bad input to every endpoint gets a 4xx with a stable code and changes nothing; tenants cannot see or
forget each other's records."""
import json

import pytest
from django.db.models import Max

from config.parsers import MAX_DEPTH
from dsr.models import RequestTransition, SubjectRequest
from dsr.services import request_create
from memory.models import DerivedArtifact, FleetCopyNotice, ForgetEvent, Record, RecordTag, Scope, Subject
from retention.models import ContentClass, LegalHold, RetentionRule, RetentionTableVersion
from retention.services import hold_place
from tests.factories import record, rule

FIVE_MB = "x" * (5 * 1024 * 1024)


def snapshot():
    """Everything a bad request could have changed."""
    return (
        list(Record.objects.order_by("pk").values_list("pk", "content", "forgotten_at", "redacted_at", "held",
                                                       "retained_until")),
        DerivedArtifact.objects.count(), ForgetEvent.objects.count(), Scope.objects.count(), Subject.objects.count(),
        ContentClass.objects.count(), RetentionRule.objects.count(), LegalHold.objects.filter(released_at=None).count(),
        RetentionTableVersion.objects.aggregate(n=Max("number"))["n"],
        list(RetentionRule.objects.order_by("pk").values_list("pk", "duration_days", "retired_at")),
        list(LegalHold.objects.order_by("pk").values_list("pk", "released_at")),
        list(SubjectRequest.objects.order_by("pk").values_list("pk", "status", "extended_due_date")),
        RequestTransition.objects.count(), RecordTag.objects.count(),
        list(FleetCopyNotice.objects.order_by("pk").values_list("pk", "acknowledged_at")),
    )


@pytest.fixture
def world(tenant, other_tenant, chat):
    mine = record(tenant, chat, content="mine", subject="s-1")
    other_class = ContentClass.objects.create(tenant=other_tenant, name="chat")
    theirs = record(other_tenant, other_class, content="theirs", subject="s-2", scope="user:9")
    hold = LegalHold.objects.create(tenant=other_tenant, matter="their matter", placed_by="x",
                                    placed_at=theirs.created_at, subject=theirs.subject)
    return {"mine": mine, "theirs": theirs, "their_hold": hold}


def post(client, url, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.generic("POST", url, raw, content_type="application/json")


AGENT_POSTS = [
    ("/api/v1/memory/records", {"scope": 5, "content_class": "chat", "content": "x"}, 400, "invalid"),
    ("/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": 123}, 400, "invalid"),
    ("/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": "x", "tags": "a"}, 400, "invalid"),
    ("/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": "x", "bogus": 1}, 400, "invalid"),
    ("/api/v1/memory/records", {"scope": "../etc", "content_class": "chat", "content": "x"}, 400, "invalid_scope"),
    ("/api/v1/memory/records", {"scope": "user:1", "content_class": "nope", "content": "x"}, 400,
     "unknown_content_class"),
    ("/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": "x", "tier": "lukewarm"}, 400,
     "invalid"),
    ("/api/v1/memory/records", {"derived_from": ["1"], "kind": "summary", "content": "x"}, 400, "invalid"),
    ("/api/v1/memory/records", {"derived_from": [1], "content": "x"}, 400, "invalid"),
    ("/api/v1/memory/records", {"derived_from": [10**12], "kind": "summary", "content": "x"}, 404, "not_found"),
    ("/api/v1/memory/records", {"tenant": "globex", "scope": "user:1", "content_class": "chat", "content": "x"}, 403,
     "tenant_mismatch"),
    ("/api/v1/memory/records", [1, 2], 400, "invalid"),
    ("/api/v1/memory/records", "{not json", 400, "malformed_json"),
    ("/api/v1/memory/forget", {"target": {"record_id": "1"}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"record_id": True}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"record_id": 1, "scope": "user:1"}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": [1], "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"record_id": list(range(1, 10_002))}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"record_id": 10**30}, "mode": "hard"}, 404, "not_found"),
    ("/api/v1/memory/forget", {"target": {"scope": "user:404"}, "mode": "hard"}, 404, "not_found"),
    ("/api/v1/memory/forget", {"target": {"scope": "user 1"}, "mode": "hard"}, 400, "invalid_scope"),
    ("/api/v1/memory/forget", {"target": {"subject": "nobody"}, "mode": "hard"}, 404, "not_found"),
    ("/api/v1/memory/forget", {"target": {"subject": 7}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"tag": ""}, "mode": "hard"}, 400, "invalid_target"),
    ("/api/v1/memory/forget", {"target": {"record_id": 1}, "mode": "shred"}, 400, "invalid"),
    ("/api/v1/memory/forget", {"target": {"record_id": 1}}, 400, "invalid"),
    ("/api/v1/memory/forget", {"target": {"record_id": 1}, "mode": "hard", "reason": 5}, 400, "invalid"),
    ("/api/v1/memory/confirm-erasure", {"handle": "7"}, 400, "invalid_handle"),
    ("/api/v1/memory/confirm-erasure", {"handle": {"sequence": "7"}}, 400, "invalid_handle"),
    ("/api/v1/memory/confirm-erasure", {"handle": {"sequence": 10**9}}, 404, "not_found"),
    ("/api/v1/memory/confirm-erasure", {"handle": {"tombstone_id": "not-a-uuid"}}, 400, "invalid_handle"),
    ("/api/v1/memory/confirm-erasure", {}, 400, "invalid"),
]


@pytest.mark.parametrize("url,body,status,code", AGENT_POSTS)
def test_bad_agent_post_gets_a_stable_4xx_and_changes_nothing(agent, world, url, body, status, code):
    before = snapshot()
    target = body.get("target") if isinstance(body, dict) else None
    if target == {"record_id": 1} and type(target["record_id"]) is int:
        body = {**body, "target": {"record_id": world["mine"].pk}}
    response = post(agent, url, body)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize("url", ["/api/v1/memory/records", "/api/v1/memory/forget", "/api/v1/memory/confirm-erasure",
                                 "/api/v1/retention/classes", "/api/v1/holds"])
def test_five_megabyte_body_is_refused_with_413(agent, legal, world, url):
    before = snapshot()
    client = legal if "memory" not in url else agent
    response = post(client, url, {"content": FIVE_MB, "scope": "user:1", "content_class": "chat"})
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
    assert snapshot() == before


AGENT_GETS = [
    ("/api/v1/memory/records/99999999", 404, "not_found"),
    ("/api/v1/memory/records/99999999999999999999999", 404, "not_found"),
    ("/api/v1/memory/records", 400, "invalid_parameter"),
    ("/api/v1/memory/records?scope=user:1&limit=abc", 400, "invalid_parameter"),
    ("/api/v1/memory/records?scope=user:1&limit=100000", 400, "invalid_limit"),
    ("/api/v1/memory/records?scope=user:404", 404, "not_found"),
    ("/api/v1/memory/search", 400, "invalid_parameter"),
    ("/api/v1/memory/search?q=", 400, "invalid_query"),
    ("/api/v1/memory/search?q=" + "a" * 1001, 400, "invalid_query"),
    ("/api/v1/memory/search?q=hi&mode=telepathy", 400, "invalid_parameter"),
    ("/api/v1/memory/records/99999999/artifacts", 404, "not_found"),
    ("/api/v1/no-such-endpoint", 404, "not_found"),
]


@pytest.mark.parametrize("url,status,code", AGENT_GETS)
def test_bad_agent_get_gets_a_stable_4xx(agent, world, url, status, code):
    response = agent.get(url)
    assert (response.status_code, response.json()["code"]) == (status, code)


def test_tenants_cannot_see_or_forget_each_others_records(agent, world):
    theirs = world["theirs"]
    before = snapshot()
    assert agent.get(f"/api/v1/memory/records/{theirs.pk}").status_code == 404
    assert agent.get(f"/api/v1/memory/records/{theirs.pk}/artifacts").status_code == 404
    assert agent.get("/api/v1/memory/records", {"scope": "user:9"}).status_code == 404
    assert agent.get("/api/v1/memory/search", {"q": "theirs"}).json()["results"] == []
    similar = agent.get("/api/v1/memory/search", {"q": "theirs", "mode": "similar"}).json()["results"]
    assert theirs.pk not in [hit["record"]["id"] for hit in similar]
    for mode in ("soft", "redact", "hard"):
        response = post(agent, "/api/v1/memory/forget", {"target": {"record_id": theirs.pk}, "mode": mode})
        assert (response.status_code, response.json()["code"]) == (404, "not_found")
    response = post(agent, "/api/v1/memory/forget", {"target": {"record_id": [world["mine"].pk, theirs.pk]},
                                                      "mode": "hard"})
    assert response.status_code == 404
    response = post(agent, "/api/v1/memory/records", {"derived_from": [theirs.pk], "kind": "summary", "content": "x"})
    assert response.status_code == 404
    assert snapshot() == before


def test_another_tenants_forget_handle_is_not_found(agent, api_client_for, world):
    other = api_client_for("globex", "agent")
    handle = post(other, "/api/v1/memory/forget", {"target": {"record_id": world["theirs"].pk}, "mode": "soft"}).json()[
        "handle"]
    response = post(agent, "/api/v1/memory/confirm-erasure", {"handle": handle})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_missing_or_wrong_token_is_401_and_wrong_role_is_403(client, agent, legal, world):
    assert client.get("/api/v1/memory/records/1").json()["code"] == "not_authenticated"
    response = client.get("/api/v1/memory/records/1", HTTP_AUTHORIZATION="Token nope")
    assert (response.status_code, response.json()["code"]) == (401, "authentication_failed")
    assert legal.get(f"/api/v1/memory/records/{world['mine'].pk}").status_code == 403
    response = post(agent, "/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": 1,
                                                       "authority": "x"})
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


LEGAL_POSTS = [
    ("/api/v1/retention/classes", {"name": 5}, 400, "invalid"),
    ("/api/v1/retention/classes", {"name": "chat"}, 409, "duplicate_content_class"),
    ("/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": "90", "authority": "x"},
     400, "invalid"),
    ("/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": -1, "authority": "x"},
     400, "invalid"),
    ("/api/v1/retention/rules", {"content_class": "chat", "kind": "whim", "duration_days": 9, "authority": "x"},
     400, "invalid"),
    ("/api/v1/retention/rules", {"content_class": "nope", "kind": "pact", "duration_days": 9, "authority": "x"},
     400, "unknown_content_class"),
    ("/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": 9, "authority": " "},
     400, "invalid"),
    ("/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": 9, "authority": "x",
                                 "mode": "sometimes"}, 400, "invalid"),
    ("/api/v1/holds", {"matter": "m"}, 400, "invalid_hold_target"),
    ("/api/v1/holds", {"matter": "m", "subject": "s-1", "content_class": "chat"}, 400, "invalid_hold_target"),
    ("/api/v1/holds", {"matter": "m", "subject": "s-2"}, 404, "not_found"),
    ("/api/v1/holds", {"matter": "m", "record_ids": ["1"]}, 400, "invalid"),
    ("/api/v1/holds", {"matter": "m", "record_ids": []}, 400, "invalid"),
    ("/api/v1/holds", {"matter": "m", "scope": "user:9"}, 404, "not_found"),
    ("/api/v1/holds", {"matter": "", "subject": "s-1"}, 400, "invalid"),
    ("/api/v1/holds/999999/release", {"reason": "x"}, 404, "not_found"),
    ("/api/v1/holds/1/release", {}, 400, "invalid"),
    ("/api/v1/retention/rules/999999", {"duration_days": 5, "justification": "x"}, 404, "not_found"),
]


@pytest.mark.parametrize("url,body,status,code", LEGAL_POSTS)
def test_bad_legal_post_gets_a_stable_4xx_and_changes_nothing(legal, world, url, body, status, code):
    before = snapshot()
    if url == "/api/v1/holds/1/release":
        url = f"/api/v1/holds/{world['their_hold'].pk}/release"
        status, code = 404, "not_found"
    method = "PATCH" if url.startswith("/api/v1/retention/rules/") else "POST"
    response = legal.generic(method, url, json.dumps(body), content_type="application/json")
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert snapshot() == before


def test_legal_cannot_hold_or_release_another_tenants_records(legal, world):
    before = snapshot()
    response = post(legal, "/api/v1/holds", {"matter": "m", "record_ids": [world["theirs"].pk]})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    response = post(legal, f"/api/v1/holds/{world['their_hold'].pk}/release", {"reason": "x"})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert snapshot() == before


# --- Input that PostgreSQL, Python's stack or its datetime cannot hold: a 4xx, never a 500 -----------------

@pytest.fixture
def operator(tenant, api_client_for):
    return api_client_for(tenant.name, "operator")


@pytest.fixture
def own(world, tenant, chat):
    """One of each thing an endpoint's path names, in the caller's tenant: a rule, a hold, a subject request."""
    return {
        "mine": world["mine"].pk,
        "rule": rule(tenant, chat, days=30).pk,
        "hold": hold_place(tenant=tenant, matter="m", actor="test", record_ids=[world["mine"].pk]).pk,
        "request": request_create(tenant=tenant, subject_ref="s-1", type="erasure", regulation="gdpr",
                                  channel="email", actor="test").pk,
    }


def send(clients, role, method, url, own, raw: str):
    client = clients[role]
    return client.generic(method, url.format(**own), raw, content_type="application/json")


@pytest.fixture
def clients(agent, legal, operator):
    return {"agent": agent, "legal": legal, "operator": operator}


# Every endpoint that reads a JSON body, with the role that may call it.
JSON_ENDPOINTS = [
    ("agent", "POST", "/api/v1/memory/records"),
    ("agent", "POST", "/api/v1/memory/forget"),
    ("agent", "POST", "/api/v1/memory/confirm-erasure"),
    ("legal", "POST", "/api/v1/retention/classes"),
    ("legal", "POST", "/api/v1/retention/rules"),
    ("legal", "PATCH", "/api/v1/retention/rules/{rule}"),
    ("legal", "POST", "/api/v1/retention/rules/{rule}/retire"),
    ("legal", "POST", "/api/v1/holds"),
    ("legal", "POST", "/api/v1/holds/{hold}/release"),
    ("operator", "POST", "/api/v1/requests"),
    ("operator", "POST", "/api/v1/requests/{request}/verify-identity"),
    ("operator", "POST", "/api/v1/requests/{request}/reject-identity"),
    ("operator", "POST", "/api/v1/requests/{request}/extend"),
    ("operator", "POST", "/api/v1/requests/{request}/start"),
]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
@pytest.mark.parametrize("role,method,url", JSON_ENDPOINTS)
def test_deeply_nested_json_is_malformed_json_and_changes_nothing(clients, own, role, method, url, depth):
    before = snapshot()
    for raw in ("[" * depth + "]" * depth, '{"a": ' * depth + "1" + "}" * depth):
        response = send(clients, role, method, url, own, raw)
        assert (response.status_code, response.json()["code"]) == (400, "malformed_json"), response.json()
    assert snapshot() == before


def test_json_nested_to_the_limit_reaches_the_view(agent, own):
    nested = json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    response = post(agent, "/api/v1/memory/confirm-erasure", {"handle": nested})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_handle")


NUL, SURROGATE = "a\x00b", "a\ud800b"

# A NUL (or a lone surrogate) in each string a JSON body carries, and where `errors` says it is.
UNSTORABLE_BODIES = [
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"subject": NUL}, "mode": "hard"}, ["target", "subject"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"subject": ["s-1", NUL]}, "mode": "hard"},
     ["target", "subject", "1"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"tag": NUL}, "mode": "hard"}, ["target", "tag"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"subject": SURROGATE}, "mode": "hard"},
     ["target", "subject"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"tag": SURROGATE}, "mode": "hard"}, ["target", "tag"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"scope": "user:1" + NUL}, "mode": "hard"},
     ["target", "scope"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {NUL: 1}, "mode": "hard"}, ["target"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"record_id": 1}, "mode": "hard", "reason": NUL},
     ["reason"]),
    ("agent", "POST", "/api/v1/memory/forget", {"target": {"record_id": 1}, "mode": NUL}, ["mode"]),
    ("agent", "POST", "/api/v1/memory/confirm-erasure", {"handle": {"tombstone_id": NUL}}, ["handle", "tombstone_id"]),
    ("agent", "POST", "/api/v1/memory/confirm-erasure", {"handle": {"tombstone_id": SURROGATE}},
     ["handle", "tombstone_id"]),
    ("agent", "POST", "/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": NUL},
     ["content"]),
    ("agent", "POST", "/api/v1/memory/records", {"scope": NUL, "content_class": "chat", "content": "x"}, ["scope"]),
    ("agent", "POST", "/api/v1/memory/records", {"scope": "user:1", "subject": NUL, "content_class": "chat",
                                                  "content": "x"}, ["subject"]),
    ("agent", "POST", "/api/v1/memory/records", {"scope": "user:1", "content_class": NUL, "content": "x"},
     ["content_class"]),
    ("agent", "POST", "/api/v1/memory/records", {"scope": "user:1", "content_class": "chat", "content": "x",
                                                  "tags": ["ok", NUL]}, ["tags", "1"]),
    ("agent", "POST", "/api/v1/memory/records", {"tenant": NUL, "scope": "user:1", "content_class": "chat",
                                                  "content": "x"}, ["tenant"]),
    ("agent", "POST", "/api/v1/memory/records", {"derived_from": [1], "kind": "fleet_copy", "content": "x",
                                                  "holder": NUL}, ["holder"]),
    ("legal", "POST", "/api/v1/retention/classes", {"name": NUL}, ["name"]),
    ("legal", "POST", "/api/v1/retention/classes", {"name": "n", "description": NUL}, ["description"]),
    ("legal", "POST", "/api/v1/retention/rules", {"content_class": NUL, "kind": "pact", "duration_days": 9,
                                                   "authority": "x"}, ["content_class"]),
    ("legal", "POST", "/api/v1/retention/rules", {"content_class": "chat", "kind": "pact", "duration_days": 9,
                                                   "authority": NUL}, ["authority"]),
    ("legal", "PATCH", "/api/v1/retention/rules/{rule}", {"duration_days": 40, "justification": NUL},
     ["justification"]),
    ("legal", "POST", "/api/v1/retention/rules/{rule}/retire", {"justification": NUL}, ["justification"]),
    ("legal", "POST", "/api/v1/holds", {"matter": NUL, "subject": "s-1"}, ["matter"]),
    ("legal", "POST", "/api/v1/holds", {"matter": "m", "authority": NUL, "subject": "s-1"}, ["authority"]),
    ("legal", "POST", "/api/v1/holds", {"matter": "m", "subject": NUL}, ["subject"]),
    ("legal", "POST", "/api/v1/holds", {"matter": "m", "scope": NUL}, ["scope"]),
    ("legal", "POST", "/api/v1/holds", {"matter": "m", "content_class": NUL}, ["content_class"]),
    ("legal", "POST", "/api/v1/holds/{hold}/release", {"reason": NUL}, ["reason"]),
    ("operator", "POST", "/api/v1/requests", {"subject": NUL, "type": "erasure", "regulation": "gdpr",
                                              "channel": "email"}, ["subject"]),
    ("operator", "POST", "/api/v1/requests", {"subject": "s", "type": "erasure", "regulation": "gdpr",
                                              "channel": "email", "contact_email": "a\x00@example.com"},
     ["contact_email"]),
    ("operator", "POST", "/api/v1/requests", {"subject": "s", "type": "erasure", "regulation": "gdpr",
                                              "channel": "email", "received_at": "2025-01-01T00:00:00Z\x00"},
     ["received_at"]),
    ("operator", "POST", "/api/v1/requests/{request}/verify-identity", {"method": NUL}, ["method"]),
    ("operator", "POST", "/api/v1/requests/{request}/reject-identity", {"reason": NUL}, ["reason"]),
    ("operator", "POST", "/api/v1/requests/{request}/extend", {"reason": NUL}, ["reason"]),
]


@pytest.mark.parametrize("role,method,url,body,where", UNSTORABLE_BODIES)
def test_nul_or_surrogate_in_a_body_string_is_invalid_and_changes_nothing(clients, own, role, method, url, body,
                                                                          where):
    before = snapshot()
    if body.get("target") == {"record_id": 1}:
        body = {**body, "target": {"record_id": own["mine"]}}
    if body.get("derived_from") == [1]:
        body = {**body, "derived_from": [own["mine"]]}
    response = send(clients, role, method, url, own, json.dumps(body))
    assert (response.status_code, response.json()["code"]) == (400, "invalid"), response.json()
    errors = response.json()["errors"]
    for key in where:
        errors = errors[key]
    assert errors and all(isinstance(message, str) for message in errors)
    assert snapshot() == before


@pytest.mark.parametrize("url,parameter", [
    ("/api/v1/memory/fleet-notices?holder=a%00b", "holder"),
    ("/api/v1/memory/search?q=a%00b", "q"),
    ("/api/v1/memory/search?q=a%00b&mode=keyword", "q"),
    ("/api/v1/memory/search?q=a%00b&mode=similar", "q"),
    ("/api/v1/memory/search?q=hello&mode=%00", "mode"),
    ("/api/v1/memory/records?scope=user:1%00", "scope"),
    ("/api/v1/memory/records?scope=user:1&after=1%00", "after"),
    ("/api/v1/memory/search?q=hello&a%00=1", "a"),
])
def test_nul_in_a_query_parameter_is_invalid_parameter(agent, world, url, parameter):
    before = snapshot()
    response = agent.get(url)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_parameter"), response.json()
    assert response.json()["parameter"] == parameter
    assert snapshot() == before


def test_nul_in_a_public_query_is_refused_without_a_token(client, db):
    response = client.get("/api/v1/log/inclusion", {"tombstone_id": "a\x00b"})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_parameter")


def test_nul_in_the_admin_search_box_is_refused_not_a_server_error(admin_client, world):
    response = admin_client.get("/admin/memory/record/", {"q": "a\x00b"})
    assert (response.status_code, response.json()["parameter"]) == (400, "q")


@pytest.mark.parametrize("received_at", [
    "0001-01-01T00:00:00+14:00",         # a day before year 1 in UTC: datetime overflows
    "0001-01-01T13:59:59.999999+14:00",
])
def test_received_at_before_year_one_in_utc_is_invalid_received_at(operator, world, received_at):
    before = snapshot()
    response = post(operator, "/api/v1/requests", {"subject": "s-9", "type": "erasure", "regulation": "gdpr",
                                                   "channel": "email", "received_at": received_at})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_received_at"), response.json()
    assert snapshot() == before
    assert not Subject.objects.filter(ref="s-9").exists()


@pytest.mark.parametrize("received_at,stored", [
    ("0457-05-18T06:36:40-17:39", "0457-05-19T00:15:40+00:00"),   # PostgreSQL takes offsets up to 15:59
    ("2025-03-01T23:30:00+23:59", "2025-02-28T23:31:00+00:00"),
])
def test_received_at_with_an_offset_postgresql_refuses_is_stored_in_utc(operator, world, received_at, stored):
    response = post(operator, "/api/v1/requests", {"subject": "s-9", "type": "erasure", "regulation": "gdpr",
                                                   "channel": "email", "received_at": received_at})
    assert response.status_code == 201, response.json()
    assert SubjectRequest.objects.get(pk=response.json()["id"]).received_at.isoformat() == stored


@pytest.mark.parametrize("received_at", ["9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.999999Z"])
def test_received_at_near_year_9999_is_invalid_received_at(operator, world, received_at):
    before = snapshot()
    response = post(operator, "/api/v1/requests", {"subject": "s-9", "type": "erasure", "regulation": "gdpr",
                                                   "channel": "email", "received_at": received_at})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_received_at"), response.json()
    assert snapshot() == before


@pytest.mark.parametrize("url,body", [
    ("/api/v1/memory/forget", {"target": {"record_id": [2**63, 10**30]}, "mode": "hard"}),
    ("/api/v1/memory/confirm-erasure", {"handle": {"sequence": 2**64}}),
    ("/api/v1/memory/records", {"derived_from": [2**63], "kind": "summary", "content": "x"}),
])
def test_integers_past_64_bits_are_not_found(agent, world, url, body):
    before = snapshot()
    response = post(agent, url, body)
    assert (response.status_code, response.json()["code"]) == (404, "not_found"), response.json()
    assert snapshot() == before


def test_integer_of_thousands_of_digits_is_malformed_json(agent, world):
    response = post(agent, "/api/v1/memory/forget", '{"target": {"record_id": 1' + "0" * 5000 + '}, "mode": "hard"}')
    assert (response.status_code, response.json()["code"]) == (400, "malformed_json")


PATH_ID_ENDPOINTS = [
    ("agent", "GET", "/api/v1/memory/records/{id}"),
    ("agent", "GET", "/api/v1/memory/records/{id}/artifacts"),
    ("agent", "POST", "/api/v1/memory/fleet-notices/{id}/ack"),
    ("legal", "GET", "/api/v1/retention/rules/{id}"),
    ("legal", "PATCH", "/api/v1/retention/rules/{id}"),
    ("legal", "POST", "/api/v1/retention/rules/{id}/retire"),
    ("legal", "POST", "/api/v1/holds/{id}/release"),
    ("operator", "GET", "/api/v1/requests/{id}"),
    ("operator", "GET", "/api/v1/requests/{id}/export"),
    ("operator", "POST", "/api/v1/requests/{id}/verify-identity"),
    ("operator", "POST", "/api/v1/requests/{id}/reject-identity"),
    ("operator", "POST", "/api/v1/requests/{id}/extend"),
    ("operator", "POST", "/api/v1/requests/{id}/start"),
]


@pytest.mark.parametrize("big", [0, 2**63, 10**30])
@pytest.mark.parametrize("role,method,url", PATH_ID_ENDPOINTS)
def test_an_id_past_64_bits_in_a_path_is_not_found(clients, own, role, method, url, big):
    before = snapshot()
    response = send(clients, role, method, url.replace("{id}", str(big)), own, "{}")
    assert (response.status_code, response.json()["code"]) == (404, "not_found"), response.json()
    assert snapshot() == before
