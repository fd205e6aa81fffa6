"""`/mcp`: the MCP tools over Streamable HTTP, served by the service itself, with the API's token auth.

The service is WSGI and the SDK's Streamable HTTP transport is ASGI, so each request is handed to the SDK's own
session manager, in stateless JSON-response mode, inside `async_to_sync`: the SDK speaks the protocol (every
revision it supports, the initialize handshake and the per-request envelope alike), this view does what the API
does before a view runs: the token (`Authorization: Token <agent token>`), the body size
(DATA_UPLOAD_MAX_MEMORY_SIZE) and the JSON parser's limits (nesting depth). Its refusals are JSON-RPC errors whose
`data` is the API's error body with its stable `code`, so an MCP client shows them and a script can read them.
The tools run on this request's thread (`agents_mcp.server`), on its database connection.
"""
from __future__ import annotations

import io
from typing import Any

import anyio
from asgiref.sync import async_to_sync
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.lowlevel import Server
from rest_framework.exceptions import APIException, ValidationError

from agents_mcp.auth import agent_token_from_request
from agents_mcp.server import server_build
from config.errors import ApplicationError, api_exception_handler
from config.parsers import JSONParser

JSONRPC_PARSE_ERROR = -32700
JSONRPC_INVALID_REQUEST = -32600
# Headers the SDK's answer carries that Django sets itself.
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection"}


def _refusal(exc: Exception) -> JsonResponse:
    """An error before the protocol: the API's body (stable `code`) as a JSON-RPC error's `data`."""
    response = api_exception_handler(exc, {})
    body = dict(response.data)
    code = JSONRPC_PARSE_ERROR if body.get("code") == "malformed_json" else JSONRPC_INVALID_REQUEST
    json_response = JsonResponse({"jsonrpc": "2.0", "id": None,
                                  "error": {"code": code, "message": str(body.get("detail")), "data": body}},
                                 status=response.status_code)
    for header in ("WWW-Authenticate", "Retry-After"):
        if header in response:
            json_response[header] = response[header]
    return json_response


def _scope(request, body: bytes) -> dict[str, Any]:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1"))
               for name, value in request.headers.items()]
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(), "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"), "headers": headers,
        "server": (request.get_host().rsplit(":", 1)[0], int(request.get_port() or 80)),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve(server: Server, scope: dict, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request through the SDK's stateless transport; its whole answer (JSON-response mode: no stream)."""
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True,
                                           max_request_body_size=max(len(body), 1))
    answer: dict[str, Any] = {"status": 500, "headers": [], "body": bytearray()}
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()  # the client stays connected until the answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return answer["status"], answer["headers"], bytes(answer["body"])


@csrf_exempt
def mcp_endpoint(request):
    try:
        token = agent_token_from_request(request)
        body = request.body  # over DATA_UPLOAD_MAX_MEMORY_SIZE: RequestDataTooBig, as for the API
        if request.method == "POST":
            # Not JSON, or nested too deep: ParseError (`malformed_json`), refused below as the API refuses it.
            # A NUL or a surrogate in a string is valid JSON: the SDK reads it, and a tool refuses such an
            # argument itself (`invalid`, a tool error the model can read).
            try:
                JSONParser().parse(io.BytesIO(body))
            except ValidationError:
                pass
    except (ApplicationError, APIException, RequestDataTooBig) as exc:
        return _refusal(exc)
    status, headers, content = async_to_sync(_serve)(server_build(token_get=lambda: token), _scope(request, body),
                                                     body)
    response = HttpResponse(content, status=status)
    for name, value in headers:
        name_text = name.decode("latin-1")
        if name_text.lower() not in _HOP_HEADERS:
            response[name_text] = value.decode("latin-1")
    return response
