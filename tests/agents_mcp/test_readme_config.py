"""The MCP client configurations README.md gives ("Agents over MCP") are the ones that work: the stdio one,
with this checkout's paths and the test database put in, starts a server the SDK's client lists the tools of."""
from __future__ import annotations

import json
import re

import anyio
from mcp import Client, StdioServerParameters

from tests.agents_mcp.conftest import ROOT, serve_command
from tests.agents_mcp.scenario import TOOL_NAMES

README = (ROOT / "README.md").read_text()


def _config(marker: str) -> dict:
    block = re.search(rf"<!-- {marker} -->\n```json\n(.*?)\n```", README, re.S)
    assert block, f"README.md has no {marker} block"
    (server,) = json.loads(block.group(1))["mcpServers"].values()
    return server


def test_the_readme_http_config_names_the_endpoint_and_the_token_header():
    server = _config("mcp-http-config")
    assert server["type"] == "http" and server["url"].endswith("/mcp")
    assert server["headers"]["Authorization"].startswith("Token ")


def test_the_readme_stdio_config_starts_a_server_that_lists_the_tools(agents):
    server = _config("mcp-stdio-config")
    command, args, env = serve_command("acme")
    assert server["args"][1:] == ["mcp_serve", "--tenant", "acme"] and server["args"][0].endswith("/manage.py")
    assert set(server["env"]) >= {"LEDGER_AGENT_TOKEN", "DATABASE_URL", "SECRET_KEY", "LEDGER_SIGNING_PASSPHRASE"}
    # This machine's python and checkout instead of /srv/ledger; the test's database, secret and passphrase.
    given = {**server["env"], **{name: env[name] for name in ("DATABASE_URL", "SECRET_KEY",
                                                                "LEDGER_SIGNING_PASSPHRASE")}}
    given["LEDGER_AGENT_TOKEN"] = agents.acme_key
    params = StdioServerParameters(command=command, args=[args[0], *server["args"][1:]], env={**env, **given})

    async def tools() -> set[str]:
        async with Client(params, read_timeout_seconds=60) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert anyio.run(tools) == TOOL_NAMES
