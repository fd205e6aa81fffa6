"""The development mail backend (config/mail.py) and the mail's words (issue 21, item 9): each mail is one .eml
file and ONE log line (not the whole message, base64 attachment and all); the .eml parses and its attachment, a
real workflow run's receipt, verifies as sent; counts in the mail agree with their nouns ("8 embeddings")."""
import email
import json
import logging
import os
import subprocess
import sys
from collections import namedtuple
from email import policy

import pytest
from django.core.mail import EmailMessage

from config.mail import FileEmailBackend
from dsr.models import ItemKind, ItemOutcome
from dsr.services import notify
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.tombstones.test_offline_verifier import ROOT, run_offline
from tombstones.selectors import jwks_document
from tombstones.services import tombstone_verify


@pytest.fixture
def file_mail(settings, tmp_path, caplog):
    settings.EMAIL_BACKEND = "config.mail.FileEmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    caplog.set_level(logging.DEBUG)
    return tmp_path / "mail"


def mail_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "config.mail"]


@pytest.mark.django_db
def test_a_workflows_mail_is_one_eml_file_and_one_log_line_and_its_receipt_verifies(file_mail, caplog, tmp_path):
    scenario = erasure_scenario()
    request = verified_request(scenario)

    run_to_end(request.pk)

    (path,) = file_mail.glob("*.eml")
    (record,) = mail_records(caplog)
    line = record.getMessage()
    assert record.levelno == logging.INFO and "\n" not in line
    assert "subject@example.org" in line and f"request {request.pk}" in line and str(path) in line
    assert not [r for r in caplog.records if "Content-Transfer-Encoding" in r.getMessage()
                or len(r.getMessage()) > 500], "no log line carries the message itself"
    assert path.stat().st_mode & 0o077 == 0, "only the service's user reads a mail (it holds the salts)"

    message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    assert message["To"] == "subject@example.org"
    (attachment,) = list(message.iter_attachments())
    assert attachment.get_filename() == f"receipt-request-{request.pk}.json"
    sent = attachment.get_content()
    sent = sent.decode() if isinstance(sent, bytes) else sent
    assert tombstone_verify(document=sent).code == "genuine"
    (tmp_path / "receipt.json").write_text(sent)
    (tmp_path / "keys.json").write_text(json.dumps(jwks_document()))
    result = run_offline(tmp_path / "receipt.json", tmp_path / "keys.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Copies derived from them, also erased: 5 embeddings, 1 summary." in message.get_body().get_content()


def test_each_of_several_mails_is_its_own_file_and_its_own_line(file_mail, caplog):
    messages = [EmailMessage(subject=f"mail {n}", body="b" * 10_000, to=[f"s{n}@example.org"]) for n in range(3)]
    for message in messages:
        message.attach("big.json", "x" * 100_000, "application/json")

    assert FileEmailBackend().send_messages(messages) == 3

    assert len(list(file_mail.glob("*.eml"))) == 3
    lines = [r.getMessage() for r in mail_records(caplog)]
    assert len(lines) == 3 and all(len(line) < 300 for line in lines)
    assert not list(file_mail.glob(".*partial"))


def settings_in(env: dict) -> dict:
    """The mail settings config/settings.py makes in a fresh process with this environment (and no other)."""
    code = ("import json, config.settings as s; print(json.dumps({k: getattr(s, k) for k in dir(s) "
            "if k.startswith('EMAIL_')}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_embedded_default_writes_mail_files_under_the_var_dir(tmp_path):
    mail = settings_in({"LEDGER_VAR_DIR": str(tmp_path)})
    assert mail["EMAIL_BACKEND"] == "config.mail.FileEmailBackend"
    assert mail["EMAIL_FILE_PATH"] == str(tmp_path / "mail")


def test_production_reads_smtp_settings_from_the_environment(tmp_path):
    mail = settings_in({"LEDGER_VAR_DIR": str(tmp_path), "EMAIL_URL": "smtp+tls://mailer:secret@mail.example.org:587"})
    assert mail["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (mail["EMAIL_HOST"], mail["EMAIL_PORT"], mail["EMAIL_USE_TLS"]) == ("mail.example.org", 587, True)
    mail = settings_in({"LEDGER_VAR_DIR": str(tmp_path), "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                        "EMAIL_HOST": "smtp.example.org", "EMAIL_PORT": "465", "EMAIL_USE_SSL": "true"})
    assert (mail["EMAIL_BACKEND"], mail["EMAIL_HOST"], mail["EMAIL_PORT"], mail["EMAIL_USE_SSL"]) == (
        "django.core.mail.backends.smtp.EmailBackend", "smtp.example.org", 465, True)


Item = namedtuple("Item", "kind outcome artifact_kind")


@pytest.mark.parametrize("items, line", [
    ([Item(ItemKind.ARTIFACT, ItemOutcome.DELETED, "embedding")] * 8,
     "Copies derived from them, also erased: 8 embeddings."),
    ([Item(ItemKind.ARTIFACT, ItemOutcome.DELETED, "embedding"), Item(ItemKind.ARTIFACT, ItemOutcome.DELETED, "summary"),
      Item(ItemKind.ARTIFACT, ItemOutcome.NOTIFIED, "fleet_copy")] * 2,
     "Copies derived from them, also erased: 2 embeddings, 2 copies held by other agents, 2 summaries."),
    ([Item(ItemKind.RECORD, ItemOutcome.DELETED, None), Item(ItemKind.RECORD, ItemOutcome.REDACTED, None)],
     "Erased: 1 record deleted, 1 record whose content was removed"),
])
def test_the_mail_counts_agree_with_their_nouns(items, line):
    assert line in "\n".join(notify._erased_lines(items))
