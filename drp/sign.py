"""Sign a DRP 0.9.4 request as an authorized agent does (base64(Ed25519 signature || JSON), section 3.07.1):
a development aid, to try the endpoints with curl. It needs neither Django nor a database.

    python -m drp.sign --new-key agent.key          # writes a private key, prints its verify key (base64)
    python -m drp.sign agent.key '{"agent-id": ...}' # prints the signed body, to send as text/plain

`issued-at` and `expires-at` are filled in (now, and ten minutes later: the window the spec recommends) when the
message does not have them.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PrivateFormat, PublicFormat, NoEncryption

WINDOW = timedelta(minutes=10)


def _stamp(at: datetime) -> str:
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")


def key_new(path: Path) -> str:
    key = Ed25519PrivateKey.generate()
    path.write_text(base64.b64encode(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())).decode())
    path.chmod(0o600)
    return verify_key(key)


def verify_key(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def sign(key: Ed25519PrivateKey, message: dict) -> str:
    now = datetime.now(UTC)
    message = {"issued-at": _stamp(now), "expires-at": _stamp(now + WINDOW), **message}
    raw = json.dumps(message).encode()
    return base64.b64encode(key.sign(raw) + raw).decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drp.sign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-key", action="store_true", help="write a new private key to KEY_FILE")
    parser.add_argument("key_file", type=Path)
    parser.add_argument("message", nargs="?", help="the JSON object to sign")
    args = parser.parse_args(argv)
    if args.new_key:
        print(key_new(args.key_file))
        return 0
    if args.message is None:
        parser.error("give the JSON message to sign")
    key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(args.key_file.read_text().strip()))
    message = json.loads(args.message)
    if not isinstance(message, dict):
        parser.error("the message must be a JSON object")
    print(sign(key, message))
    return 0


if __name__ == "__main__":
    sys.exit(main())
