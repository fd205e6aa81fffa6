"""Receipts (what the subject keeps) and the server's verification of one.

The salts in a receipt are the records' commitment salts, kept (`TombstoneSalts`) only until the subject's
notice carries them, then destroyed (`salts_destroy`, crypto-shredding: DESIGN.md invariant 6); a forget that
no subject request asked for never keeps them. A receipt asked for afterwards, with its salts, is refused
(`salts_destroyed`): the subject's own receipt is the only copy.
"""
from __future__ import annotations

import functools
import json
import uuid
from typing import Any, Callable

from .. import merkle
from ..dsse import b64encode, envelope_build
from ..errors import TombstoneError
from ..models import Checkpoint, Tombstone, TombstoneSalts
from ..receipt import (RECEIPT_FORMAT, Malformed, Receipt, bundle_items, document_decode, is_bundle, json_parse,
                       receipt_parse)
from ..selectors import consistency_proof_get, keys_published, nodes_stored, tombstone_get
from ..verification import REASONS, Report, reports_combine, verify_one_receipt, verify_receipt
from .log import checkpoint_sign


def receipt_build(*, tombstone_id: uuid.UUID | str, include_salts: bool = True,
                  destroyed_salts_ok: bool = False) -> dict:
    """The receipt: the envelope, its inclusion proof, the checkpoint it is proven against, the salts.

    The checkpoint is the earliest one that covers the tombstone (a new one is signed if none does yet),
    so that the receipt proves as early a logging time as the log can. `receipts_build` of one tombstone.
    """
    receipts = receipts_build(tombstone_ids=[tombstone_id], include_salts=include_salts,
                              destroyed_salts_ok=destroyed_salts_ok)
    (receipt,) = receipts.values()
    return receipt


def receipts_build(*, tombstone_ids: list[uuid.UUID | str], include_salts: bool = True,
                   destroyed_salts_ok: bool = False) -> dict[str, dict]:
    """`receipt_build` for many tombstones at once (a notice that carries several, a batch of notices):
    {tombstone id: receipt}, each the same document `receipt_build` makes, all proven against ONE checkpoint,
    the earliest that covers every one of them (signed if none does yet), with one query per table: the
    tombstones and their keys, the checkpoint, the proofs' nodes, the salts. One checkpoint for the lot
    instead of one per tombstone is what makes a batch cheap; a receipt's proof is as good against any
    checkpoint that covers its tombstone.

    With `include_salts`, a tombstone that covered records (an outcome other than refused) but whose salts are
    not kept (destroyed once the subject's notice carried them, or never kept: no subject request asked for
    the forget) is refused, `salts_destroyed` (410), unless `destroyed_salts_ok`: then its receipt has no
    salts (a later notice of a request, whose subject received them before)."""
    wanted = []
    for tombstone_id in tombstone_ids:
        try:
            wanted.append(uuid.UUID(str(tombstone_id)))
        except ValueError:
            raise TombstoneError("tombstone_not_found", "No tombstone with this id.", status_code=404) from None
    wanted = sorted(set(wanted))
    if not wanted:
        return {}
    # Plain rows, not model instances with their keys (a notice batch's 100 tombstones cost ~3 ms of CPU as
    # instances; bench_workflow.py): what the envelope and the proof need.
    tombstones = {row.id: row for row in Tombstone.objects.filter(pk__in=wanted).values_list(
        "id", "leaf_index", "payload_type", "payload", "signature", "key__kid", named=True)}
    if len(tombstones) != len(wanted):
        raise TombstoneError("tombstone_not_found", "No tombstone with this id.", status_code=404)
    last = max(t.leaf_index for t in tombstones.values())
    checkpoint = (Checkpoint.objects.filter(tree_size__gt=last).order_by("tree_size").first() or checkpoint_sign())
    size = checkpoint.tree_size
    needed = set().union(*(merkle.inclusion_nodes(t.leaf_index, size) for t in tombstones.values()))
    nodes = nodes_stored(needed)
    salts = dict(TombstoneSalts.objects.filter(tombstone__in=wanted).values_list("tombstone_id", "salts")) \
        if include_salts else {}
    receipts = {}
    for tombstone_id in wanted:
        tombstone = tombstones[tombstone_id]
        proof = merkle.inclusion_proof(tombstone.leaf_index, size, nodes)
        receipt = {
            "format": RECEIPT_FORMAT,
            "tombstone_id": str(tombstone.id),
            "envelope": envelope_build(payload=bytes(tombstone.payload), payload_type=tombstone.payload_type,
                                       keyid=tombstone.key__kid, signature=bytes(tombstone.signature)),
            "inclusion": {"leaf_index": tombstone.leaf_index, "tree_size": size,
                          "hashes": [b64encode(h) for h in proof]},
            "checkpoint": checkpoint.note,
        }
        if include_salts:
            kept = salts.get(tombstone_id)
            if kept is None and not destroyed_salts_ok and _covers_records(bytes(tombstone.payload)):
                raise TombstoneError(
                    "salts_destroyed", "This tombstone's salts are no longer kept: they went to the data subject "
                    "in their receipt and were then destroyed, or no subject request asked for this forget. The "
                    "receipt the subject was sent is the only copy (a receipt without salts can still be made).",
                    {"tombstone_id": str(tombstone_id)}, status_code=410)
            receipt["salts"] = dict(sorted((kept or {}).items()))
        receipts[str(tombstone_id)] = receipt
    return receipts


def _covers_records(payload: bytes) -> bool:
    """Whether a statement lists a record acted on (whose salt a receipt would give)."""
    records = json.loads(payload).get("execution", {}).get("records", [])
    return any(isinstance(r, dict) and r.get("outcome") != "refused" for r in records)


def salts_destroy(*, tombstone_ids: list[uuid.UUID | str]) -> int:
    """Crypto-shredding: delete these tombstones' salts (every record's in each), in the caller's transaction;
    answers how many tombstones had salts kept. Once the subject holds their receipt, nothing the server keeps
    links a public commitment to guessable content. Destroying them again is harmless."""
    ids = sorted({uuid.UUID(str(t)) for t in tombstone_ids})
    if not ids:
        return 0
    deleted, _ = TombstoneSalts.objects.filter(tombstone_id__in=ids).delete()
    return deleted


def _statement_id(receipt: Receipt) -> str | None:
    try:
        statement = json_parse(receipt.payload)
    except ValueError:
        return None
    return statement.get("tombstone_id") if isinstance(statement, dict) else None


def _changed_fields(stored: Any, received: Any, path: str = "") -> list[str]:
    """Where two statements differ, as paths (`execution.records[0].outcome`)."""
    if isinstance(stored, dict) and isinstance(received, dict):
        return [p for key in sorted(stored.keys() | received.keys())
                for p in _changed_fields(stored.get(key), received.get(key), f"{path}.{key}" if path else key)]
    if isinstance(stored, list) and isinstance(received, list) and len(stored) == len(received):
        return [p for i, (a, b) in enumerate(zip(stored, received)) for p in _changed_fields(a, b, f"{path}[{i}]")]
    return [] if stored == received else [path or "(the whole statement)"]


def _name_changed_fields(report: Report, receipt: Receipt) -> None:
    try:
        stored = tombstone_get(tombstone_id=receipt.tombstone_id or _statement_id(receipt) or "")
        changed = _changed_fields(json.loads(bytes(stored.payload)), json_parse(receipt.payload))
    except (TombstoneError, ValueError):
        return
    if changed:
        report.code = "field_changed"
        report.message = REASONS["field_changed"].format(detail="changed: " + ", ".join(changed[:5]))


def receipt_complete(*, document: Any) -> Any:
    """A bare envelope completed with its inclusion proof and checkpoint from this log, in a bundle too;
    anything else (a full receipt, something unreadable, an envelope this log does not hold) as given."""
    try:
        decoded = document_decode(document)
        if is_bundle(decoded):
            bundle_items(decoded)  # a bundle that does not parse is left to the verifier's verdict
            return {**decoded, "receipts": [receipt_complete(document=item) for item in decoded["receipts"]]}
    except Malformed:
        return document
    try:
        receipt = receipt_parse(decoded)
    except Malformed:
        return document
    if receipt.checkpoint is not None or receipt.leaf_index is not None:
        return document
    try:
        stored = receipt_build(tombstone_id=_statement_id(receipt) or "", include_salts=False)
    except TombstoneError:
        return document
    return {**stored, "envelope": receipt.envelope, "salts": receipt.salts}


def tombstone_verify(*, document: Any, content: str | None = None, salt: str | None = None) -> Report:
    """Verify a receipt (or a bare envelope) as the server: the shared checks, plus this log's own view.

    A bare envelope is completed with its inclusion proof from the log; the receipt's checkpoint must be
    consistent with the log's latest one; a changed field is named by comparing with the stored statement.
    A bundle is verified receipt by receipt (`reports_combine`).
    """
    keys = keys_published()
    document = receipt_complete(document=document)
    try:
        decoded = document_decode(document)
        request, items = bundle_items(decoded) if is_bundle(decoded) else (None, None)
    except Malformed:
        return verify_receipt(document, keys)  # the verifier's own verdict and words
    latest = functools.cache(checkpoint_sign)  # once for a bundle, and only when a receipt parses
    if items is None:
        return _tombstone_verify_one(decoded, keys, latest=latest, content=content, salt=salt)
    return reports_combine([_tombstone_verify_one(item, keys, latest=latest, content=content, salt=salt)
                            for item in items], request=request)


def _tombstone_verify_one(document: Any, keys: dict, *, latest: Callable[[], Checkpoint], content: str | None,
                          salt: str | None) -> Report:
    try:
        receipt = receipt_parse(document)
    except Malformed:
        return verify_one_receipt(document, keys)
    latest = latest()
    size = receipt.checkpoint.size if receipt.checkpoint else 0
    proof = consistency_proof_get(first=size, second=latest.tree_size) if 0 < size <= latest.tree_size else []
    report = verify_one_receipt(document, keys, other_checkpoint=latest.note,
                                consistency_proof=[b64encode(h) for h in proof], content=content, salt=salt)
    if report.code in ("field_changed", "signature_mismatch"):
        _name_changed_fields(report, receipt)
    return report
