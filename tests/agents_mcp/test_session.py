"""One MCP session, in-process (the SDK's client on the server object): the token is checked at every call."""
from __future__ import annotations

import anyio
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.utils import timezone
from mcp import Client

from agents_mcp.auth import agent_token_from_key
from agents_mcp.server import server_build
from memory.auth import token_hash
from memory.models import ApiToken
from tests.agents_mcp.scenario import call


def test_a_token_revoked_during_a_session_acts_on_nothing_more(agents):
    key = agents.acme_key
    server = server_build(token_get=lambda: agent_token_from_key(key, tenant_name="acme"))

    def revoke() -> None:
        try:
            ApiToken.objects.filter(key_hash=token_hash(key)).update(revoked_at=timezone.now())
        finally:
            connection.close()  # this worker thread's own connection: not left open on the test database

    async def session() -> tuple:
        async with Client(server) as client:
            before = await call(client, "memory_search", {"q": "anything"})
            await anyio.to_thread.run_sync(revoke)
            after = await call(client, "memory_write", {"scope": "user:1", "content_class": "chat", "content": "x"})
            await sync_to_async(connections.close_all, thread_sensitive=True)()  # the tools' thread's connection
            return before, after

    (error_before, _, _), (error_after, answer, _) = anyio.run(session)
    assert not error_before
    assert error_after and answer["code"] == "authentication_failed"
