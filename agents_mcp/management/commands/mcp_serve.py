"""`manage.py mcp_serve --tenant NAME`: the MCP tools over stdio, for an agent runtime that starts the server itself.

The agent token comes from the environment (LEDGER_AGENT_TOKEN), never from the command line, where every user of
the machine can read it in the process list.
"""
from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server
from rest_framework.exceptions import APIException

from agents_mcp.auth import agent_token_from_key
from agents_mcp.server import server_build
from config.errors import ApplicationError

TOKEN_VARIABLE = "LEDGER_AGENT_TOKEN"


class Command(BaseCommand):
    help = ("Serve the MCP tools (memory_write, memory_search, memory_get, memory_forget, memory_confirm_erasure, "
            f"verify_tombstone) over stdio, acting with the agent token in ${TOKEN_VARIABLE} for tenant --tenant.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant the agent token belongs to.")

    def handle(self, *args, tenant, **options):
        key = os.environ.get(TOKEN_VARIABLE, "").strip()
        if not key:
            raise CommandError(f"Set {TOKEN_VARIABLE} to an agent token of tenant {tenant!r} "
                               f"(manage.py issue_token --tenant {tenant} --role agent).")
        try:
            agent_token_from_key(key, tenant_name=tenant)
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from None
        except APIException as exc:
            raise CommandError(f"authentication_failed: {TOKEN_VARIABLE} is not a valid agent token "
                               f"({exc.detail})") from None

        server = server_build(token_get=lambda: agent_token_from_key(key, tenant_name=tenant), close_connections=True)

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)
