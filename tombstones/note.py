"""Checkpoints as C2SP signed notes (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), pure: no Django.

    forgetting-ledger.example/tombstones        <- origin: the log's unique name
    1024                                         <- tree size
    3h3zL8...=                                   <- base64 root hash
    time 2025-12-02T10:00:00Z                    <- extension line: when the log signed this checkpoint
                                                 <- blank line
    — forgetting-ledger.example/tombstones AbCd...  <- signature line: key name, base64(key hash || sig)

For Ed25519 the key hash is the first 4 bytes of SHA-256(key name || 0x0A || 0x01 || public key) and
the signature covers the note text (every body line with its newline).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from .dsse import b64decode, b64encode
from .jwk import PublicKey, format_time, parse_time

SIGNATURE_PREFIX = "\u2014 "  # em dash, space
ED25519_TYPE = b"\x01"
MAX_NOTE_BYTES = 16 * 1024


class NoteError(ValueError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    time: datetime | None
    body: str


def key_hash(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519_TYPE + public_key).digest()[:4]


def verifier_key(name: str, public_key: bytes) -> str:
    """The note verifier key string: `name+hexhash+base64(0x01 || key)`."""
    return f"{name}+{key_hash(name, public_key).hex()}+{b64encode(ED25519_TYPE + public_key)}"


def checkpoint_body(*, origin: str, size: int, root: bytes, time: datetime) -> str:
    return f"{origin}\n{size}\n{b64encode(root)}\ntime {format_time(time)}\n"


def note_sign(body: str, *, name: str, public_key: bytes, sign: Callable[[bytes], bytes]) -> str:
    signature = sign(body.encode("utf-8"))
    return f"{body}\n{SIGNATURE_PREFIX}{name} {b64encode(key_hash(name, public_key) + signature)}\n"


def checkpoint_parse(text: object) -> tuple[Checkpoint, list[tuple[str, bytes, bytes]]]:
    """The checkpoint and its signature lines as (name, key hash, signature); NoteError when malformed."""
    if not isinstance(text, str) or len(text.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise NoteError("a checkpoint is a signed note of a few lines")
    text = text.replace("\r\n", "\n")
    body, sep, signature_block = text.partition("\n\n")
    if not sep:
        raise NoteError("the checkpoint has no signature block (no blank line after its body)")
    body += "\n"
    lines = body.split("\n")[:-1]
    if len(lines) < 3:
        raise NoteError("a checkpoint body has an origin, a tree size and a root hash")
    origin, size_line, root_line, *extensions = lines
    if not re.fullmatch(r"0|[1-9][0-9]{0,18}", size_line):
        raise NoteError("the checkpoint's tree size is not a decimal number")
    try:
        root = b64decode(root_line)
    except ValueError:
        raise NoteError("the checkpoint's root hash is not base64") from None
    if len(root) != 32:
        raise NoteError("the checkpoint's root hash is not 32 bytes")
    time = None
    for line in extensions:
        if line.startswith("time "):
            try:
                time = parse_time(line[5:])
            except ValueError:
                raise NoteError("the checkpoint's time line is not an RFC 3339 time") from None
    signatures = []
    for line in signature_block.split("\n"):
        if not line:
            continue
        if not line.startswith(SIGNATURE_PREFIX) or line.count(" ") != 2:
            raise NoteError("a checkpoint signature line reads `— name base64`")
        name, blob = line[len(SIGNATURE_PREFIX):].split(" ")
        try:
            raw = b64decode(blob)
        except ValueError:
            raise NoteError("a checkpoint signature is not base64") from None
        if len(raw) < 5:
            raise NoteError("a checkpoint signature is too short")
        signatures.append((name, raw[:4], raw[4:]))
    if not signatures:
        raise NoteError("the checkpoint carries no signature")
    return Checkpoint(origin=origin, size=int(size_line), root=root, time=time, body=body), signatures


def checkpoint_signer(checkpoint: Checkpoint, signatures: list[tuple[str, bytes, bytes]],
                      keys: Iterable[PublicKey]) -> tuple[PublicKey | None, bool]:
    """The published key that signed the checkpoint, and whether its signature verifies.

    (None, False) when no signature line names a known checkpoint key.
    """
    known = [key for key in keys if key.note_name]
    for name, hash_, signature in signatures:
        for key in known:
            if key.note_name == name and key_hash(name, key.raw) == hash_:
                return key, key.verify(signature, checkpoint.body.encode("utf-8"))
    return None, False
