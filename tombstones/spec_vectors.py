"""The test vectors of the verification specification (docs/verification-spec.md), made by this code. Pure: no Django.

`python -m tombstones.spec_vectors` prints them as the JSON block the spec holds; `--check` exits 1 when the
spec's block is not exactly what this code makes (the spec and the code drifted apart). The keys are derived
from fixed, published seeds: they are examples, never keys of any log. Ed25519 signatures are deterministic,
so the vectors are the same on every run.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from . import merkle
from .canonical import canonical_json
from .dsse import PAYLOAD_TYPE, b64encode, envelope_build, pae
from .jwk import PURPOSE_CHECKPOINT, PURPOSE_TOMBSTONE, jwk_build, parse_time, thumbprint
from .note import checkpoint_body, key_hash, note_sign
from .receipt import BUNDLE_FORMAT, RECEIPT_FORMAT, receipts_bundle
from .verification import commitment_of
from .vocabulary import STATEMENT_VERSION

SPEC = Path(__file__).resolve().parent.parent / "docs" / "verification-spec.md"
SPEC_VERSION = 1
BEGIN, END = "<!-- test-vectors:begin -->", "<!-- test-vectors:end -->"

ORIGIN = "ledger.example/tombstones"
TIME = "2026-01-15T12:00:00Z"
TOMBSTONE_ID = "0b5e7a1c-4d2f-4e6b-9a10-3c7d2e8f5a61"
# The subject's data and the salts their receipt gives (record id -> salt, 16 bytes as hex).
CONTENTS = {"101": "alice@example.org", "102": "Alice lives at 1 Main St"}
SALTS = {"101": "000102030405060708090a0b0c0d0e0f", "102": "f0e0d0c0b0a090807060504030201000"}
# Two other leaves of the example log (their entries are not needed: only their leaf hashes are in the proof).
OTHER_LEAVES = [b"the log's entry 0", b"the log's entry 2"]


def _key(purpose: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"spec vector {purpose} key".encode()).digest())


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def statement() -> dict:
    records = [{"record_id": rid, "commitment": commitment_of(CONTENTS[rid], SALTS[rid]), "tier": "hot",
                "outcome": "deleted"} for rid in sorted(CONTENTS)]
    return {
        "request": {"actor": "request:7", "authority": "GDPR Art. 17", "path": "erasure_workflow"},
        "scope": {"tenant_id": "1", "target": {"record_ids": sorted(CONTENTS)}},
        "execution": {"mode": "hard", "path": "erasure_workflow", "handle": "55", "records": records},
        "propagation": {"derivatives": [{"artifact_id": "201", "kind": "embedding", "outcome": "deleted"}],
                        "deferred": [{"item": "fleet_copy:301", "action": "acknowledge",
                                      "deadline": "2026-02-15T12:00:00Z"}]},
        "time": TIME,
        "version": STATEMENT_VERSION,
        "log_origin": ORIGIN,
        "tombstone_id": TOMBSTONE_ID,
    }


def vectors() -> dict:
    """Every vector of the spec, inputs and results, in the order the spec explains them."""
    tombstone_key, checkpoint_key = _key(PURPOSE_TOMBSTONE), _key(PURPOSE_CHECKPOINT)
    tombstone_raw, checkpoint_raw = _raw(tombstone_key), _raw(checkpoint_key)
    kid = thumbprint(tombstone_raw)

    canonical_example = {"b": "\u00a7 1798.105\n", "a": [1, True, None], "A": {"z": "", "y": -7}}
    payload = canonical_json(statement())
    signed = pae(PAYLOAD_TYPE, payload)
    signature = tombstone_key.sign(signed)

    leaves = [merkle.leaf_hash(OTHER_LEAVES[0]), merkle.leaf_hash(signed), merkle.leaf_hash(OTHER_LEAVES[1])]
    root = merkle.node_hash(merkle.node_hash(leaves[0], leaves[1]), leaves[2])
    proof = [leaves[0], leaves[2]]
    assert merkle.verify_inclusion(1, 3, leaves[1], proof, root)
    body = checkpoint_body(origin=ORIGIN, size=3, root=root, time=parse_time(TIME))
    note = note_sign(body, name=ORIGIN, public_key=checkpoint_raw, sign=checkpoint_key.sign)

    receipt = {
        "format": RECEIPT_FORMAT,
        "tombstone_id": TOMBSTONE_ID,
        "envelope": envelope_build(payload=payload, payload_type=PAYLOAD_TYPE, keyid=kid, signature=signature),
        "inclusion": {"leaf_index": 1, "tree_size": 3, "hashes": [b64encode(h) for h in proof]},
        "checkpoint": note,
        "salts": dict(SALTS),
    }
    return {
        "spec_version": SPEC_VERSION,
        "commitment": [{"content": CONTENTS[rid], "salt": SALTS[rid],
                        "commitment": commitment_of(CONTENTS[rid], SALTS[rid])} for rid in sorted(CONTENTS)],
        "canonicalization": {"value": canonical_example,
                             "canonical": canonical_json(canonical_example).decode("utf-8")},
        "statement": {"value": statement(), "canonical": payload.decode("utf-8")},
        "pae": {"payload_type": PAYLOAD_TYPE, "payload_base64": b64encode(payload), "pae_base64": b64encode(signed),
                "leaf_hash_hex": leaves[1].hex()},
        "keys": {
            "tombstone_public_key_hex": tombstone_raw.hex(),
            "tombstone_kid": kid,
            "checkpoint_public_key_hex": checkpoint_raw.hex(),
            "checkpoint_note_name": ORIGIN,
            "checkpoint_key_hash_hex": key_hash(ORIGIN, checkpoint_raw).hex(),
            "jwks": {"keys": [
                jwk_build(raw=tombstone_raw, purpose=PURPOSE_TOMBSTONE, valid_from=parse_time(TIME), valid_until=None,
                          compromised_at=None),
                jwk_build(raw=checkpoint_raw, purpose=PURPOSE_CHECKPOINT, valid_from=parse_time(TIME),
                          valid_until=None, compromised_at=None, note_name=ORIGIN),
            ]},
        },
        "signature_base64": b64encode(signature),
        "merkle": {"tree_size": 3, "leaf_index": 1,
                   "other_leaves_utf8": [leaf.decode() for leaf in OTHER_LEAVES],
                   "leaf_hashes_hex": [h.hex() for h in leaves], "root_hex": root.hex(),
                   "inclusion_proof_hex": [h.hex() for h in proof]},
        "checkpoint": {"body": body, "note": note},
        "receipt": receipt,
        "bundle": {**receipts_bundle(request=7, receipts=[receipt]), "format": BUNDLE_FORMAT},
    }


def vectors_text() -> str:
    return json.dumps(vectors(), indent=2, ensure_ascii=False)


def spec_vectors(text: str | None = None) -> dict:
    """The vectors the spec holds (the JSON block between its markers)."""
    text = SPEC.read_text(encoding="utf-8") if text is None else text
    match = re.search(re.escape(BEGIN) + r"\s*```json\n(.*?)\n```\s*" + re.escape(END), text, re.S)
    if not match:
        raise ValueError("the spec has no test-vector block")
    return json.loads(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tombstones.spec_vectors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the spec's vectors are not this code's")
    args = parser.parse_args(argv)
    if args.check:
        same = spec_vectors() == vectors()
        print("the spec's test vectors are this code's" if same else "the spec's test vectors differ from this code's")
        return 0 if same else 1
    print(vectors_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
