"""The MCP tools over stdio: the SDK's own client starts `manage.py mcp_serve` as an agent runtime would."""
from __future__ import annotations

import subprocess

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.agents_mcp.conftest import serve_command
from tests.agents_mcp.scenario import agent_session
from tests.agents_mcp.storage import assert_stored



def _params(tenant: str, key: str | None) -> StdioServerParameters:
    command, args, env = serve_command(tenant)
    if key is not None:
        env["LEDGER_AGENT_TOKEN"] = key
    return StdioServerParameters(command=command, args=args, env=env)


@pytest.mark.parametrize("mode, protocol", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_agent_writes_searches_is_refused_under_a_lock_forgets_and_confirms_over_stdio(agents, mode, protocol):
    async def session() -> dict:
        async with Client(_params("acme", agents.acme_key), mode=mode, read_timeout_seconds=60) as client:
            assert client.protocol_version == protocol  # the per-request envelope, or the initialize handshake
            return await agent_session(client, globex_record_id=agents.globex_record_id)

    ids = anyio.run(session)
    assert_stored(ids, globex_record_id=agents.globex_record_id)


@pytest.mark.parametrize("tenant, key_of, expected", [
    ("acme", None, "Set LEDGER_AGENT_TOKEN"),
    ("acme", "globex_key", "tenant_mismatch"),
    ("acme", "operator_key", "permission_denied"),
    ("acme", "not-a-token", "authentication_failed"),
])
def test_serve_refuses_a_token_that_is_not_an_agent_token_of_the_tenant(agents, tenant, key_of, expected):
    command, args, env = serve_command(tenant)
    if key_of is not None:
        env["LEDGER_AGENT_TOKEN"] = getattr(agents, key_of, key_of)
    done = subprocess.run([command, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert expected in done.stderr
    assert done.stdout == ""  # nothing on the protocol's channel
