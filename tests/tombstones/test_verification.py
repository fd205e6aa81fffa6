"""Every tampering is rejected with the right reason, by the server and by the offline verification,
which share one implementation; a genuine receipt passes; a changed byte anywhere is caught."""
import base64
import json

import pytest
from django.db import transaction
from django.utils import timezone

from tombstones.jwk import jwks_parse
from tombstones.models import SigningKey
from tombstones.selectors import jwks_document
from tombstones.services import key_mark_compromised, receipt_build, tombstone_verify
from tombstones.verification import GENUINE, REASONS, verify_receipt

from .factories import TenantFactory, statement_make, tombstone_make
from .tampering import MALFORMED_PASTES, TAMPERINGS

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_receipt():
    """The receipt of the middle one of three tombstones: a proof with siblings on both sides."""
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant, contents=[f"content {i}", "shared"]) for i in range(3)]
    return receipt_build(tombstone_id=tombstones[1].id)


def offline(document, **kwargs):
    """The offline verifier's view: only the published key set, as JSON text, and the receipt."""
    return verify_receipt(document, jwks_parse(json.loads(json.dumps(jwks_document()))), **kwargs)


def test_genuine_receipt_passes_every_check_on_server_and_offline(logged_receipt):
    for report in (tombstone_verify(document=logged_receipt), offline(logged_receipt)):
        assert report.code == GENUINE, report.message
        assert all(check["passed"] for check in report.checks)
        assert report.summary["records"] == 2 and report.summary["authority"] == "GDPR Art. 17"
    assert [c["check"] for c in tombstone_verify(document=logged_receipt).checks][-1] == "consistency"


@pytest.mark.parametrize("name, tamper, code", TAMPERINGS, ids=[t[0] for t in TAMPERINGS])
def test_tampered_receipt_is_rejected_with_the_right_reason(logged_receipt, name, tamper, code):
    tampered = tamper(logged_receipt)
    original_checkpoint = logged_receipt["checkpoint"]
    server = tombstone_verify(document=tampered)
    local = offline(tampered, other_checkpoint=original_checkpoint, consistency_proof=[])
    assert (server.code, local.code) == (code, code), (server.message, local.message)
    assert not server.genuine and server.summary is None
    assert server.message.startswith(REASONS[code].split("{")[0])


def test_server_names_the_field_that_was_changed(logged_receipt):
    from .tampering import payload_field_changed

    report = tombstone_verify(document=payload_field_changed(logged_receipt))
    assert "execution.records[0].outcome" in report.message


def test_offline_without_a_proof_says_not_in_the_log_and_the_server_completes_it(logged_receipt):
    bare = logged_receipt["envelope"]
    assert offline(bare).code == "not_in_log"
    assert tombstone_verify(document=bare).code == GENUINE


@pytest.mark.parametrize("paste", MALFORMED_PASTES)
def test_malformed_paste_is_reported_as_malformed_not_an_error(paste):
    assert tombstone_verify(document=paste).code == "malformed"
    assert offline(paste).code == "malformed"


def test_signature_by_a_key_compromised_before_the_checkpoint_is_rejected(logged_receipt):
    kid = logged_receipt["envelope"]["signatures"][0]["keyid"]
    key_mark_compromised(kid=kid, compromised_at=timezone.now() - timezone.timedelta(minutes=5), actor="security")
    for report in (tombstone_verify(document=logged_receipt), offline(logged_receipt)):
        assert report.code == "key_compromised"


def test_checkpoint_by_a_compromised_checkpoint_key_is_rejected(logged_receipt):
    key = SigningKey.objects.get(purpose="checkpoint")
    key_mark_compromised(kid=key.kid, compromised_at=timezone.now() - timezone.timedelta(minutes=5), actor="security")
    assert offline(logged_receipt).code == "checkpoint_key_compromised"


def test_checkpoint_inconsistent_with_an_earlier_one_is_rejected_offline(logged_receipt):
    """An earlier checkpoint the subject kept, and a later one from a rewritten log: no proof joins them."""
    from .tampering import forked_checkpoint

    earlier = logged_receipt["checkpoint"]
    with transaction.atomic():
        tombstone_make()  # the log grows; the fork claims a tree of the same size
    forked = forked_checkpoint(receipt_build(tombstone_id=json.loads(base64.b64decode(
        logged_receipt["envelope"]["payload"]))["tombstone_id"]))
    assert offline(forked).genuine  # alone, the forked receipt checks out: only the earlier checkpoint exposes it
    report = offline(forked, other_checkpoint=earlier, consistency_proof=[])
    assert report.code == "checkpoint_inconsistent"


def test_a_changed_character_anywhere_in_the_receipt_is_caught(logged_receipt):
    receipt = {key: value for key, value in logged_receipt.items() if key != "salts"}
    text = json.dumps(receipt, separators=(",", ":"))
    keys = jwks_parse(jwks_document())
    caught = {}
    for position, char in enumerate(text):
        replacement = ("0" if char != "0" else "1") if char.isdigit() else ("x" if char != "x" else "y")
        if char.isalpha():
            replacement = chr((ord(char.lower()) - 97 + 1) % 26 + 97)
            replacement = replacement.upper() if char.isupper() else replacement
        report = verify_receipt(text[:position] + replacement + text[position + 1:], keys)
        assert not report.genuine, f"changing {char!r} at {position} went unnoticed: {text[position-30:position+30]}"
        caught[report.code] = caught.get(report.code, 0) + 1
    assert {"malformed", "field_changed", "signature_mismatch", "unknown_key", "proof_mismatch",
            "checkpoint_signature_mismatch"} <= caught.keys()


def test_content_coverage_with_the_receipt_salts_and_with_a_given_salt(logged_receipt):
    salts = logged_receipt["salts"]
    assert tombstone_verify(document=logged_receipt, content="content 1").coverage.covered
    salt = next(iter(salts.values()))
    assert tombstone_verify(document=logged_receipt, content="content 1", salt=salt).coverage.covered
    assert not tombstone_verify(document=logged_receipt, content="content 2").coverage.covered
    assert not tombstone_verify(document=logged_receipt, content="content 1 ").coverage.covered


def test_salted_commitments_do_not_reveal_guessable_content(logged_receipt):
    """A dictionary attack on the public tombstone: hashing the right guess without the salt finds nothing."""
    import hashlib

    payload = base64.b64decode(logged_receipt["envelope"]["payload"]).decode()
    assert hashlib.sha256(b"content 1").hexdigest() not in payload
    assert hashlib.sha256(b"shared").hexdigest() not in payload


def test_summary_shows_counts_kinds_dates_and_authority_never_ids_or_content(logged_receipt):
    summary = tombstone_verify(document=logged_receipt).summary
    assert summary["records_by_outcome"] == {"deleted": 2}
    assert summary["derivatives_by_kind"] == {"embedding": 1, "summary": 1}
    assert summary["deferred_deadlines"] == ["2026-03-01T00:00:00Z"]
    flat = json.dumps(summary)
    for secret in ["content 1", "shared", "1000", "operator:7", "subject-42", *logged_receipt["salts"].values()]:
        assert secret not in flat


def test_statement_made_for_the_test_is_independent_of_the_memory_app():
    statement, salts = statement_make(["x"])
    assert set(statement) == {"request", "scope", "execution", "propagation", "time"} and len(salts) == 1
