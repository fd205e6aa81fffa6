"""Signing keys: creation, the passphrase that encrypts them at rest, rotation and compromise."""
from __future__ import annotations

import hashlib
import os
import secrets
import warnings
from datetime import datetime
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..errors import TombstoneError
from ..jwk import thumbprint
from ..models import KeyAction, KeyEvent, KeyPurpose, SigningKey

# Private keys at rest: b"FLK1" || log2(N) || salt (16) || nonce (12) || AES-256-GCM(raw key, aad=kid), the
# AES key derived from the passphrase with scrypt (N=2**LEDGER_SIGNING_KEY_SCRYPT_LOG2_N, 2**15: ~0.1 s, once per
# key per process; decrypted keys are cached). (cryptography's PKCS#8 `BestAvailableEncryption` uses PBKDF2 with
# 2,048 rounds: too few.)
SEALED_VERSION = b"FLK1"
SCRYPT_LOG2_N_RANGE = range(10, 21)
DEV_PASSPHRASE_FILE = "tombstone-signing-passphrase"
_dev_passphrases: dict[Path, bytes] = {}
_private_keys: dict[tuple[str, bytes], Ed25519PrivateKey] = {}
# purpose -> the key this process last saw current. A hint only: whoever signs with it confirms it under the
# log's lock (`log_lock(key_purpose=...)`), so a rotation by another process is never missed.
_current_keys: dict[str, SigningKey] = {}


def _dev_passphrase() -> bytes:
    """A generated passphrase persisted under VAR_DIR, so that web and worker processes share it."""
    path = Path(settings.VAR_DIR) / DEV_PASSPHRASE_FILE
    if path in _dev_passphrases:
        return _dev_passphrases[path]
    if not path.exists():
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        temporary.write_text(secrets.token_urlsafe(32))
        temporary.chmod(0o600)
        try:
            os.link(temporary, path)  # atomic create-if-absent: the first process to get here wins
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    warnings.warn(f"LEDGER_SIGNING_PASSPHRASE is not set: the signing keys are encrypted with the development "
                  f"passphrase in {path}", RuntimeWarning, stacklevel=2)
    _dev_passphrases[path] = path.read_text().strip().encode()
    return _dev_passphrases[path]


def passphrase_get() -> bytes:
    configured = settings.LEDGER_SIGNING_PASSPHRASE
    return configured.encode() if configured else _dev_passphrase()


def _derive(passphrase: bytes, salt: bytes, log2_n: int) -> AESGCM:
    return AESGCM(Scrypt(salt=salt, length=32, n=2**log2_n, r=8, p=1).derive(passphrase))


def _seal(private: Ed25519PrivateKey, passphrase: bytes, *, kid: str) -> bytes:
    raw = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
    log2_n = settings.LEDGER_SIGNING_KEY_SCRYPT_LOG2_N
    if log2_n not in SCRYPT_LOG2_N_RANGE:
        raise ValueError(f"LEDGER_SIGNING_KEY_SCRYPT_LOG2_N must be from 10 to 20, not {log2_n}")
    salt, nonce = os.urandom(16), os.urandom(12)
    sealed = _derive(passphrase, salt, log2_n).encrypt(nonce, raw, kid.encode())
    return SEALED_VERSION + bytes([log2_n]) + salt + nonce + sealed


def _unseal(blob: bytes, passphrase: bytes, *, kid: str) -> Ed25519PrivateKey:
    if not blob.startswith(SEALED_VERSION) or blob[4] not in SCRYPT_LOG2_N_RANGE:
        raise ValueError("unknown sealed key format")
    log2_n, salt, nonce, sealed = blob[4], blob[5:21], blob[21:33], blob[33:]
    return Ed25519PrivateKey.from_private_bytes(_derive(passphrase, salt, log2_n).decrypt(nonce, sealed, kid.encode()))


def _private_cache_key(kid: str, passphrase: bytes) -> tuple[str, bytes]:
    return kid, hashlib.sha256(passphrase).digest()


def key_private(key: SigningKey) -> Ed25519PrivateKey:
    """The decrypted private key (cached per process, per key and passphrase)."""
    passphrase = passphrase_get()
    cache_key = _private_cache_key(key.kid, passphrase)
    if cache_key not in _private_keys:
        try:
            private = _unseal(bytes(key.private_key_encrypted), passphrase, kid=key.kid)
        except (InvalidTag, ValueError):
            raise TombstoneError("signing_key_unavailable", "The signing key cannot be decrypted with the configured "
                                 "passphrase (LEDGER_SIGNING_PASSPHRASE).", status_code=503) from None
        _private_keys[cache_key] = private
    return _private_keys[cache_key]


def _key_create(*, purpose: str, actor: str, now: datetime) -> SigningKey:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    kid = thumbprint(public)
    passphrase = passphrase_get()
    key = SigningKey.objects.create(
        kid=kid, purpose=purpose, public_key=public,
        private_key_encrypted=_seal(private, passphrase, kid=kid),
        note_name=settings.LEDGER_LOG_ORIGIN if purpose == KeyPurpose.CHECKPOINT else "",
        created_at=now,
    )
    KeyEvent.objects.create(key=key, action=KeyAction.CREATED, actor=actor, at=now)
    # This process need not derive the AES key again to sign with it (if the transaction rolls back, the entry is
    # a key nobody signs with).
    _private_keys[_private_cache_key(kid, passphrase)] = private
    return key


def key_current(*, purpose: str) -> SigningKey:
    """The key that signs for `purpose` now, created on first use."""
    key = SigningKey.objects.filter(purpose=purpose, retired_at__isnull=True).first()
    if key is None:
        try:
            with transaction.atomic():
                key = _key_create(purpose=purpose, actor="system:first-use", now=timezone.now())
        except IntegrityError:  # another process created it first
            key = SigningKey.objects.get(purpose=purpose, retired_at__isnull=True)
    _current_keys[purpose] = key
    return key


def key_current_hint(*, purpose: str) -> SigningKey:
    """The key this process last saw current for `purpose` and has opened with today's passphrase, without a
    query; else `key_current`.

    It may have been rotated since, by another process: sign with it only where the caller then checks,
    under the log's lock, that it is still the current one (as `tombstones_issue_many` does).
    """
    key = _current_keys.get(purpose)
    if key is not None and _private_cache_key(key.kid, passphrase_get()) in _private_keys:
        return key
    return key_current(purpose=purpose)


def keys_ensure() -> None:
    """Make sure a current key exists for every purpose, so that the published key set is complete."""
    for purpose in KeyPurpose.values:
        key_current(purpose=purpose)


def key_rotate(*, purpose: str, actor: str) -> SigningKey:
    """Retire the current key for `purpose` (it keeps verifying what it signed) and make a new one."""
    if purpose not in KeyPurpose.values:
        raise TombstoneError("invalid_parameter", f"Unknown key purpose {purpose!r}.", {"parameter": "purpose"})
    now = timezone.now()
    with transaction.atomic():
        current = SigningKey.objects.select_for_update().filter(purpose=purpose, retired_at__isnull=True).first()
        if current is not None:
            SigningKey.objects.filter(pk=current.pk).update(retired_at=now)
            KeyEvent.objects.create(key=current, action=KeyAction.RETIRED, actor=actor, at=now)
        key = _key_create(purpose=purpose, actor=actor, now=now)
    _current_keys[purpose] = key
    return key


def key_mark_compromised(*, kid: str, compromised_at: datetime, actor: str) -> SigningKey:
    """Record that a key's signatures cannot be trusted from `compromised_at` on; rotate it if current.

    The time can only move earlier: a later report never shortens an earlier one's reach.
    """
    with transaction.atomic():
        key = SigningKey.objects.select_for_update().filter(kid=kid).first()
        if key is None:
            raise TombstoneError("key_not_found", f"No key {kid!r}.", status_code=404)
        if key.compromised_at is None or compromised_at < key.compromised_at:
            SigningKey.objects.filter(pk=key.pk).update(compromised_at=compromised_at)
            KeyEvent.objects.create(key=key, action=KeyAction.COMPROMISED, actor=actor, at=timezone.now(),
                                    detail={"compromised_at": compromised_at.isoformat()})
        if key.retired_at is None:
            key_rotate(purpose=key.purpose, actor=actor)
        key.refresh_from_db()
        return key
