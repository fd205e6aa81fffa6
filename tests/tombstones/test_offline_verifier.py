"""The offline verifier: no database, no network, no Django; exit 0 only when every check passes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tombstones.selectors import jwks_document
from tombstones.services import receipt_build

from .factories import TenantFactory, tombstone_make
from .tampering import TAMPERINGS

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
# No Django settings and a database that does not exist: the verifier must need neither.
OFFLINE_ENV = {"PATH": os.environ.get("PATH", ""), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
               "PYTHONPATH": str(ROOT)}


def run_offline(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tombstones.verify", *map(str, args)], cwd=ROOT, env=OFFLINE_ENV,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def files(tmp_path):
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant, contents=[f"my data {i}"]) for i in range(3)]
    receipt = receipt_build(tombstone_id=tombstones[1].id)
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    (tmp_path / "keys.json").write_text(json.dumps(jwks_document()))
    return tmp_path, receipt


def test_genuine_receipt_exits_zero_without_django_or_a_database(files):
    path, _ = files
    result = run_offline(path / "receipt.json", path / "keys.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "genuine:" in result.stdout


def test_the_verifier_modules_import_no_django():
    code = ("import sys, tombstones.verify, tombstones.verification; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')], 'django imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=OFFLINE_ENV, check=True, timeout=60)


@pytest.mark.parametrize("name, tamper, code", TAMPERINGS, ids=[t[0] for t in TAMPERINGS])
def test_tampered_receipt_exits_one_with_the_reason(files, name, tamper, code):
    path, receipt = files
    (path / "tampered.json").write_text(json.dumps(tamper(receipt)))
    (path / "earlier.txt").write_text(receipt["checkpoint"])
    (path / "proof.json").write_text(json.dumps({"hashes": []}))
    result = run_offline(path / "tampered.json", path / "keys.json", "--other-checkpoint", path / "earlier.txt",
                         "--consistency-proof", path / "proof.json", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert json.loads(result.stdout)["code"] == code


def test_content_coverage_decides_the_exit_status(files):
    path, _ = files
    (path / "mine.txt").write_text("my data 1")
    (path / "not-mine.txt").write_text("my data 2")
    assert run_offline(path / "receipt.json", path / "keys.json", "--content-file", path / "mine.txt").returncode == 0
    result = run_offline(path / "receipt.json", path / "keys.json", "--content-file", path / "not-mine.txt")
    assert result.returncode == 1 and "Not covered" in result.stdout


@pytest.mark.parametrize("keys_text", ["not json", '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}]}',
                                       "[" * 1_000 + "]" * 1_000])
def test_unusable_key_set_exits_two(files, keys_text):
    path, _ = files
    (path / "bad-keys.json").write_text(keys_text)
    assert run_offline(path / "receipt.json", path / "bad-keys.json").returncode == 2


def test_missing_receipt_file_exits_two(files):
    path, _ = files
    assert run_offline(path / "nope.json", path / "keys.json").returncode == 2


def test_management_command_gives_the_same_verdicts(files, capsys):
    path, receipt = files
    call_command("tombstone_verify", str(path / "receipt.json"), str(path / "keys.json"))
    assert "genuine:" in capsys.readouterr().out
    (path / "tampered.json").write_text(json.dumps(TAMPERINGS[0][1](receipt)))
    with pytest.raises(SystemExit) as exited:
        call_command("tombstone_verify", str(path / "tampered.json"), str(path / "keys.json"), "--json")
    assert exited.value.code == 1
    assert json.loads(capsys.readouterr().out)["code"] == "field_changed"
