"""The MCP server: the SDK's low-level `Server` with two handlers, tools/list and tools/call, over `agents_mcp.tools`.

One `Server` per connection (stdio) or per HTTP request (`/mcp`, stateless), bound to the agent token that
connection authenticated with, so a tool never has to find out who is calling. The tools are Django code: they
run through `sync_to_async` (thread-sensitive), on the thread Django expects, never on the event loop.
"""
from __future__ import annotations

from typing import Any, Callable

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from rest_framework.exceptions import APIException

from agents_mcp import tools
from config.errors import ApplicationError
from memory.models import ApiToken

NAME = "forgetting-ledger"
INSTRUCTIONS = (
    "Governed memory with provable forgetting. Write with memory_write, find with memory_search / memory_get. "
    "To forget, call memory_forget: a refusal names the retention rule or legal hold, its authority, the end of the "
    "lock and the modes still permitted; a forget is pending until memory_confirm_erasure confirms it. "
    "verify_tombstone checks a signed tombstone or a subject's receipt."
)


def _tool_types() -> list[types.Tool]:
    return [types.Tool(name=t["name"], title=t["title"], description=t["description"],
                       input_schema=t["input_schema"], annotations=types.ToolAnnotations(**t["annotations"]))
            for t in tools.tools_described()]


def _result(answer: tools.ToolAnswer) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=answer.text)],
                                structured_content=answer.structured, is_error=answer.is_error)


def server_build(*, token_get: Callable[[], ApiToken], close_connections: bool = False) -> Server:
    """A server whose tools act with the token `token_get` returns (called before each tool call: a long stdio
    session sees a revocation at its next call). `close_connections`: drop a database connection that went stale
    between calls, as Django does around each request (the stdio process has no requests)."""
    described = _tool_types()
    schemas = {t.name: t.input_schema for t in described}

    def call(name: str, arguments: Any) -> tools.ToolAnswer:
        if close_connections:
            close_old_connections()
        try:
            token = token_get()
        except (ApplicationError, APIException) as exc:  # revoked since, or no longer an agent token
            return tools.error_answer(exc)
        return tools.tool_call(token=token, name=name, arguments=arguments)

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=described)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = await sync_to_async(call, thread_sensitive=True)(params.name, params.arguments)
        return _result(answer)

    return Server(NAME, version="1", instructions=INSTRUCTIONS, get_tool_input_schema=schemas.get,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)
