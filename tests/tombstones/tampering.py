"""Ways to tamper with a receipt, each with the verdict every verifier must reach (server, offline, browser)."""
from __future__ import annotations

import base64
import copy
import json
import os
import uuid

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tombstones import merkle
from tombstones.dsse import PAYLOAD_TYPE, b64encode, envelope_build, pae
from tombstones.jwk import thumbprint
from tombstones.note import checkpoint_body, checkpoint_parse, note_sign
from tombstones.services import key_current
from tombstones.services.keys import key_private


def _copy(receipt: dict) -> dict:
    return copy.deepcopy(receipt)


def _b64_flip(text: str, index: int = 0) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def _payload(receipt: dict) -> dict:
    return json.loads(base64.b64decode(receipt["envelope"]["payload"]))


def payload_field_changed(receipt):
    changed, statement = _copy(receipt), _payload(receipt)
    statement["execution"]["records"][0]["outcome"] = "hidden"
    changed["envelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return changed


def receipt_id_changed(receipt):
    changed = _copy(receipt)
    changed["tombstone_id"] = str(uuid.uuid4())
    return changed


def signature_altered(receipt):
    changed = _copy(receipt)
    changed["envelope"]["signatures"][0]["sig"] = _b64_flip(receipt["envelope"]["signatures"][0]["sig"], 10)
    return changed


def signed_by_unknown_key(receipt):
    changed, foreign = _copy(receipt), Ed25519PrivateKey.generate()
    payload = base64.b64decode(receipt["envelope"]["payload"])
    changed["envelope"]["signatures"] = [{
        "keyid": thumbprint(foreign.public_key().public_bytes_raw()),
        "sig": b64encode(foreign.sign(pae(PAYLOAD_TYPE, payload)))}]
    return changed


def proof_hash_altered(receipt):
    changed = _copy(receipt)
    changed["inclusion"]["hashes"][0] = _b64_flip(receipt["inclusion"]["hashes"][0])
    return changed


def _tree_around(receipt) -> tuple[list[bytes], int, int]:
    """Leaf hashes of a made-up tree of the receipt's size with the receipt's leaf at its index."""
    index, size = receipt["inclusion"]["leaf_index"], receipt["inclusion"]["tree_size"]
    leaf = merkle.leaf_hash(pae(PAYLOAD_TYPE, base64.b64decode(receipt["envelope"]["payload"])))
    leaves = [merkle.leaf_hash(os.urandom(16)) for _ in range(size)]
    leaves[index] = leaf
    return leaves, index, size


def _build(leaves):
    stored, frontier = {}, []
    for i, leaf in enumerate(leaves):
        created, frontier = merkle.append(i, frontier, leaf)
        stored.update({(level, node): h for level, node, h in created})
    return stored, merkle.fold(frontier)


def proof_from_another_tree(receipt):
    leaves, index, size = _tree_around(receipt)
    stored, _ = _build(leaves)
    changed = _copy(receipt)
    changed["inclusion"]["hashes"] = [b64encode(h) for h in merkle.inclusion_proof(index, size, stored)]
    return changed


def leaf_index_moved(receipt):
    changed = _copy(receipt)
    changed["inclusion"]["leaf_index"] = (receipt["inclusion"]["leaf_index"] + 1) % receipt["inclusion"]["tree_size"]
    return changed


def leaf_index_beyond_the_tree(receipt):
    changed = _copy(receipt)
    changed["inclusion"]["leaf_index"] = receipt["inclusion"]["tree_size"] + 5
    return changed


def _sign_checkpoint(*, origin: str, size: int, root: bytes, private=None, name=None) -> str:
    from django.utils import timezone

    key = key_current(purpose="checkpoint")
    private = private or key_private(key)
    public = private.public_key().public_bytes_raw()
    body = checkpoint_body(origin=origin, size=size, root=root, time=timezone.now())
    return note_sign(body, name=name or key.note_name, public_key=public, sign=private.sign)


def checkpoint_root_changed(receipt):
    changed = _copy(receipt)
    lines = receipt["checkpoint"].split("\n")
    lines[2] = b64encode(os.urandom(32))
    changed["checkpoint"] = "\n".join(lines)
    return changed


def checkpoint_signed_by_unknown_key(receipt):
    cp, _ = checkpoint_parse(receipt["checkpoint"])
    changed = _copy(receipt)
    changed["checkpoint"] = _sign_checkpoint(origin=cp.origin, size=cp.size, root=cp.root,
                                             private=Ed25519PrivateKey.generate())
    return changed


def checkpoint_of_another_log(receipt):
    cp, _ = checkpoint_parse(receipt["checkpoint"])
    changed = _copy(receipt)
    changed["checkpoint"] = _sign_checkpoint(origin="another.example/log", size=cp.size, root=cp.root)
    return changed


def forked_checkpoint(receipt):
    """A checkpoint signed by the log's own key over a tree that holds the tombstone but rewrote its neighbours."""
    cp, _ = checkpoint_parse(receipt["checkpoint"])
    leaves, index, size = _tree_around(receipt)
    stored, root = _build(leaves)
    changed = _copy(receipt)
    changed["checkpoint"] = _sign_checkpoint(origin=cp.origin, size=size, root=root)
    changed["inclusion"]["hashes"] = [b64encode(h) for h in merkle.inclusion_proof(index, size, stored)]
    return changed


def format_changed(receipt):
    return {**_copy(receipt), "format": "something-else/v9"}


def field_added(receipt):
    changed = _copy(receipt)
    changed["envelope"]["note"] = "trust me"
    return changed


def unlogged_envelope(receipt):
    """A statement genuinely signed by the tombstone key but never appended to the log, as a bare envelope."""
    statement = _payload(receipt)
    statement["tombstone_id"] = str(uuid.uuid4())
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    key = key_current(purpose="tombstone")
    return envelope_build(payload=payload, payload_type=PAYLOAD_TYPE, keyid=key.kid,
                          signature=key_private(key).sign(pae(PAYLOAD_TYPE, payload)))


# (name, tampering, the verdict of every verifier)
TAMPERINGS = [
    ("payload_field_changed", payload_field_changed, "field_changed"),
    ("receipt_id_changed", receipt_id_changed, "field_changed"),
    ("signature_altered", signature_altered, "signature_mismatch"),
    ("signed_by_unknown_key", signed_by_unknown_key, "unknown_key"),
    ("proof_hash_altered", proof_hash_altered, "proof_mismatch"),
    ("proof_from_another_tree", proof_from_another_tree, "proof_mismatch"),
    ("leaf_index_moved", leaf_index_moved, "proof_mismatch"),
    ("leaf_index_beyond_the_tree", leaf_index_beyond_the_tree, "not_in_log"),
    ("checkpoint_root_changed", checkpoint_root_changed, "checkpoint_signature_mismatch"),
    ("checkpoint_signed_by_unknown_key", checkpoint_signed_by_unknown_key, "checkpoint_unknown_key"),
    ("checkpoint_of_another_log", checkpoint_of_another_log, "wrong_log"),
    ("forked_checkpoint", forked_checkpoint, "checkpoint_inconsistent"),
    ("format_changed", format_changed, "malformed"),
    ("field_added", field_added, "malformed"),
    ("unlogged_envelope", unlogged_envelope, "not_in_log"),
]
MALFORMED_PASTES = [
    "not json at all", "[1, 2, 3]", "{}", '{"envelope": {"payloadType": "x", "payload": "%%%", "signatures": []}}',
    '{"envelope": {"payloadType": "x", "payload": "", "signatures": [{"keyid": "k", "sig": "AA=="}]}, '
    '"inclusion": {"leaf_index": "3"}}',
    '{"envelope": {"payloadType": "x", "payload": "", "signatures": [{"keyid": "k", "sig": "AA=="}]}, '
    '"checkpoint": "just one line"}',
    "[" * 1_000 + "]" * 1_000,  # past Python's recursion limit: a RecursionError, not a ValueError, from json
]
