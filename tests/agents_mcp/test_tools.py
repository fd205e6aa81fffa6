"""The tools' answers in-process (no transport): every bad argument an agent can send is a tool error with a
stable code, nothing changes, and the tools give the HTTP API's own bodies."""
from __future__ import annotations

import pytest

from agents_mcp.tools import TOOLS, tool_call
from memory.models import ApiToken, ForgetEvent, Record
from memory.services.tokens import token_issue
from tests.factories import record, rule

BIG = 2**70
DEEP: list = []
for _ in range(40):
    DEEP = [DEEP]


@pytest.fixture
def token(tenant) -> ApiToken:
    token, _ = token_issue(tenant_name=tenant.name, role="agent")
    return token


@pytest.fixture
def kept(tenant, chat, ledger_class):
    rule(tenant, ledger_class, days=2555, authority="SEC 17a-4")
    return record(tenant, ledger_class, content="bought 100 ACME"), record(tenant, chat, content="likes tea")


@pytest.mark.parametrize("name, arguments, code", [
    ("memory_get", {"record_id": BIG}, "not_found"),
    ("memory_get", {"record_id": True}, "invalid_arguments"),
    ("memory_get", {"record_id": 1, "extra": 1}, "invalid_arguments"),
    ("memory_get", ["not", "an", "object"], "invalid_arguments"),
    ("memory_forget", {"target": {"record_id": BIG}, "mode": "hard"}, "not_found"),
    ("memory_forget", {"target": {"record_id": [1] * 20_000}, "mode": "hard"}, "invalid_arguments"),
    ("memory_forget", {"target": {"scope": "no slash//x"}, "mode": "soft"}, "invalid_scope"),
    ("memory_forget", {"target": {"subject": "nobody@example.com"}, "mode": "soft"}, "not_found"),
    ("memory_forget", {"target": {"tag": "x", "scope": "user:1"}, "mode": "soft"}, "invalid_arguments"),
    ("memory_search", {"q": "   "}, "invalid_query"),
    ("memory_search", {"q": "a\x00b"}, "invalid"),
    ("memory_search", {"q": "\ud800"}, "invalid"),
    ("memory_write", {"scope": "user:1", "content_class": "chat", "content": "x" * 70_000}, "content_too_large"),
    ("memory_write", {"derived_from": [BIG], "kind": "summary", "content": "x"}, "not_found"),
    ("memory_write", {"content": DEEP}, "malformed_json"),
    ("memory_confirm_erasure", {"handle": {"tombstone_id": "not-a-uuid"}}, "invalid_handle"),
    ("verify_tombstone", {"tombstone_id": "x", "receipt": {}}, "invalid_arguments"),
    ("verify_tombstone", {"tombstone_id": "not-a-uuid"}, "tombstone_not_found"),
])
def test_bad_arguments_are_a_tool_error_with_a_stable_code_and_change_nothing(token, kept, name, arguments, code):
    before = list(Record.objects.order_by("pk").values_list("pk", "content", "forgotten_at"))

    answer = tool_call(token=token, name=name, arguments=arguments)

    assert answer.is_error, answer
    assert answer.structured["code"] == code, answer.structured
    assert answer.text.startswith("Error ") or answer.text.startswith("NOT genuine")
    assert list(Record.objects.order_by("pk").values_list("pk", "content", "forgotten_at")) == before
    assert not ForgetEvent.objects.exclude(status="refused").exists()


def test_a_tool_answers_the_http_apis_own_body(token, agent, kept):
    locked, _ = kept
    over_http = agent.post("/api/v1/memory/forget", {"target": {"record_id": locked.pk}, "mode": "hard"},
                           format="json")
    over_mcp = tool_call(token=token, name="memory_forget", arguments={"target": {"record_id": locked.pk},
                                                                        "mode": "hard"})
    http_body, mcp_body = over_http.json(), over_mcp.structured
    assert over_http.status_code == 409 and over_mcp.is_error
    # Same refusal, record by record; only the forget event (its handle) differs.
    assert mcp_body["results"] == http_body["results"] and mcp_body["status"] == http_body["status"] == "refused"
    assert mcp_body["handle"]["sequence"] == http_body["handle"]["sequence"] + 1
    assert ForgetEvent.objects.get(pk=mcp_body["handle"]["sequence"]).path == "mcp"
    assert ForgetEvent.objects.get(pk=http_body["handle"]["sequence"]).path == "api"


def test_a_partial_forget_is_not_an_error_and_names_the_refused_records(token, kept, tenant):
    locked, free = kept
    answer = tool_call(token=token, name="memory_forget",
                       arguments={"target": {"record_id": [locked.pk, free.pk]}, "mode": "hard"})
    assert not answer.is_error and answer.structured["status"] == "partial"
    assert f"record {locked.pk}: refused, retention_lock (SEC 17a-4)" in answer.text
    assert "permitted modes: soft, redact" in answer.text
    assert not Record.objects.filter(pk=free.pk).exists() and Record.objects.filter(pk=locked.pk).exists()


def test_a_revoked_or_foreign_token_acts_on_nothing(kept, other_tenant):
    locked, _ = kept
    foreign, _ = token_issue(tenant_name=other_tenant.name, role="agent")
    answer = tool_call(token=foreign, name="memory_get", arguments={"record_id": locked.pk})
    assert answer.is_error and answer.structured["code"] == "not_found"


def test_every_tool_says_when_it_refuses_and_what_to_do_next():
    for tool in TOOLS:
        assert "Refused" in tool.description or "REFUSED" in tool.description, tool.name
        assert tool.input_schema["additionalProperties"] is False


def test_a_failure_inside_a_tool_is_a_tool_error_not_a_crash(token, kept, monkeypatch):
    from memory import api

    def broken(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(api, "read_answer", broken)
    answer = tool_call(token=token, name="memory_get", arguments={"record_id": kept[0].pk})
    assert answer.is_error and answer.structured == {"code": "server_error",
                                                     "detail": "The server failed; nothing was changed."}
    assert "disk on fire" not in answer.text


def test_schema_errors_at_mixed_paths_are_all_reported(token, kept):
    answer = tool_call(token=token, name="memory_forget",
                       arguments={"target": {"record_id": [1, "two", 3.5]}, "mode": "nope", "x": 1})
    assert answer.is_error and answer.structured["code"] == "invalid_arguments"
    assert any(problem.startswith("mode:") for problem in answer.structured["errors"])
