"""What an agent does over MCP, the same whichever transport carries it: list the tools, write, search, read, be
refused under a retention lock, soft-forget, confirm, verify the tombstone; and what it may not do: reach another
tenant's records, or crash the server with bad arguments. The caller checks storage afterwards (no ORM here: this
runs inside the client's event loop)."""
from __future__ import annotations

from mcp import Client

TOOL_NAMES = {"memory_write", "memory_search", "memory_get", "memory_forget", "memory_confirm_erasure",
              "verify_tombstone"}


async def call(client: Client, name: str, arguments: dict) -> tuple[bool, dict, str]:
    result = await client.call_tool(name, arguments)
    text = "".join(block.text for block in result.content if block.type == "text")
    return bool(result.is_error), result.structured_content or {}, text


async def agent_session(client: Client, *, globex_record_id: int) -> dict:
    """Runs the agent's session and asserts every answer; returns the ids the caller checks in storage."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOL_NAMES
    for tool in listed.tools:
        assert len(tool.description) > 200, tool.name  # written for a model: what, when refused, what next
        assert tool.input_schema["type"] == "object"
    forget_tool = next(t for t in listed.tools if t.name == "memory_forget")
    assert "permitted_modes" in forget_tool.description and "memory_confirm_erasure" in forget_tool.description

    error, note, _ = await call(client, "memory_write", {
        "scope": "user:42/session:7", "content_class": "chat", "content": "Alice prefers oat milk",
        "subject": "alice@example.com", "tags": ["prefs"]})
    assert not error and note["scope"] == "user:42/session:7" and note["locked_until"] is None
    error, trade, _ = await call(client, "memory_write", {
        "scope": "user:42/account:trades", "content_class": "trade-ledger", "content": "Alice bought 10 ACME at 12.5",
        "subject": "alice@example.com"})
    assert not error and trade["locked_until"] is not None, (error, trade)

    error, found, text = await call(client, "memory_search", {"q": "oat milk"})
    assert not error and [hit["record"]["id"] for hit in found["results"]] == [note["id"]]
    assert str(note["id"]) in text
    error, similar, _ = await call(client, "memory_search", {"q": "Alice prefers oat milk", "mode": "similar",
                                                             "limit": 5})
    assert not error and similar["results"][0]["record"]["id"] == note["id"] and "score" in similar["results"][0]

    error, got, _ = await call(client, "memory_get", {"record_id": note["id"]})
    assert not error and got["content"] == "Alice prefers oat milk"

    # Under the seven-year rule a hard forget is refused, per record, with what the agent needs to choose again.
    error, refused, text = await call(client, "memory_forget", {"target": {"record_id": trade["id"]}, "mode": "hard",
                                                                "reason": "user asked"})
    assert error and refused["status"] == "refused"
    (result,) = refused["results"]
    reason = result["reason"]
    assert result["record_id"] == trade["id"] and result["outcome"] == "refused"
    assert reason["code"] == "retention_lock" and reason["authority"] == "SEC 17a-4"
    assert reason["locked_until"] == trade["locked_until"].replace("Z", "+00:00") or reason["locked_until"]
    assert reason["permitted_modes"] == ["soft", "redact"]
    assert reason["blocking"][0]["type"] == "rule" and reason["blocking"][0]["authority"] == "SEC 17a-4"
    assert "permitted modes: soft, redact" in text

    # The agent picks a permitted mode on the unlocked note: a soft forget, pending until confirmed.
    error, forgotten, text = await call(client, "memory_forget", {"target": {"record_id": note["id"]}, "mode": "soft"})
    assert not error and forgotten["status"] == "forgotten" and forgotten["erasure_pending"] is True
    assert forgotten["results"] == [{"record_id": note["id"], "outcome": "hidden"}]
    handle = forgotten["handle"]
    assert handle["sequence"] >= 1 and handle["tombstone_id"]
    assert "PENDING until confirmed" in text and "memory_confirm_erasure" in text

    error, gone, _ = await call(client, "memory_get", {"record_id": note["id"]})
    assert error and gone["code"] == "forgotten"
    error, found, _ = await call(client, "memory_search", {"q": "oat milk"})
    assert not error and found["results"] == []

    # Hidden is not erased: the content is still at rest until compaction, and confirmation says so.
    error, pending, text = await call(client, "memory_confirm_erasure", {"handle": handle})
    assert error and pending["erased"] is False and pending["code"] == "erasure_unconfirmed"
    assert {"record_id": note["id"], "gap": "content_at_rest"}.items() <= next(
        g for g in pending["gaps"] if g.get("record_id") == note["id"]).items()
    assert "Not erased yet" in text and "redact" in text
    # So the agent goes further with a mode the record permits: redact removes the content now; confirmed.
    error, redacted, text = await call(client, "memory_forget", {"target": {"record_id": note["id"]},
                                                                 "mode": "redact"})
    assert not error and redacted["results"] == [{"record_id": note["id"], "outcome": "redacted"}]
    error, confirmed, text = await call(client, "memory_confirm_erasure", {"handle": redacted["handle"]})
    assert not error and confirmed["erased"] is True and confirmed["evidence"], confirmed
    assert "Erased" in text

    error, report, text = await call(client, "verify_tombstone", {"tombstone_id": handle["tombstone_id"]})
    assert not error and report["genuine"] is True and report["summary"]["request_path"] == "mcp", report
    error, report, _ = await call(client, "verify_tombstone", {"tombstone_id": "00000000-0000-4000-8000-000000000000"})
    assert error and report["code"] == "tombstone_not_found"

    # Another tenant's record does not exist for this agent: not readable, not forgettable.
    error, answer, _ = await call(client, "memory_get", {"record_id": globex_record_id})
    assert error and answer["code"] == "not_found"
    error, answer, _ = await call(client, "memory_forget", {"target": {"record_id": globex_record_id}, "mode": "hard"})
    assert error and answer["code"] == "not_found"
    error, answer, _ = await call(client, "memory_search", {"q": "globex secret plans"})
    assert not error and answer["results"] == []
    error, answer, _ = await call(client, "memory_confirm_erasure", {"handle": {"sequence": 10**9}})
    assert error and answer["code"] == "not_found"

    # Bad arguments: a tool error the model can read and correct, never a crash; the session goes on.
    bad_calls = [
        ("memory_get", {"record_id": "twelve"}, "invalid_arguments"),
        ("memory_get", {}, "invalid_arguments"),
        ("memory_search", {"q": "x", "mode": "telepathy"}, "invalid_arguments"),
        ("memory_search", {"q": "x", "limit": 10**6}, "invalid_arguments"),
        ("memory_forget", {"target": {}, "mode": "soft"}, "invalid_arguments"),
        ("memory_forget", {"target": {"record_id": note["id"]}, "mode": "obliterate"}, "invalid_arguments"),
        ("memory_forget", {"target": {"record_id": trade["id"]}, "mode": "hard", "tenant": "globex"},
         "invalid_arguments"),
        ("memory_write", {"scope": "user:1", "content_class": "no-such-class", "content": "x"}, None),
        ("memory_write", {"scope": "user:1", "content_class": "chat", "content": "nul \x00 inside"}, "invalid"),
        ("memory_confirm_erasure", {"handle": {"sequence": "one"}}, "invalid_arguments"),
        ("verify_tombstone", {}, "invalid_arguments"),
        ("verify_tombstone", {"receipt": "not a receipt"}, "malformed"),
        ("no_such_tool", {}, "unknown_tool"),
    ]
    for name, arguments, code in bad_calls:
        error, answer, text = await call(client, name, arguments)
        assert error, (name, arguments, answer)
        assert answer.get("code") if code is None else answer.get("code") == code, (name, arguments, answer)
        assert text.startswith(("Error ", "NOT genuine")), text
    error, answer, _ = await call(client, "memory_get", {"record_id": trade["id"]})
    assert not error and answer["content"] == "Alice bought 10 ACME at 12.5"
    return {"note": note["id"], "trade": trade["id"], "handle": handle, "redact_handle": redacted["handle"]}
