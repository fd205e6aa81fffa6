"""Keys: encrypted at rest, a stable development passphrase, rotation that keeps old tombstones verifying,
compromise that stops trusting what comes after it, and a published key set without private parts."""
import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tombstones.errors import TombstoneError
from tombstones.jwk import b64url_decode, thumbprint
from tombstones.models import KeyEvent, SigningKey
from tombstones.selectors import jwks_document, keys_published
from tombstones.services import key_current, key_mark_compromised, key_rotate, receipt_build
from tombstones.services import keys as keys_service
from tombstones.verification import verify_receipt

from .factories import receipt_make, tombstone_make

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_private_key_at_rest_is_encrypted_and_opens_only_with_the_passphrase(settings, monkeypatch):
    key = key_current(purpose="tombstone")
    blob = bytes(SigningKey.objects.get(pk=key.pk).private_key_encrypted)
    created_with = keys_service.key_private(key).private_bytes_raw()
    monkeypatch.setattr(keys_service, "_private_keys", {})  # as another process: open it from the table
    raw = keys_service.key_private(key).private_bytes_raw()
    assert raw == created_with
    assert raw not in blob and blob.startswith(b"FLK1")
    settings.LEDGER_SIGNING_PASSPHRASE = "a wrong passphrase"
    with pytest.raises(TombstoneError) as caught:
        keys_service.key_private(key)
    assert (caught.value.code, caught.value.status_code) == ("signing_key_unavailable", 503)


def test_keys_are_sealed_with_the_configured_scrypt_cost_and_open_at_any_cost_they_record(settings, monkeypatch):
    from config import settings as production_settings

    assert production_settings.LEDGER_SIGNING_KEY_SCRYPT_LOG2_N == 15  # only the test settings lower it
    settings.LEDGER_SIGNING_KEY_SCRYPT_LOG2_N = 15
    key = key_current(purpose="tombstone")
    assert bytes(key.private_key_encrypted)[4] == 15
    created_with = keys_service.key_private(key).private_bytes_raw()
    settings.LEDGER_SIGNING_KEY_SCRYPT_LOG2_N = 10  # a later setting does not change how a sealed key opens
    monkeypatch.setattr(keys_service, "_private_keys", {})
    assert keys_service.key_private(key).private_bytes_raw() == created_with
    for unsafe in (9, 21):
        settings.LEDGER_SIGNING_KEY_SCRYPT_LOG2_N = unsafe
        with pytest.raises(ValueError, match="must be from 10 to 20"):
            key_rotate(purpose="tombstone", actor="test")
    assert list(SigningKey.objects.filter(purpose="tombstone").values_list("kid", "retired_at")) == [(key.kid, None)]


def test_unset_passphrase_warns_and_uses_one_generated_secret_shared_by_processes(settings, tmp_path, monkeypatch):
    settings.LEDGER_SIGNING_PASSPHRASE = ""
    settings.VAR_DIR = tmp_path
    monkeypatch.setattr(keys_service, "_dev_passphrases", {})
    with pytest.warns(RuntimeWarning, match="LEDGER_SIGNING_PASSPHRASE is not set"):
        first = keys_service.passphrase_get()
    path = tmp_path / keys_service.DEV_PASSPHRASE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) >= 32
    other_process = subprocess.run(
        [sys.executable, "-W", "ignore", "-c",
         "import django; django.setup(); from tombstones.services import passphrase_get; "
         "print(passphrase_get().decode())"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "LEDGER_VAR_DIR": str(tmp_path),
             "LEDGER_SIGNING_PASSPHRASE": ""})
    assert other_process.stdout.strip().encode() == first


def test_rotation_retires_the_key_and_its_tombstones_keep_verifying():
    receipt = receipt_make()
    old = SigningKey.objects.get(purpose="tombstone")
    new = key_rotate(purpose="tombstone", actor="operator:1")
    assert new.kid != old.kid and key_current(purpose="tombstone") == new
    later = tombstone_make()
    assert later.key_id == new.pk
    assert verify_receipt(receipt, keys_published()).genuine
    published = {jwk["kid"]: jwk for jwk in jwks_document()["keys"]}
    assert published[old.kid]["valid_until"] is not None and published[new.kid]["valid_until"] is None
    assert list(KeyEvent.objects.filter(key=old).values_list("action", flat=True)) == ["created", "retired"]


def test_tombstone_logged_after_the_key_was_compromised_is_rejected_but_earlier_ones_stand():
    earlier = receipt_make()
    key = SigningKey.objects.get(purpose="tombstone")
    key_mark_compromised(kid=key.kid, compromised_at=timezone.now() + timedelta(seconds=1), actor="security")
    assert verify_receipt(earlier, keys_published()).genuine  # its checkpoint predates the compromise
    key_mark_compromised(kid=key.kid, compromised_at=timezone.now() - timedelta(hours=1), actor="security")
    report = verify_receipt(earlier, keys_published())
    assert report.code == "key_compromised" and "compromised" in report.message


def test_compromised_current_key_is_replaced_so_nothing_more_is_signed_with_it():
    tombstone_make()
    key = SigningKey.objects.get(purpose="tombstone")
    key_mark_compromised(kid=key.kid, compromised_at=timezone.now(), actor="security")
    key.refresh_from_db()
    assert key.retired_at is not None and key.compromised_at is not None
    assert tombstone_make().key_id != key.pk


def test_compromise_time_only_moves_earlier():
    key = key_current(purpose="tombstone")
    first = timezone.now() - timedelta(days=1)
    key_mark_compromised(kid=key.kid, compromised_at=first, actor="a")
    key_mark_compromised(kid=key.kid, compromised_at=first + timedelta(hours=5), actor="b")
    key.refresh_from_db()
    assert key.compromised_at == first


def test_unknown_key_cannot_be_marked_compromised():
    with pytest.raises(TombstoneError) as caught:
        key_mark_compromised(kid="nope", compromised_at=timezone.now(), actor="a")
    assert caught.value.code == "key_not_found"


def test_published_key_set_has_every_key_with_validity_and_no_private_part():
    receipt_make()
    key_rotate(purpose="tombstone", actor="a")
    document = jwks_document()
    assert len(document["keys"]) == 3  # two tombstone keys and the checkpoint key
    for jwk in document["keys"]:
        assert {"kty": "OKP", "crv": "Ed25519"}.items() <= jwk.items()
        assert jwk["kid"] == thumbprint(b64url_decode(jwk["x"]))
        assert {"valid_from", "valid_until", "compromised_at", "purpose"} <= jwk.keys()
        assert "d" not in jwk and not any("private" in name for name in jwk)
    checkpoint_keys = [jwk for jwk in document["keys"] if jwk["purpose"] == "checkpoint"]
    assert checkpoint_keys[0]["note_name"] == "ledger.test/tombstones"


def test_checkpoints_are_signed_by_a_key_of_their_own():
    receipt = receipt_build(tombstone_id=tombstone_make().id)
    tombstone_kid = receipt["envelope"]["signatures"][0]["keyid"]
    checkpoint_key = SigningKey.objects.get(purpose="checkpoint")
    assert checkpoint_key.kid != tombstone_kid
    assert receipt["checkpoint"].splitlines()[-1].startswith("\u2014 ledger.test/tombstones ")
