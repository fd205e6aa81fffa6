"""Verifying a tombstone receipt: the one implementation the page, the API and the offline verifier share.

Pure: no Django, no database, no network. Input: a receipt (the signed envelope, its inclusion proof,
the checkpoint it is proven against, optionally the subject's salts), the published key set and,
optionally, another checkpoint of the same log with a consistency proof between the two. Output: a
`Report` whose `code` is `genuine` or the first reason it is not, in plain words.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from . import merkle
from .dsse import pae
from .jwk import PURPOSE_CHECKPOINT, PURPOSE_TOMBSTONE, PublicKey, format_time
from .note import Checkpoint, NoteError, checkpoint_parse, checkpoint_signer
from .receipt import (Malformed, Receipt, bundle_items, document_decode, hashes_parse, is_bundle, json_parse,
                      receipt_parse)
from .vocabulary import is_authority, is_path

GENUINE = "genuine"
# Stable codes, in the order they are checked: the first one that fails is the verdict.
REASONS = {
    "malformed": "This is not a receipt we can read: {detail}.",
    "unknown_key": "The tombstone is signed by a key ({kid}) that is not among the published keys.",
    "field_changed": "A field was changed after signing: {detail}.",
    "signature_mismatch": "The signature does not match the statement: it was not made by the key it names.",
    "checkpoint_unknown_key": "The checkpoint is not signed by any published checkpoint key.",
    "checkpoint_signature_mismatch": "The checkpoint's signature does not match: its size, root or time was changed.",
    "wrong_log": "The checkpoint belongs to another log ({origin}), not to the one the tombstone names.",
    "not_in_log": "The tombstone is not in the log: {detail}.",
    "proof_mismatch": "The inclusion proof does not lead to the root hash that the checkpoint signs.",
    "key_compromised": "The signing key was reported compromised at {compromised_at}, before the checkpoint "
                       "that shows this tombstone in the log ({checkpoint_time}).",
    "checkpoint_key_compromised": "The checkpoint key was reported compromised at {compromised_at}, before "
                                  "this checkpoint was signed ({checkpoint_time}).",
    "checkpoint_inconsistent": "The checkpoint is inconsistent with another checkpoint of this log ({detail}): "
                               "the log's history was rewritten, or the proof comes from another tree.",
}
# What each passed check established, in plain words (the page lists them).
CHECKS = {
    "key_published": "The signing key is among the published keys.",
    "signature": "The signature matches the statement, byte for byte.",
    "checkpoint_signature": "The checkpoint is signed by the log's published checkpoint key.",
    "same_log": "The checkpoint belongs to the log the tombstone names.",
    "inclusion": "The inclusion proof leads from the tombstone to the checkpoint's root hash.",
    "key_not_compromised": "The signing key was not reported compromised before the checkpoint.",
    "consistency": "The checkpoint is consistent with the log's other checkpoint.",
}
GENUINE_MESSAGE = "Genuine: signed by a published key and recorded in the log under a signed checkpoint."


# What became of a covered piece of data, in words (tombstones/plain.py says the rest of the page's).
COVERED_OUTCOMES = {"deleted": "and it was erased", "redacted": "and its content was erased",
                    "hidden": "hidden from every use; its content is erased later",
                    "refused": "kept, because the law or a legal hold requires it"}


def commitment_of(content: str, salt_hex: str) -> str:
    """The salted content commitment a tombstone lists: hex SHA-256 over (salt bytes || content UTF-8)."""
    return hashlib.sha256(bytes.fromhex(salt_hex) + content.encode("utf-8")).hexdigest()


@dataclass
class Coverage:
    covered: bool
    message: str
    outcome: str | None = None
    tier: str | None = None


@dataclass
class Report:
    code: str
    message: str
    checks: list[dict] = field(default_factory=list)
    summary: dict | None = None
    coverage: Coverage | None = None
    # A bundle's report: its request and one report per receipt, in the bundle's order.
    request: Any = None
    items: list["Report"] = field(default_factory=list)

    @property
    def genuine(self) -> bool:
        return self.code == GENUINE

    def as_dict(self) -> dict:
        return {"genuine": self.genuine, **asdict(self)}


def statement_summary(statement: dict, *, keyid: str) -> dict:
    """What a tombstone says, as counts, kinds, dates and authority: never ids, content or free text.

    The authority and path are words of `tombstones.vocabulary` in a version 2 statement (the issuer refuses
    anything else); a version 1 statement, signed before, may carry free text there: it is shown only when it
    is such a word (the signed statement itself is unchanged and still verifies)."""
    def part(name: str) -> dict:
        value = statement.get(name)
        return value if isinstance(value, dict) else {}

    def items(value: Any) -> list[dict]:
        return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

    records = items(part("execution").get("records"))
    derivatives = items(part("propagation").get("derivatives"))
    deferred = items(part("propagation").get("deferred"))
    target = part("scope").get("target")
    return {
        "tombstone_id": statement.get("tombstone_id"),
        "time": statement.get("time"),
        "version": statement.get("version"),
        "authority": _word(part("request").get("authority"), is_authority),
        "request_path": _word(part("request").get("path"), is_path),
        "mode": part("execution").get("mode"),
        "target_kind": sorted(target) if isinstance(target, dict) else [],
        "records": len(records),
        "records_by_outcome": dict(Counter(str(r.get("outcome")) for r in records)),
        "records_by_tier": dict(Counter(str(r.get("tier")) for r in records)),
        "derivatives": len(derivatives),
        "derivatives_by_kind": dict(Counter(str(d.get("kind")) for d in derivatives)),
        "derivatives_by_outcome": dict(Counter(str(d.get("outcome")) for d in derivatives)),
        "deferred": sum(len(_deferred_names(d)) for d in deferred),
        "deferred_deadlines": sorted({str(d["deadline"]) for d in deferred if d.get("deadline")}),
        "deferred_undated": sum(len(_deferred_names(d)) for d in deferred if not d.get("deadline")),
        "key_id": keyid,
        "log_origin": statement.get("log_origin"),
    }


def _word(value: Any, known) -> str | None:
    """A statement's authority or path as the page may show it: a word of the vocabulary, or nothing."""
    if value is None or known(value):
        return value
    return "(not shown: free text of a version 1 statement)"


def _deferred_names(item: dict) -> list:
    """A deferred item names one thing (`item`) or several due together (`items`)."""
    items = item.get("items")
    return items if isinstance(items, list) else [item.get("item")]


def deferred_items(statement: dict) -> dict[str, dict]:
    """Each deferred thing a statement names (`record:12`, `fleet_copy:3`) with the item that defers it."""
    return {name: item for item in statement.get("propagation", {}).get("deferred", [])
            for name in _deferred_names(item)}


def coverage_check(statement: dict, *, content: str, salts: list[str]) -> Coverage:
    records = statement.get("execution", {}).get("records", [])
    by_commitment = {r.get("commitment"): r for r in records if isinstance(r, dict)}
    for salt in salts:
        try:
            found = by_commitment.get(commitment_of(content, salt))
        except ValueError:
            return Coverage(False, "The salt must be the 32 hexadecimal characters from your receipt.")
        if found:
            outcome = found.get("outcome")
            return Coverage(True, f"Covered: this piece of your data was among the records, "
                                  f"{COVERED_OUTCOMES.get(outcome, f'outcome {outcome}')}.", outcome, found.get("tier"))
    if not salts:
        return Coverage(False, "Give the salt from your receipt to check a piece of content.")
    return Coverage(False, "Not covered: none of this tombstone's records has exactly this content, with the "
                           "salt used (check that it is the salt your receipt gives for this piece of data).")


class _Fail(Exception):
    def __init__(self, code: str, **detail: Any):
        self.code, self.detail = code, detail
        super().__init__(code)


def _checkpoint_verify(cp: Checkpoint, signatures: list, keys: dict[str, PublicKey]) -> PublicKey:
    signer, ok = checkpoint_signer(cp, signatures, [k for k in keys.values() if k.purpose == PURPOSE_CHECKPOINT])
    if signer is None:
        raise _Fail("checkpoint_unknown_key")
    if not ok:
        raise _Fail("checkpoint_signature_mismatch")
    if signer.compromised_at and (cp.time is None or signer.compromised_at <= cp.time):
        raise _Fail("checkpoint_key_compromised", compromised_at=format_time(signer.compromised_at),
                    checkpoint_time=format_time(cp.time) or "no time")
    return signer


class _Run:
    """The checks of one verification, in order; the first failure ends it."""

    def __init__(self, receipt: Receipt, keys: dict[str, PublicKey]):
        self.r, self.keys, self.checks = receipt, keys, []
        self.statement: dict | None = None
        self.cp: Checkpoint | None = None

    def passed(self, name: str) -> None:
        self.checks.append({"check": name, "passed": True, "label": CHECKS[name]})

    def signature(self) -> PublicKey:
        r = self.r
        key = self.keys.get(r.keyid)
        if key is None or key.purpose != PURPOSE_TOMBSTONE:
            raise _Fail("unknown_key", kid=r.keyid[:64])
        self.passed("key_published")
        signed = pae(r.payload_type, r.payload)
        if not key.verify(r.signature, signed):
            if r.checkpoint and r.leaf_index is not None and not self._proof_holds(signed):
                raise _Fail("field_changed", detail="the statement matches neither its signature nor the entry "
                                                    "in the log")
            raise _Fail("signature_mismatch")
        try:
            statement = json_parse(r.payload)
        except ValueError:
            statement = None
        if not isinstance(statement, dict):
            raise _Fail("malformed", detail="the signed payload is not a tombstone statement")
        if r.tombstone_id is not None and r.tombstone_id != statement.get("tombstone_id"):
            raise _Fail("field_changed", detail="the receipt's tombstone id is not the one in the signed statement")
        self.statement = statement
        self.passed("signature")
        return key

    def _proof_holds(self, signed: bytes) -> bool:
        cp = self.r.checkpoint
        return self.r.tree_size == cp.size and merkle.verify_inclusion(
            self.r.leaf_index, cp.size, merkle.leaf_hash(signed), self.r.proof, cp.root)

    def checkpoint(self) -> None:
        cp = self.r.checkpoint
        if cp is None:
            raise _Fail("not_in_log", detail="the receipt carries no checkpoint")
        _checkpoint_verify(cp, self.r.checkpoint_signatures, self.keys)
        self.passed("checkpoint_signature")
        if cp.origin != self.statement.get("log_origin"):
            raise _Fail("wrong_log", origin=cp.origin[:200])
        self.passed("same_log")
        self.cp = cp

    def inclusion(self) -> None:
        r, cp = self.r, self.cp
        if r.leaf_index is None or r.tree_size is None:
            raise _Fail("not_in_log", detail="the receipt carries no inclusion proof")
        if r.leaf_index >= cp.size:
            raise _Fail("not_in_log", detail="its position is beyond the end of the checkpoint's tree")
        leaf = merkle.leaf_hash(pae(r.payload_type, r.payload))
        if r.tree_size != cp.size or not merkle.verify_inclusion(r.leaf_index, cp.size, leaf, r.proof, cp.root):
            raise _Fail("proof_mismatch")
        self.passed("inclusion")

    def compromise(self, key: PublicKey) -> None:
        if key.compromised_at and (self.cp.time is None or key.compromised_at <= self.cp.time):
            raise _Fail("key_compromised", compromised_at=format_time(key.compromised_at),
                        checkpoint_time=format_time(self.cp.time) or "no time")
        self.passed("key_not_compromised")

    def consistency(self, other: Checkpoint, signatures: list, proof: list[bytes]) -> None:
        _checkpoint_verify(other, signatures, self.keys)
        cp = self.cp
        if other.origin != cp.origin:
            raise _Fail("wrong_log", origin=other.origin[:200])
        small, large = (other, cp) if other.size <= cp.size else (cp, other)
        if not merkle.verify_consistency(small.size, large.size, small.root, large.root, proof):
            raise _Fail("checkpoint_inconsistent", detail=f"sizes {small.size} and {large.size}")
        self.passed("consistency")


def bundle_genuine_message(n: int) -> str:
    return (GENUINE_MESSAGE if n == 1 else f"Genuine: all {n} receipts are signed by a published key and recorded "
                                           f"in the log under a signed checkpoint.")


def reports_combine(reports: list[Report], *, request: Any = None) -> Report:
    """One report for a bundle: genuine when every receipt is, else the first failure's verdict, saying which
    receipt; its checks are each receipt's, numbered; content is covered when any receipt covers it."""
    n = len(reports)
    checks = [{**check, "label": f"Receipt {i}: {check['label']}" if n > 1 else check["label"]}
              for i, report in enumerate(reports, 1) for check in report.checks]
    failed = next(((i, r) for i, r in enumerate(reports, 1) if not r.genuine), None)
    if failed:
        i, report = failed
        combined = Report(report.code, f"Receipt {i} of {n}: {report.message}" if n > 1 else report.message, checks)
    else:
        combined = Report(GENUINE, bundle_genuine_message(n), checks)
    coverages = [r.coverage for r in reports if r.coverage is not None]
    if coverages and not failed:
        combined.coverage = next((c for c in coverages if c.covered), coverages[0])
    combined.request, combined.items = request, reports
    return combined


def verify_receipt(document: Any, keys: dict[str, PublicKey], *, other_checkpoint: str | None = None,
                   consistency_proof: list[str] | None = None, content: str | None = None,
                   salt: str | None = None) -> Report:
    """Verify a receipt, or a bundle of them (JSON text or object), against a key set (`jwk.jwks_parse`).

    A bundle (`receipt.bundle_items`) is genuine when every receipt in it is (`reports_combine`).
    """
    kwargs = dict(other_checkpoint=other_checkpoint, consistency_proof=consistency_proof, content=content, salt=salt)
    try:
        decoded = document_decode(document)
        if not is_bundle(decoded):
            return verify_one_receipt(decoded, keys, **kwargs)
        request, items = bundle_items(decoded)
    except Malformed as exc:
        return Report("malformed", REASONS["malformed"].format(detail=exc))
    return reports_combine([verify_one_receipt(item, keys, **kwargs) for item in items], request=request)


def verify_one_receipt(document: Any, keys: dict[str, PublicKey], *, other_checkpoint: str | None = None,
                consistency_proof: list[str] | None = None, content: str | None = None,
                salt: str | None = None) -> Report:
    """Verify one receipt (JSON text or object; a bundle is malformed here) against a key set (`jwk.jwks_parse`).

    `other_checkpoint` and `consistency_proof` (base64 hashes between the two trees, in either order)
    check that the receipt's checkpoint and another one (an earlier one you kept, or the log's latest)
    describe one history. `content` with `salt` (or the receipt's salts) asks whether that content is
    among the records the tombstone covers.
    """
    try:
        receipt = receipt_parse(document)
        proof = hashes_parse(consistency_proof or [], "consistency proof")
        other = checkpoint_parse(other_checkpoint) if other_checkpoint is not None else None
    except Malformed as exc:
        return Report("malformed", REASONS["malformed"].format(detail=exc))
    except NoteError as exc:
        return Report("malformed", REASONS["malformed"].format(detail=f"the other checkpoint: {exc}"))
    run = _Run(receipt, keys)
    try:
        key = run.signature()
        run.checkpoint()
        run.inclusion()
        run.compromise(key)
        if other is not None:
            run.consistency(*other, proof)
    except _Fail as failure:
        run.checks.append({"check": failure.code, "passed": False,
                           "label": f"Failed: {failure.code.replace('_', ' ')}."})
        return Report(failure.code, REASONS[failure.code].format(**failure.detail), run.checks)
    report = Report(GENUINE, GENUINE_MESSAGE, run.checks, statement_summary(run.statement, keyid=key.kid))
    report.summary.update(leaf_index=receipt.leaf_index, checkpoint_size=run.cp.size,
                          checkpoint_time=format_time(run.cp.time))
    if content is not None:
        salts = [salt.strip()] if salt else list(receipt.salts.values())
        report.coverage = coverage_check(run.statement, content=content, salts=salts)
    return report
