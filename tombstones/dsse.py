"""DSSE envelopes (the in-toto / Sigstore signing envelope), pure: no Django.

An envelope is `{"payloadType", "payload" (standard base64), "signatures": [{"keyid", "sig"}]}`; the
signature is Ed25519 over the pre-authentication encoding (PAE) of the payload type and the payload
bytes. Verifiers decode the payload and check those bytes as received: they never re-serialize it.
"""
from __future__ import annotations

import base64
import binascii

PAYLOAD_TYPE = "application/vnd.forgetting-ledger.tombstone+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSEv1 pre-authentication encoding: `DSSEv1 SP LEN(type) SP type SP LEN(body) SP body`."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Strict base64: standard or URL-safe (DSSE allows both), padding optional, and canonical: text that
    decodes to the same bytes as another text (stray bits in the last character) is refused, so that a
    changed character always changes what is verified."""
    if not isinstance(text, str):
        raise ValueError("expected a base64 string")
    text = text.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not valid base64") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise ValueError("not canonical base64")
    return data


def envelope_build(*, payload: bytes, payload_type: str, keyid: str, signature: bytes) -> dict:
    return {
        "payloadType": payload_type,
        "payload": b64encode(payload),
        "signatures": [{"keyid": keyid, "sig": b64encode(signature)}],
    }
