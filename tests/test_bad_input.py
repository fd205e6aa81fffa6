"""Bad input to every endpoint gets a 4xx with a stable code and changes nothing; tenants cannot see or
forget each other's records."""
import json

import pytest
from django.db.models import Max

from memory.models import DerivedArtifact, ForgetEvent, Record, Scope, Subject
from retention.models import ContentClass, LegalHold, RetentionRule, RetentionTableVersion
from tests.factories import record

FIVE_MB = "x" * (5 * 1024 * 1024)


def snapshot():
    """Everything a bad request could have changed."""
    return (
        list(Record.objects.order_by("pk").values_list("pk", "content", "forgotten_at", "redacted_at", "held",
                                                       "retained_until")),
        DerivedArtifact.objects.count(), ForgetEvent.objects.count(), Scope.objects.count(), Subject.objects.count(),
        ContentClass.objects.count(), RetentionRule.objects.count(), LegalHold.objects.filter(released_at=None).count(),
        RetentionTableVersion.objects.aggregate(n=Max("number"))["n"],
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
