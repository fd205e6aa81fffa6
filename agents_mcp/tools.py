"""The MCP tools: what an agent runtime may call, described for a model, answered by the memory API's own functions.

Pure Django, no MCP SDK: `tool_call` takes an authenticated agent token, a tool name and its JSON arguments, and
answers a `ToolAnswer` (text for the model, the API's JSON body as structured content, and whether it is an
error). Each tool calls the same `*_answer` function as its HTTP endpoint (`memory.api`), so the checks, the
refusals and the bodies are the API's, byte for byte; `isError` is true exactly when the API would answer 4xx.
The transports (`agents_mcp.server`: stdio and `/mcp`) only carry these answers.
"""
from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import jsonschema
from rest_framework.exceptions import APIException

from config.errors import ApplicationError, api_exception_handler
from config.parsers import JSONParser
from memory import api
from memory.models import ApiToken, ArtifactKind, ForgetMode, Tier
from memory.selectors import MAX_PAGE
from memory.services.targets import MAX_TARGET_ITEMS
from tombstones.services import receipt_build, tombstone_verify

logger = logging.getLogger(__name__)

# How a forget asked for over MCP is named on its forget event and in its tombstone (tombstones.vocabulary.PATHS).
PATH = "mcp"


@dataclass
class ToolAnswer:
    is_error: bool
    text: str
    structured: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict
    run: Callable[[ApiToken, dict], ToolAnswer]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


def _object(properties: dict, required: list[str] | None = None, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False,
            **extra}


def _one_or_many(item: dict) -> dict:
    return {"anyOf": [item, {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_TARGET_ITEMS}]}


HANDLE_SCHEMA = _object({
    "sequence": {"type": "integer", "minimum": 1, "description": "The forget's sequence number."},
    "tombstone_id": {"type": ["string", "null"], "description": "The forget's tombstone id (a UUID)."},
}, minProperties=1, description="The `handle` object a memory_forget answered, as it was given.")


# --- answers -----------------------------------------------------------------------------------------------

def _json(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False, default=str)


def _answer(code: int, body: dict, summary: str) -> ToolAnswer:
    return ToolAnswer(is_error=code >= 400, text=f"{summary}\n\n{_json(body)}", structured=body)


NEXT_STEP = {
    "invalid": "Fix the arguments named in `errors` and call again.",
    "invalid_arguments": "Fix the arguments named in `errors` and call again.",
    "invalid_target": "Give `target` as an object with exactly one of record_id, scope, tag, subject.",
    "invalid_handle": "Pass the `handle` object exactly as memory_forget returned it.",
    "not_found": "Check the id: only records of your own tenant are visible to you.",
    "forgotten": "This record was forgotten: do not use or restore its content.",
    "tenant_mismatch": "Leave `tenant` out: your token decides the tenant.",
    "unknown_tool": "Call one of the tools that tools/list returns.",
    "server_error": "Nothing was changed; try again later or report it to the operator.",
}


def error_answer(exc: Exception) -> ToolAnswer:
    """A refusal as the HTTP API's exception handler shapes it (same code, detail and extras)."""
    response = api_exception_handler(exc, {})
    if response is None:
        raise exc
    body = dict(response.data)
    text = f"Error {body.get('code')}: {body.get('detail')}"
    hint = NEXT_STEP.get(str(body.get("code")))
    return ToolAnswer(True, f"{text}\n{hint}\n\n{_json(body)}" if hint else f"{text}\n\n{_json(body)}", body)


def _invalid_arguments(problems: list[str]) -> ToolAnswer:
    body = {"code": "invalid_arguments", "detail": "The arguments do not match the tool's input schema.",
            "errors": problems}
    return ToolAnswer(True, f"Error invalid_arguments: {'; '.join(problems)}\n{NEXT_STEP['invalid_arguments']}"
                            f"\n\n{_json(body)}", body)


# --- the tools ---------------------------------------------------------------------------------------------

def _write(token: ApiToken, args: dict) -> ToolAnswer:
    code, body = api.write_answer(token=token, data=args)
    if "derived_from" in args:
        return _answer(code, body, f"Wrote derived artifact {body['id']} ({body['kind']}) of records "
                                   f"{body['derived_from']}; it is forgotten with its sources.")
    return _answer(code, body, f"Wrote record {body['id']} in scope {body['scope']} (content class "
                               f"{body['content_class']}, locked until {body['locked_until'] or 'no date'}"
                               f"{', under a legal hold' if body.get('held') else ''}).")


def _search(token: ApiToken, args: dict) -> ToolAnswer:
    code, body = api.search_answer(token=token, q=args["q"], mode=args.get("mode", "keyword"),
                                   limit=args.get("limit", 10))
    ids = [hit["record"]["id"] for hit in body["results"]]
    return _answer(code, body, f"{len(ids)} record(s) found: {ids}. Forgotten records are never returned."
                   if ids else "No record found. Forgotten records are never returned.")


def _get(token: ApiToken, args: dict) -> ToolAnswer:
    code, body = api.read_answer(token=token, record_id=args["record_id"])
    return _answer(code, body, f"Record {body['id']} in scope {body['scope']}.")


def _refusal_line(result: dict) -> str:
    reason = result.get("reason") or {}
    until = reason.get("locked_until") or ("the hold's release" if reason.get("code") == "legal_hold" else "no date")
    return (f"record {result['record_id']}: refused, {reason.get('code')} ({reason.get('authority') or 'no authority'}"
            f"), locked until {until}; permitted modes: {', '.join(reason.get('permitted_modes') or []) or 'none'}")


def _forget(token: ApiToken, args: dict) -> ToolAnswer:
    code, body = api.forget_answer(token=token, data=args, path=PATH)
    outcomes: dict[str, int] = {}
    for result in body["results"]:
        outcomes[result["outcome"]] = outcomes.get(result["outcome"], 0) + 1
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    refusals = [_refusal_line(r) for r in body["results"] if r["outcome"] == "refused"]
    handle = _json(body["handle"])
    if body["status"] == "refused":
        summary = ("Refused: nothing was forgotten. " + "; ".join(refusals[:20])
                   + (f"; and {len(refusals) - 20} more" if len(refusals) > 20 else "")
                   + ". Call memory_forget again with one of the permitted modes (`soft` hides the record and keeps "
                     "it for the retention period), or tell the user why it is kept: the rule or hold and its "
                     f"authority are in `results[].reason`. The refusal is recorded under handle {handle}.")
        return _answer(code, body, summary)
    summary = (f"Forget {body['status']}: {counts}. Handle {handle}. "
               + ("The erasure is PENDING until confirmed: do not tell the user it is erased yet; call "
                  "memory_confirm_erasure with this handle." if body["erasure_pending"] else
                  "Nothing is pending confirmation."))
    if refusals:
        summary += " Some records were refused: " + "; ".join(refusals[:20]) + "."
    return _answer(code, body, summary)


def _confirm(token: ApiToken, args: dict) -> ToolAnswer:
    code, body = api.confirm_answer(token=token, data=args)
    if body.get("erased"):
        return _answer(code, body, "Erased: every read path was probed and none returned the forgotten records. "
                                   "You may now tell the user the erasure is confirmed.")
    gaps = body.get("gaps") or []
    summary = (f"Not erased yet: {len(gaps)} gap(s) found (see `gaps`). Do not tell the user it is erased; call "
               "memory_confirm_erasure again later.")
    if any(gap.get("gap") == "content_at_rest" for gap in gaps):
        summary += (" A soft forget only hides: the content stays at rest until compaction purges it (`deferred_until`"
                    "). To remove it now, forget the records again with mode `redact` where `permitted_modes` allows "
                    "it, then confirm that forget's handle.")
    return _answer(code, body, summary)


def _verify(token: ApiToken, args: dict) -> ToolAnswer:
    if ("tombstone_id" in args) == ("receipt" in args):
        return _invalid_arguments(["give exactly one of `tombstone_id` and `receipt`"])
    document = args.get("receipt")
    if document is None:
        document = receipt_build(tombstone_id=args["tombstone_id"], include_salts=False)
    report = tombstone_verify(document=document, content=args.get("content"), salt=args.get("salt"))
    body = report.as_dict()
    summary = (f"Genuine: {report.message}" if report.genuine else f"NOT genuine ({report.code}): {report.message}")
    if report.coverage is not None:
        summary += f" Coverage: {report.coverage.message}"
    return ToolAnswer(report.code == "malformed", f"{summary}\n\n{_json(body)}", body)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="memory_write", title="Write a memory record", run=_write,
        description=(
            "Store a piece of memory (a record) in a scope of your tenant, such as `user:42/session:7`. Give the "
            "content class: it decides how long the record must be kept (retention rules) and so whether a later "
            "forget can delete it. Give `subject` (the person the content is about) so that their erasure request "
            "finds it. To store something derived from records (a summary, an embedding, a cache entry, an "
            "archive copy, a copy held by another agent), give `derived_from` (the source record ids) and `kind` "
            "instead of `scope` and `content_class`: it will be forgotten with its sources. Refused (isError) "
            "when a field is invalid, the content class is unknown, or a source was already forgotten: do not "
            "re-derive content from a forgotten record."),
        input_schema=_object({
            "scope": {"type": "string", "maxLength": 2000, "description": "Scope path, e.g. `user:42/session:7`."},
            "content_class": {"type": "string", "maxLength": 100,
                              "description": "A content class of your tenant's retention table."},
            "content": {"type": "string", "description": "The content to remember."},
            "subject": {"type": ["string", "null"], "maxLength": 200,
                        "description": "Reference of the person the content is about (e.g. an e-mail)."},
            "tier": {"type": "string", "enum": list(Tier.values)},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 20},
            "derived_from": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1,
                             "maxItems": 1000, "description": "Source record ids of a derived artifact."},
            "kind": {"type": "string", "enum": list(ArtifactKind.values),
                     "description": "What the derived artifact is (with `derived_from`)."},
            "holder": {"type": "string", "maxLength": 200,
                       "description": "Which agent holds a `fleet_copy` (with `derived_from`)."},
        }, ["content"]),
    ),
    ToolSpec(
        name="memory_search", title="Search memory", run=_search, read_only=True, idempotent=True,
        description=(
            "Find records of your tenant. `mode` `keyword` (default) matches the words of `q`; `similar` ranks by "
            "meaning (embedding similarity) and gives each hit a `score`. Forgotten records are never returned. "
            "Refused (isError) when `q` is empty or too long, or `limit` is out of range."),
        input_schema=_object({
            "q": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "What to look for."},
            "mode": {"type": "string", "enum": ["keyword", "similar"], "default": "keyword"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 10},
        }, ["q"]),
    ),
    ToolSpec(
        name="memory_get", title="Read one record", run=_get, read_only=True, idempotent=True,
        description=(
            "Read one record of your tenant by its id, with its lock (`locked_until`, `held`). Refused (isError) "
            "with `not_found` when the id is not a record of your tenant, and `forgotten` when it was forgotten: "
            "then do not use or restore what you remember of it."),
        input_schema=_object({"record_id": {"type": "integer", "minimum": 1}}, ["record_id"]),
    ),
    ToolSpec(
        name="memory_forget", title="Forget records", run=_forget, destructive=True,
        description=(
            "Forget records of your tenant: one or more record ids, a scope (with its child scopes), a tag, or "
            "the records of one or more subjects (`target` holds exactly one of these). `mode`: `soft` hides the "
            "records (content purged later, once retention allows), `redact` removes the content and keeps the "
            "row, `hard` deletes the row. Derived artifacts are forgotten with their sources. Records under a "
            "retention rule or a legal hold are REFUSED for the modes the lock forbids: each refused record says "
            "why in `results[].reason` (code `retention_lock` or `legal_hold`, the blocking rule or hold and its "
            "authority, `locked_until`, and `permitted_modes`). If everything is refused the answer is an error "
            "(isError) with that structured content: pick a permitted mode and call again, or tell the user why "
            "the data must be kept. A successful forget is NOT yet an erasure: it returns a `handle` and "
            "`erasure_pending`; call memory_confirm_erasure with the handle before telling anyone it is erased."),
        input_schema=_object({
            "target": _object({
                "record_id": _one_or_many({"type": "integer", "minimum": 1}),
                "scope": {"type": "string", "minLength": 1, "maxLength": 2000},
                "tag": {"type": "string", "minLength": 1, "maxLength": 100},
                "subject": _one_or_many({"type": "string", "minLength": 1, "maxLength": 200}),
            }, minProperties=1, maxProperties=1, description="Exactly one of record_id, scope, tag, subject."),
            "mode": {"type": "string", "enum": list(ForgetMode.values)},
            "reason": {"type": "string", "maxLength": 2000,
                       "description": "Why (kept in your tenant's private audit, never published)."},
        }, ["target", "mode"]),
    ),
    ToolSpec(
        name="memory_confirm_erasure", title="Confirm an erasure", run=_confirm, idempotent=True,
        description=(
            "Check that a forget really took effect: every read path (record read, scope listing, keyword and "
            "similarity search, caches, archives, other agents' copies) is probed for the forgotten records. "
            "Answers `erased: true` with the evidence, or an error (isError) with `erased: false` and the `gaps` "
            "still found (for instance a copy another agent has not acknowledged yet): then call again later. "
            "Give the `handle` memory_forget returned. Refused with `not_found` for a handle of another tenant."),
        input_schema=_object({"handle": HANDLE_SCHEMA}, ["handle"]),
    ),
    ToolSpec(
        name="verify_tombstone", title="Verify a tombstone", run=_verify, read_only=True, idempotent=True,
        description=(
            "Verify a signed tombstone (the public proof of a forget): by `tombstone_id` (as this log holds it) or "
            "from a `receipt` (the JSON document a data subject received). Checks the signature against the "
            "published keys and the inclusion in the append-only log; answers `genuine` or the first reason it "
            "is not (`code`, in plain words in `message`). With `content` and `salt` (from the receipt) it also "
            "says whether that content is among the records the tombstone covers. Refused (isError) with "
            "`tombstone_not_found` for an unknown id, or `malformed` for an unreadable receipt."),
        input_schema=_object({
            "tombstone_id": {"type": "string", "maxLength": 100, "description": "A tombstone id (UUID)."},
            "receipt": {"type": ["object", "string"], "description": "A receipt document (object or JSON text)."},
            "content": {"type": "string", "maxLength": 65536},
            "salt": {"type": "string", "maxLength": 200},
        }),
    ),
]
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}
_VALIDATORS = {tool.name: jsonschema.Draft202012Validator(tool.input_schema) for tool in TOOLS}


def _schema_problems(name: str, arguments: dict) -> list[str]:
    problems = []
    errors = sorted(_VALIDATORS[name].iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors[:20]:
        where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
        message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
        problems.append(f"{where}: {message}")
    return problems


def _storable(arguments: dict) -> None:
    """The API's body checks (nesting depth, NUL and surrogate characters: `config.parsers`), for arguments that
    did not come through that parser (stdio)."""
    JSONParser().parse(io.BytesIO(json.dumps(arguments, ensure_ascii=True).encode()))


def tool_call(*, token: ApiToken, name: str, arguments: dict | None) -> ToolAnswer:
    """Run one tool for an authenticated agent token. Never raises: a refusal or a failure is an error answer."""
    tool = TOOLS_BY_NAME.get(name)
    if tool is None:
        body = {"code": "unknown_tool", "detail": f"No tool named {name[:100]!r}.", "tools": sorted(TOOLS_BY_NAME)}
        return ToolAnswer(True, f"Error unknown_tool: {body['detail']} {NEXT_STEP['unknown_tool']}", body)
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        return _invalid_arguments(["(arguments): must be an object"])
    try:
        _storable(arguments)
    except (ValueError, RecursionError) as exc:  # in-process callers may pass what JSON cannot even encode
        return _invalid_arguments([f"(arguments): {str(exc)[:200]}"])
    except APIException as exc:  # malformed_json (too deep), invalid (NUL, surrogate)
        return error_answer(exc)
    problems = _schema_problems(name, arguments)
    if problems:
        return _invalid_arguments(problems)
    try:
        return tool.run(token, arguments)
    except (ApplicationError, APIException) as exc:  # the API's refusals, with its codes
        return error_answer(exc)
    except Exception:
        logger.exception("MCP tool %s failed", name)
        body = {"code": "server_error", "detail": "The server failed; nothing was changed."}
        return ToolAnswer(True, f"Error server_error: {body['detail']} {NEXT_STEP['server_error']}", body)


def tools_described() -> list[dict]:
    """The tools as tools/list gives them (plain dicts; `agents_mcp.server` makes them SDK types)."""
    return [{"name": t.name, "title": t.title, "description": t.description, "input_schema": t.input_schema,
             "annotations": {"title": t.title, "read_only_hint": t.read_only, "destructive_hint": t.destructive,
                             "idempotent_hint": t.idempotent, "open_world_hint": False}}
            for t in TOOLS]

