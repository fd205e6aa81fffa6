"""DRP 0.9.4 signed messages (section 3.07): base64(Ed25519 signature || JSON), libsodium's "combined mode".

Verified with `cryptography`'s Ed25519 (already a dependency, the same algorithm as libsodium's
`crypto_sign`): a 64-byte signature, then the signed bytes. Nothing here touches the database.
"""
from __future__ import annotations

import base64
import binascii
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from config.parsers import MAX_DEPTH, UNSTORABLE
from drp import errors

SIGNATURE_BYTES = 64
VERIFY_KEY_BYTES = 32
# A signed exercise is a few hundred bytes; a body over this is not one.
MAX_MESSAGE_BYTES = 16 * 1024


def verify_key_load(verify_key: str) -> Ed25519PublicKey:
    """The public key from its base64 form (the directory's `verify_key`), or `invalid_verify_key`."""
    try:
        raw = base64.b64decode(verify_key, validate=True) if isinstance(verify_key, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != VERIFY_KEY_BYTES:
        raise errors.invalid("invalid_verify_key", "verify_key must be a base64 Ed25519 public key (32 bytes).")
    return Ed25519PublicKey.from_public_bytes(raw)


def _clean(value, depth: int = 0) -> None:
    """The parser's refusals (config.parsers): bounded nesting, no NUL or surrogate in any string."""
    if depth > MAX_DEPTH:
        raise errors.invalid("malformed_message", f"The signed JSON nests deeper than {MAX_DEPTH} levels.")
    if isinstance(value, str) and UNSTORABLE.search(value):
        raise errors.invalid("malformed_message", "NUL and surrogate characters are not allowed.")
    if isinstance(value, dict):
        for key, item in value.items():
            _clean(key, depth + 1)
            _clean(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _clean(item, depth + 1)


def message_open(body: bytes, *, verify_key: str) -> dict:
    """The JSON object of a signed message, verified against `verify_key`; the checks in the order the spec
    gives (decode, then signature), so an unsigned or tampered body is refused before it is read."""
    if len(body) > MAX_MESSAGE_BYTES:
        raise errors.DrpError("payload_too_large", f"A signed request is limited to {MAX_MESSAGE_BYTES} bytes.",
                              status_code=413)
    try:
        raw = base64.b64decode(body.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise errors.invalid("invalid_encoding", "The body must be base64(signature || JSON), as text/plain.") from None
    if len(raw) <= SIGNATURE_BYTES:
        raise errors.invalid("invalid_encoding", "The body is too short to hold a signature and a message.")
    signature, signed = raw[:SIGNATURE_BYTES], raw[SIGNATURE_BYTES:]
    try:
        verify_key_load(verify_key).verify(signature, signed)
    except InvalidSignature:
        raise errors.forbidden("invalid_signature", "The signature does not verify with this agent's key.") from None
    try:
        message = json.loads(signed.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise errors.invalid("malformed_message", "The signed message is not JSON.") from None
    if not isinstance(message, dict):
        raise errors.invalid("malformed_message", "The signed message must be a JSON object.")
    _clean(message)
    return message
