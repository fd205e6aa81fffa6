"""The MCP tools over Streamable HTTP at `/mcp`, served by the service itself (the live server), with the API's
token auth; the client is the SDK's own, in both its protocol modes."""
from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memory.models import Record
from memory.services.tokens import token_issue
from tests.agents_mcp.scenario import agent_session, call
from tests.agents_mcp.storage import assert_stored


def _client(url: str, key: str, mode: str = "auto") -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Token {key}"})
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, read_timeout_seconds=60)


@pytest.mark.parametrize("mode, protocol", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_agent_writes_searches_is_refused_under_a_lock_forgets_and_confirms_over_http(agents, live_server, mode,
                                                                                      protocol):
    async def session() -> dict:
        async with _client(live_server.url, agents.acme_key, mode) as client:
            assert client.protocol_version == protocol  # the per-request envelope, or the initialize handshake
            return await agent_session(client, globex_record_id=agents.globex_record_id)

    ids = anyio.run(session)
    assert_stored(ids, globex_record_id=agents.globex_record_id)


def test_the_other_tenants_agent_sees_only_its_own_records(agents, live_server):
    async def session() -> list:
        async with _client(live_server.url, agents.globex_key) as client:
            got = await call(client, "memory_get", {"record_id": agents.globex_record_id})
            forget = await call(client, "memory_forget", {"target": {"scope": "user:9"}, "mode": "soft"})
            return [got, forget]

    (error, got, _), (error_forget, forget, _) = anyio.run(session)
    assert not error and got["content"] == "globex secret plans"
    assert not error_forget and forget["status"] == "forgotten"
    assert Record.objects.get(pk=agents.globex_record_id).forgotten_at is not None


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _post(url: str, body: bytes, key: str | None) -> httpx2.Response:
    headers = dict(HEADERS, **({"Authorization": f"Token {key}"} if key else {}))
    with httpx2.Client(timeout=30) as client:
        return client.post(f"{url}/mcp", content=body, headers=headers)


@pytest.mark.parametrize("key_of, body, status, code", [
    (None, json.dumps(INITIALIZE).encode(), 401, "not_authenticated"),
    ("not-a-token", json.dumps(INITIALIZE).encode(), 401, "authentication_failed"),
    ("operator_key", json.dumps(INITIALIZE).encode(), 403, "permission_denied"),
    ("acme_key", b'{"jsonrpc": "2.0", "id": 1, "method": ', 400, "malformed_json"),
    ("acme_key", b"[" * 10_000 + b"]" * 10_000, 400, "malformed_json"),
    ("acme_key", b'{"x": "' + b"a" * (2 * 1024 * 1024) + b'"}', 413, "payload_too_large"),
])
def test_refusals_before_the_protocol_are_4xx_with_the_apis_stable_codes(agents, live_server, key_of, body, status,
                                                                         code):
    key = getattr(agents, key_of, key_of) if key_of else None
    response = _post(live_server.url, body, key)
    assert response.status_code == status
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["data"]["code"] == code, answer


def test_a_protocol_error_is_the_sdks_json_rpc_error_not_a_500(agents, live_server):
    response = _post(live_server.url, json.dumps({"jsonrpc": "2.0", "id": 7, "method": "no/such"}).encode(),
                     agents.acme_key)
    assert response.status_code == 200 and response.json()["error"]["code"] == -32601  # method not found
    initialized = _post(live_server.url, json.dumps(INITIALIZE).encode(), agents.acme_key)
    assert initialized.status_code == 200 and initialized.json()["result"]["serverInfo"]["name"] == "forgetting-ledger"


@pytest.mark.parametrize("method, body, content_type, accept, status", [
    ("get", None, None, "application/json", 406),  # no server-sent stream in stateless JSON mode
    ("delete", None, None, "application/json", 405),
    ("put", "{}", "application/json", "application/json, text/event-stream", 405),
    ("post", json.dumps(INITIALIZE), "application/json", "text/html", 406),
    ("post", json.dumps(INITIALIZE), "text/plain", "application/json, text/event-stream", 400),
    ("post", "[1, 2]", "application/json", "application/json, text/event-stream", 400),
    ("post", '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_get"}}',
     "application/json", "application/json, text/event-stream", 400),
])
def test_requests_the_protocol_refuses_are_4xx_never_a_server_error(client, tenant, method, body, content_type,
                                                                   accept, status):
    _, key = token_issue(tenant_name=tenant.name, role="agent")
    kwargs = {"HTTP_AUTHORIZATION": f"Token {key}", "HTTP_ACCEPT": accept,
              "HTTP_MCP_PROTOCOL_VERSION": "2026-07-28" if "tools/call" in (body or "") else "2025-06-18"}
    if body is not None:
        kwargs.update(data=body, content_type=content_type)
    response = getattr(client, method)("/mcp", **kwargs)
    assert response.status_code == status, response.content
