"""The verification page in headless Chromium: the server's verdict, and the browser's own check with
WebCrypto Ed25519 against the published keys, for genuine, tampered and malformed receipts.

Screenshots go to test-artifacts/. Chromium is Debian's (/usr/bin/chromium); it is never downloaded.
"""
import json
from pathlib import Path

import pytest
from django.utils import timezone

from tombstones.services import key_mark_compromised, receipt_build

from .factories import TenantFactory, tombstone_make
from .tampering import TAMPERINGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def receipt():
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant, contents=[f"my data {i}", "shared"]) for i in range(3)]
    return receipt_build(tombstone_id=tombstones[1].id)


def submit(page, live_server, *, receipt_text=None, tombstone_id=None, content=None):
    page.goto(f"{live_server.url}/verify/")
    if tombstone_id:
        page.fill("#id_tombstone_id", tombstone_id)
    else:
        page.fill("#id_receipt", receipt_text)
    if content:
        page.fill("#id_content", content)
    page.click("button[type=submit]")
    page.wait_for_selector("#server-verdict")


def verdicts(page, name: str) -> tuple[str, str, str]:
    """(server code, browser code, whether the browser agrees), once the browser has finished; and a screenshot."""
    page.wait_for_selector("#browser-verdict:not([hidden])", timeout=15_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"tombstones-verify-{name}.png"), full_page=True)
    browser_box = page.locator("#browser-verdict")
    return (page.locator("#server-verdict").get_attribute("data-code"), browser_box.get_attribute("data-code"),
            browser_box.get_attribute("data-agrees"))


def test_lookup_by_id_is_genuine_for_server_and_browser(page, live_server, receipt):
    submit(page, live_server, tombstone_id=receipt["tombstone_id"])
    assert verdicts(page, "genuine-lookup") == ("genuine", "genuine", "yes")
    assert "agrees with our server" in page.inner_text("#browser-verdict")
    assert "GDPR Article 17" in page.inner_text("#summary")


def test_pasted_receipt_with_content_is_genuine_and_covered(page, live_server, receipt):
    submit(page, live_server, receipt_text=json.dumps(receipt), content="my data 1")
    assert verdicts(page, "genuine-paste-covered") == ("genuine", "genuine", "yes")
    assert page.get_attribute("#coverage", "data-covered") == "yes"
    assert "my data 1" not in page.content()


@pytest.mark.parametrize("name, tamper, code", TAMPERINGS, ids=[t[0] for t in TAMPERINGS])
def test_tampered_receipt_is_rejected_with_the_same_reason_by_server_and_browser(page, live_server, receipt,
                                                                                  name, tamper, code):
    submit(page, live_server, receipt_text=json.dumps(tamper(receipt)))
    assert verdicts(page, f"tampered-{name}") == (code, code, "yes")


def test_key_compromised_before_the_checkpoint_is_rejected_by_server_and_browser(page, live_server, receipt):
    kid = receipt["envelope"]["signatures"][0]["keyid"]
    key_mark_compromised(kid=kid, compromised_at=timezone.now() - timezone.timedelta(minutes=5), actor="security")
    submit(page, live_server, receipt_text=json.dumps(receipt))
    assert verdicts(page, "key-compromised") == ("key_compromised", "key_compromised", "yes")


def test_malformed_paste_gets_a_clear_message(page, live_server, db):
    submit(page, live_server, receipt_text="{this is not a receipt")
    server, browser, agrees = verdicts(page, "malformed")
    assert (server, browser, agrees) == ("malformed", "malformed", "yes")
    assert "This is not a receipt we can read: it is not JSON." in page.inner_text("#server-verdict")


def test_without_javascript_the_server_verdict_stands_alone(browser, live_server, receipt):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    submit(page, live_server, tombstone_id=receipt["tombstone_id"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tombstones-verify-no-javascript.png"), full_page=True)
    assert page.get_attribute("#server-verdict", "data-code") == "genuine"
    assert page.locator("#browser-verdict").is_hidden()
    context.close()


def test_when_the_log_does_not_answer_the_browser_says_so_instead_of_a_verdict(page, live_server, receipt, settings):
    """A rate-limited (or unreachable) log must not read as "inconsistent": the browser says it could not check."""
    settings.LEDGER_PUBLIC_API_RATE_LIMIT = 0
    submit(page, live_server, tombstone_id=receipt["tombstone_id"])
    server, browser, agrees = verdicts(page, "log-unavailable")
    assert (server, browser) == ("genuine", "error")
    assert "could not finish" in page.inner_text("#browser-verdict")


def test_the_result_reads_in_words_with_the_codes_collapsed_and_the_command_unbroken(browser, live_server, receipt):
    context = browser.new_context(viewport={"width": 420, "height": 900})
    page = context.new_page()
    submit(page, live_server, tombstone_id=receipt["tombstone_id"])
    page.wait_for_selector("#browser-verdict:not([hidden])", timeout=15_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tombstones-verify-narrow.png"), full_page=True)
    assert "2 December 2025, 10:00 UTC" in page.inner_text("#summary")
    assert not page.locator("details.codes table").first.is_visible(), "the codes are collapsed"
    page.click("details.codes summary")
    assert page.locator("details.codes table").first.is_visible()
    # Every word of the footer command sits on one line: a word split over two lines has two boxes.
    words = page.evaluate("""() => [...document.querySelectorAll('#offline-command .word')].map(
        (word) => [word.textContent, word.getClientRects().length])""")
    assert " ".join(w for w, _ in words) == "python -m tombstones.verify receipt-request-N.json tombstone-keys.json"
    assert [w for w, boxes in words if boxes != 1] == []
    assert page.inner_text("#offline-command") == " ".join(w for w, _ in words)
    context.close()
