"""Receipts, parsed strictly (pure: no Django).

A receipt is what the data subject keeps: `{"format", "tombstone_id", "envelope" (DSSE), "inclusion"
{"leaf_index", "tree_size", "hashes"}, "checkpoint" (signed note text), "salts" {record id: salt}}`.
A bare DSSE envelope reads as a receipt without proof.

A bundle is what a subject's mail attaches: `{"format": "forgetting-ledger-receipts/v1", "request": id,
"receipts": [receipt, ...]}` (`receipts_bundle` makes it). Mails sent before the format was named carry the
same object without `format`; both read as bundles (`bundle_items`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import merkle
from .dsse import b64decode
from .note import Checkpoint, NoteError, checkpoint_parse

RECEIPT_FORMAT = "forgetting-ledger-receipt/v1"
BUNDLE_FORMAT = "forgetting-ledger-receipts/v1"
# A bundle is one request's receipts: a tombstone per forget the request made (one per decision group).
MAX_BUNDLE_RECEIPTS = 1000
# A forget of many subjects lists every record in one tombstone (~120 bytes each): 32 MB is ~250,000.
MAX_RECEIPT_BYTES = 32 * 1024 * 1024
MAX_PROOF_HASHES = 64
# A receipt, a statement or a key set nests a few levels. Python's `json` recurses once per level and
# raises RecursionError near 1,000; a structure just under that parses, then overflows the stack where
# it is compared or shown. The verifier reads text from anyone (the public page, a file): deeper is refused.
MAX_JSON_DEPTH = 32


class Malformed(ValueError):
    pass


@dataclass
class Receipt:
    tombstone_id: str | None
    payload_type: str
    payload: bytes
    keyid: str
    signature: bytes
    leaf_index: int | None
    tree_size: int | None
    proof: list[bytes]
    checkpoint: Checkpoint | None
    checkpoint_signatures: list[tuple[str, bytes, bytes]]
    salts: dict[str, str]
    envelope: dict


def json_parse(text: str | bytes) -> Any:
    """`json.loads` for text from outside: nesting past MAX_JSON_DEPTH is a ValueError, as any malformed
    JSON is, never a RecursionError."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    stack = [(data, 1)]  # (a value, how many objects and arrays it is inside, itself included)
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return data


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"`{name}` must be a non-negative integer")
    return value


def hashes_parse(value: Any, name: str) -> list[bytes]:
    if not isinstance(value, list) or len(value) > MAX_PROOF_HASHES:
        raise Malformed(f"`{name}` must be a list of base64 hashes")
    try:
        hashes = [b64decode(item) for item in value]
    except ValueError:
        raise Malformed(f"`{name}` holds something that is not base64") from None
    if any(len(h) != merkle.HASH_SIZE for h in hashes):
        raise Malformed(f"every hash in `{name}` must be 32 bytes")
    return hashes


RECEIPT_FIELDS = {"format", "tombstone_id", "envelope", "inclusion", "checkpoint", "salts"}
ENVELOPE_FIELDS = {"payloadType", "payload", "signatures"}
INCLUSION_FIELDS = {"leaf_index", "tree_size", "hashes"}


def _fields(value: dict, allowed: set[str], what: str) -> None:
    unknown = value.keys() - allowed
    if unknown:
        raise Malformed(f"{what} has a field it should not have: `{sorted(unknown)[0][:40]}`")


def document_decode(document: Any) -> dict:
    """A receipt's or a bundle's JSON object, from its text or already decoded."""
    if isinstance(document, (bytes, str)):
        if len(document) > MAX_RECEIPT_BYTES:
            raise Malformed("it is larger than a receipt can be")
        try:
            document = json_parse(document)
        except (ValueError, UnicodeDecodeError):
            raise Malformed("it is not JSON") from None
    if not isinstance(document, dict):
        raise Malformed("a receipt is a JSON object")
    return document


def receipt_parse(document: Any) -> Receipt:
    """A receipt from its JSON text or decoded object. A bare DSSE envelope is a receipt without proof.

    Strict: an unknown field anywhere is refused, so that no change to a receipt goes unnoticed.
    """
    document = document_decode(document)
    if "payloadType" in document and "envelope" not in document:
        document = {"envelope": document}
    _fields(document, RECEIPT_FIELDS, "the receipt")
    if document.get("format", RECEIPT_FORMAT) != RECEIPT_FORMAT:
        raise Malformed(f"its `format` is not {RECEIPT_FORMAT}")
    envelope = document.get("envelope")
    if not isinstance(envelope, dict):
        raise Malformed("it has no `envelope`")
    _fields(envelope, ENVELOPE_FIELDS, "the envelope")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1 or not isinstance(signatures[0], dict):
        raise Malformed("the envelope must carry exactly one signature")
    _fields(signatures[0], {"keyid", "sig"}, "the signature")
    keyid, sig = signatures[0].get("keyid"), signatures[0].get("sig")
    payload_type = envelope.get("payloadType")
    if not isinstance(keyid, str) or not isinstance(payload_type, str):
        raise Malformed("the envelope's `payloadType` and signature `keyid` must be strings")
    try:
        payload, signature = b64decode(envelope.get("payload")), b64decode(sig)
    except ValueError:
        raise Malformed("the envelope's payload or signature is not base64") from None
    inclusion = document.get("inclusion")
    if inclusion is not None and not isinstance(inclusion, dict):
        raise Malformed("`inclusion` must be an object")
    inclusion = inclusion or {}
    _fields(inclusion, INCLUSION_FIELDS, "the inclusion proof")
    checkpoint, checkpoint_signatures = None, []
    if document.get("checkpoint") is not None:
        try:
            checkpoint, checkpoint_signatures = checkpoint_parse(document["checkpoint"])
        except NoteError as exc:
            raise Malformed(f"the checkpoint: {exc}") from None
    salts = document.get("salts") or {}
    if not isinstance(salts, dict) or not all(isinstance(v, str) for v in salts.values()):
        raise Malformed("`salts` must map record ids to hex salts")
    tombstone_id = document.get("tombstone_id")
    if tombstone_id is not None and not isinstance(tombstone_id, str):
        raise Malformed("`tombstone_id` must be a string")
    return Receipt(
        tombstone_id=tombstone_id, payload_type=payload_type, payload=payload, keyid=keyid, signature=signature,
        leaf_index=_int(inclusion["leaf_index"], "leaf_index") if "leaf_index" in inclusion else None,
        tree_size=_int(inclusion["tree_size"], "tree_size") if "tree_size" in inclusion else None,
        proof=hashes_parse(inclusion.get("hashes", []), "hashes"), checkpoint=checkpoint,
        checkpoint_signatures=checkpoint_signatures, salts=salts,
        envelope=envelope,
    )


BUNDLE_FIELDS = {"format", "request", "receipts", "salts_destroyed_at"}


def receipts_bundle(*, request: int, receipts: list[dict]) -> dict:
    """The receipts of one subject request as their mail attaches them (and the notice stores them)."""
    return {"format": BUNDLE_FORMAT, "request": request, "receipts": receipts}


def is_bundle(document: Any) -> bool:
    """Whether a decoded document is a bundle (or something that claims to be one): it has `receipts` or the
    bundle's `format`, and is not itself a receipt (a receipt has no `receipts`)."""
    return isinstance(document, dict) and (
        "receipts" in document or document.get("format") == BUNDLE_FORMAT or "export" in document)


def bundle_items(document: Any) -> tuple[Any, list]:
    """(the request id, the receipts) of a bundle, decoded; each receipt as given (parsed by its verifier).

    Strict as `receipt_parse`: an unknown field, a wrong `format`, no receipts, are `Malformed`. A data export
    (an access request's mail attaches one) is named as such: it is no receipt."""
    document = document_decode(document)
    if "export" in document and "receipts" not in document:
        raise Malformed("it is a copy of your data (the export an access request sends), not a receipt: "
                        "there is nothing to verify in it")
    _fields(document, BUNDLE_FIELDS, "the bundle")
    if document.get("format", BUNDLE_FORMAT) != BUNDLE_FORMAT:
        raise Malformed(f"its `format` is not {BUNDLE_FORMAT}")
    receipts = document.get("receipts")
    if not isinstance(receipts, list):
        raise Malformed("the bundle's `receipts` must be a list")
    if not receipts:
        raise Malformed("the bundle holds no receipts")
    request = document.get("request")
    if request is not None and (isinstance(request, bool) or not isinstance(request, (int, str))):
        raise Malformed("the bundle's `request` must be a request number")
    if len(receipts) > MAX_BUNDLE_RECEIPTS:
        raise Malformed("the bundle holds more receipts than a request can have")
    return request, receipts
