"""Ed25519 public keys as JWKs (RFC 8037), pure: no Django.

`kid` is the RFC 7638 thumbprint of the key, so a key id names exactly one key. A published key carries
validity members of our own: `purpose` (`tombstone` or `checkpoint`), `valid_from`, `valid_until`
(retirement; the key still verifies what it signed before) and `compromised_at` (RFC 3339, or null).
Checkpoint keys also carry `note_name`, the key name used in the checkpoint's signed note.
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PURPOSE_TOMBSTONE = "tombstone"
PURPOSE_CHECKPOINT = "checkpoint"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected a base64url string")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(public_key: bytes) -> str:
    """RFC 7638 thumbprint of an Ed25519 key: SHA-256 over the required members, sorted, no spaces."""
    members = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": b64url(public_key)}, separators=(",", ":"),
                         sort_keys=True)
    return b64url(hashlib.sha256(members.encode("ascii")).digest())


def parse_time(text: str | None) -> datetime | None:
    """RFC 3339 (`2025-12-02T10:00:00Z`) to an aware datetime; ValueError when malformed."""
    if text is None:
        return None
    if not isinstance(text, str) or "T" not in text:
        raise ValueError("expected an RFC 3339 time")
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("an RFC 3339 time needs a zone offset")
    return value


def format_time(value: datetime | None) -> str | None:
    """An aware datetime as RFC 3339 UTC with second precision (`2025-12-02T10:00:00Z`)."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class PublicKey:
    kid: str
    purpose: str
    raw: bytes
    valid_from: datetime | None
    valid_until: datetime | None
    compromised_at: datetime | None
    note_name: str | None = None

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


def jwk_build(*, raw: bytes, purpose: str, valid_from: datetime | None, valid_until: datetime | None,
              compromised_at: datetime | None, note_name: str | None = None) -> dict:
    jwk = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url(raw),
        "kid": thumbprint(raw),
        "alg": "EdDSA",
        "use": "sig",
        "purpose": purpose,
        "valid_from": format_time(valid_from),
        "valid_until": format_time(valid_until),
        "compromised_at": format_time(compromised_at),
    }
    if note_name:
        jwk["note_name"] = note_name
    return jwk


def jwks_parse(document: object) -> dict[str, PublicKey]:
    """The keys of a JWKS document by `kid`; ValueError naming the problem when it is malformed."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("a key set is a JSON object with a `keys` list")
    keys: dict[str, PublicKey] = {}
    for index, jwk in enumerate(document["keys"]):
        if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue  # not ours to use; a key set may hold other kinds of keys
        try:
            raw = b64url_decode(jwk["x"])
            if len(raw) != 32:
                raise ValueError("an Ed25519 key is 32 bytes")
            key = PublicKey(
                kid=thumbprint(raw), purpose=str(jwk.get("purpose", PURPOSE_TOMBSTONE)), raw=raw,
                valid_from=parse_time(jwk.get("valid_from")), valid_until=parse_time(jwk.get("valid_until")),
                compromised_at=parse_time(jwk.get("compromised_at")), note_name=jwk.get("note_name"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"key {index} is malformed: {exc}") from None
        if jwk.get("kid") not in (None, key.kid):
            raise ValueError(f"key {index}: its kid is not the thumbprint of its key")
        keys[key.kid] = key
    return keys
