"""The verification specification (docs/verification-spec.md, served at /verify/spec) cannot drift from the code:
its test vectors are exactly what the code makes, and an independent verifier written from the spec alone (hashlib,
json and `cryptography`; none of our modules) recomputes every one of them (issue 21, item 3)."""
import base64
import hashlib
import json
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tombstones import spec_vectors
from tombstones.jwk import jwks_parse
from tombstones.verification import verify_receipt

from .test_offline_verifier import OFFLINE_ENV, ROOT, run_offline

SPEC_TEXT = spec_vectors.SPEC.read_text(encoding="utf-8")
V = spec_vectors.spec_vectors(SPEC_TEXT)


# ---- an independent verifier, from the spec's words only ----

def b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jcs(value) -> str:
    """RFC 8785 for the spec's domain (ASCII member names, no floats): sorted members, no whitespace, minimal
    escapes with lowercase hex, UTF-8 for the rest."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pae(payload_type: str, body: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 " + str(len(t)).encode() + b" " + t + b" " + str(len(body)).encode() + b" " + body


def leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def inclusion_root(index: int, size: int, leaf_hash: bytes, proof: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2."""
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        assert sn > 0
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0
    return r


def seed_key(purpose: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"spec vector {purpose} key".encode()).digest())


def raw(key) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def test_the_specs_vectors_are_exactly_what_the_code_makes():
    assert V == spec_vectors.vectors()
    result = subprocess.run([sys.executable, "-m", "tombstones.spec_vectors", "--check"], cwd=ROOT, env=OFFLINE_ENV,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_spec_is_version_1_and_covers_every_part_a_verifier_needs():
    assert V["spec_version"] == 1 and SPEC_TEXT.startswith("# Receipt verification specification, version 1")
    for part in ["DSSE", "PAE", "RFC 8785", "leaf hash", "signed note", "JWKS", "/.well-known/tombstone-keys.json",
                 "SHA-256(salt || UTF-8(content))", "forgetting-ledger-receipts/v1", "Test vectors"]:
        assert part in SPEC_TEXT, part


def test_commitments_recomputed():
    for vector in V["commitment"]:
        expected = hashlib.sha256(bytes.fromhex(vector["salt"]) + vector["content"].encode()).hexdigest()
        assert vector["commitment"] == expected


def test_canonicalization_recomputed():
    assert jcs(V["canonicalization"]["value"]) == V["canonicalization"]["canonical"]
    assert jcs(V["statement"]["value"]) == V["statement"]["canonical"]
    assert b64(V["pae"]["payload_base64"]) == V["statement"]["canonical"].encode()


def test_pae_leaf_hash_keys_and_signature_recomputed():
    payload = V["statement"]["canonical"].encode()
    signed = pae(V["pae"]["payload_type"], payload)
    assert b64(V["pae"]["pae_base64"]) == signed
    assert leaf(signed).hex() == V["pae"]["leaf_hash_hex"]
    tombstone_key, checkpoint_key = seed_key("tombstone"), seed_key("checkpoint")
    keys = V["keys"]
    assert raw(tombstone_key).hex() == keys["tombstone_public_key_hex"]
    assert raw(checkpoint_key).hex() == keys["checkpoint_public_key_hex"]
    x = b64url(raw(tombstone_key))
    thumb = b64url(hashlib.sha256(('{"crv":"Ed25519","kty":"OKP","x":"' + x + '"}').encode()).digest())
    assert thumb == keys["tombstone_kid"]
    name = keys["checkpoint_note_name"]
    assert hashlib.sha256(name.encode() + b"\n\x01" + raw(checkpoint_key)).digest()[:4].hex() == \
        keys["checkpoint_key_hash_hex"]
    signature = b64(V["signature_base64"])
    Ed25519PublicKey.from_public_bytes(raw(tombstone_key)).verify(signature, signed)  # raises when it does not
    assert tombstone_key.sign(signed) == signature  # Ed25519 is deterministic
    jwks = {jwk["purpose"]: jwk for jwk in keys["jwks"]["keys"]}
    assert jwks["tombstone"]["x"] == x and jwks["tombstone"]["kid"] == thumb
    assert jwks["checkpoint"]["x"] == b64url(raw(checkpoint_key)) and jwks["checkpoint"]["note_name"] == name


def test_merkle_tree_and_checkpoint_recomputed():
    m = V["merkle"]
    signed = b64(V["pae"]["pae_base64"])
    leaves = [leaf(m["other_leaves_utf8"][0].encode()), leaf(signed), leaf(m["other_leaves_utf8"][1].encode())]
    assert [h.hex() for h in leaves] == m["leaf_hashes_hex"]
    root = node(node(leaves[0], leaves[1]), leaves[2])
    assert root.hex() == m["root_hex"] and m["inclusion_proof_hex"] == [leaves[0].hex(), leaves[2].hex()]
    assert inclusion_root(1, 3, leaves[1], [bytes.fromhex(h) for h in m["inclusion_proof_hex"]]) == root
    origin = V["statement"]["value"]["log_origin"]
    body = f"{origin}\n3\n{base64.b64encode(root).decode()}\ntime {V['statement']['value']['time']}\n"
    assert V["checkpoint"]["body"] == body
    checkpoint_key = seed_key("checkpoint")
    blob = bytes.fromhex(V["keys"]["checkpoint_key_hash_hex"]) + checkpoint_key.sign(body.encode())
    assert V["checkpoint"]["note"] == f"{body}\n\u2014 {origin} {base64.b64encode(blob).decode()}\n"


def test_the_example_receipt_and_bundle_are_made_of_these_values():
    receipt, bundle = V["receipt"], V["bundle"]
    assert receipt["envelope"] == {"payloadType": V["pae"]["payload_type"], "payload": V["pae"]["payload_base64"],
                                   "signatures": [{"keyid": V["keys"]["tombstone_kid"], "sig": V["signature_base64"]}]}
    assert receipt["inclusion"] == {"leaf_index": 1, "tree_size": 3, "hashes": [
        base64.b64encode(bytes.fromhex(h)).decode() for h in V["merkle"]["inclusion_proof_hex"]]}
    assert receipt["checkpoint"] == V["checkpoint"]["note"]
    assert receipt["tombstone_id"] == V["statement"]["value"]["tombstone_id"]
    records = {r["record_id"]: r["commitment"] for r in V["statement"]["value"]["execution"]["records"]}
    for record_id, salt in receipt["salts"].items():
        assert records[record_id] in {c["commitment"] for c in V["commitment"] if c["salt"] == salt}
    assert bundle == {"format": "forgetting-ledger-receipts/v1", "request": 7, "receipts": [receipt]}


# ---- and our verifiers agree ----

@pytest.mark.parametrize("document", ["receipt", "bundle"])
def test_our_verifier_finds_the_example_genuine_and_the_content_covered(document):
    report = verify_receipt(V[document], jwks_parse(V["keys"]["jwks"]), content="alice@example.org")
    assert report.genuine and report.coverage.covered


def test_the_offline_verifier_finds_the_example_bundle_genuine(tmp_path):
    (tmp_path / "bundle.json").write_text(json.dumps(V["bundle"]))
    (tmp_path / "keys.json").write_text(json.dumps(V["keys"]["jwks"]))
    result = run_offline(tmp_path / "bundle.json", tmp_path / "keys.json")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_spec_page_serves_the_document_with_its_vectors(client):
    html = client.get("/verify/spec").content.decode()
    assert "Receipt verification specification, version 1" in html and "<table>" in html
    assert V["keys"]["tombstone_kid"] in html and "test-vectors:begin" in html


def test_the_example_statement_is_one_the_issuer_would_sign_byte_for_byte():
    from tombstones.services.statement import statement_payload

    value = V["statement"]["value"]
    given = {key: value[key] for key in ("request", "scope", "execution", "propagation", "time")}
    payload, _ = statement_payload(tombstone_id=value["tombstone_id"], statement=given, log_origin=value["log_origin"])
    assert payload.decode() == V["statement"]["canonical"]
