"""The receipt a subject is mailed verifies exactly as sent (issue 21, item 1): the attachment of a real
erasure workflow's mail, on /verify/ by upload and by paste in Chromium (the server's verdict and the
browser's own check), and with the offline verifier; a tampered copy is refused by all three. An access
request's export is not named, nor read, as a receipt.

Screenshots go to test-artifacts/. Chromium is Debian's (/usr/bin/chromium); it is never downloaded.
"""
import json
import re
from pathlib import Path

import pytest

from dsr.services.notify import attachment_name
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tombstones.receipt import BUNDLE_FORMAT, receipts_bundle
from tombstones.selectors import jwks_document

from .factories import payload_of, with_payload
from .test_offline_verifier import run_offline

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def mailed_attachment(mailoutbox) -> tuple[str, str]:
    """(file name, text) of the receipt attached to the one mail a workflow run sent."""
    (mail,) = mailoutbox
    (name, text, mimetype), = mail.attachments
    assert mimetype == "application/json"
    return name, text


def tampered(text: str) -> str:
    """The mailed bundle with its second receipt's first record marked `refused` (signature left as it was)."""
    bundle = json.loads(text)
    receipt = bundle["receipts"][-1]
    statement = payload_of(receipt)
    statement["execution"]["records"][0]["outcome"] = "refused"
    bundle["receipts"][-1] = with_payload(receipt, statement)
    return json.dumps(bundle, indent=2)


def verdict(html: str) -> str:
    match = re.search(r'id="server-verdict" data-code="([a-z_]+)"', html)
    return match.group(1) if match else ""


@pytest.mark.django_db
def test_the_mailed_bundle_is_versioned_and_verifies_on_the_page_and_offline(mailoutbox, client, tmp_path):
    scenario = erasure_scenario()
    request = verified_request(scenario)

    run_to_end(request.pk)

    name, text = mailed_attachment(mailoutbox)
    bundle = json.loads(text)
    assert name == f"receipt-request-{request.pk}.json"
    assert bundle["format"] == BUNDLE_FORMAT and bundle["request"] == request.pk and len(bundle["receipts"]) == 2
    html = client.post("/verify/", {"receipt": text}).content.decode()
    assert verdict(html) == "genuine" and html.count('class="tombstone"') == 2
    salts = [salt for receipt in bundle["receipts"] for salt in receipt["salts"].values()]
    assert salts and not [salt for salt in salts if salt in html], "a genuine receipt's salts are not shown back"
    (tmp_path / name).write_text(text)
    (tmp_path / "keys.json").write_text(json.dumps(jwks_document()))
    (tmp_path / "mine.txt").write_text("my address is 12 Tangerine Lane")
    result = run_offline(tmp_path / name, tmp_path / "keys.json", "--content-file", tmp_path / "mine.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "genuine:" in result.stdout and "Covered" in result.stdout
    assert "(2 of 2)" in result.stdout and "3 records erased." in result.stdout
    (tmp_path / "tampered.json").write_text(tampered(text))
    result = run_offline(tmp_path / "tampered.json", tmp_path / "keys.json", "--json")
    assert result.returncode == 1 and json.loads(result.stdout)["code"] == "field_changed"
    assert verdict(client.post("/verify/", {"receipt": tampered(text)}).content.decode()) == "field_changed"


@pytest.mark.django_db
def test_a_bundle_of_the_old_unversioned_shape_still_verifies(mailoutbox, client):
    scenario = erasure_scenario()
    run_to_end(verified_request(scenario).pk)
    _, text = mailed_attachment(mailoutbox)
    old = {key: value for key, value in json.loads(text).items() if key != "format"}

    response = client.post("/verify/", {"receipt": json.dumps(old)})

    assert verdict(response.content.decode()) == "genuine"


@pytest.mark.django_db
@pytest.mark.parametrize("document, says", [
    ({"format": "forgetting-ledger-receipts/v9", "request": 1, "receipts": []}, "its `format` is not"),
    ({"format": BUNDLE_FORMAT, "request": 1, "receipts": []}, "the bundle holds no receipts"),
    ({"format": BUNDLE_FORMAT, "request": 1, "receipts": [], "extra": 1}, "the bundle has a field"),
    ({"request": 1, "receipts": "nope"}, "must be a list"),
    ({"request": 1, "receipts": [{"request": 1, "receipts": []}]}, "the receipt has a field"),
    ({"request": 1, "export": {"records": []}}, "a copy of your data"),
])
def test_a_bundle_that_is_not_right_is_malformed_and_the_paste_is_kept(client, document, says):
    text = json.dumps(document)
    response = client.post("/verify/", {"receipt": text})
    html = response.content.decode()
    assert response.status_code == 400 and verdict(html) == "malformed"
    assert says in html.replace("&#x27;", "'")
    assert json.dumps(document).replace('"', "&quot;") in html, "the pasted text is shown back, to be corrected"


def test_an_access_requests_export_is_not_named_as_a_receipt():
    assert attachment_name(4, {"request": 4, "export": {"records": []}}) == "data-export-request-4.json"
    assert attachment_name(4, receipts_bundle(request=4, receipts=[])) == "receipt-request-4.json"


@pytest.mark.django_db
def test_the_access_request_mail_attaches_a_data_export_not_a_receipt(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario, type="access")

    run_to_end(request.pk)

    name, text = mailed_attachment(mailoutbox)
    assert name == f"data-export-request-{request.pk}.json" and "export" in json.loads(text)


# ---- in Chromium ----

@pytest.fixture
def mailed(transactional_db, mailoutbox, tmp_path):
    """The file and text of the receipt a real workflow run mailed."""
    scenario = erasure_scenario()
    request = verified_request(scenario)
    run_to_end(request.pk)
    name, text = mailed_attachment(mailoutbox)
    path = tmp_path / name
    path.write_text(text)
    return path, text


def browser_verdicts(page, screenshot: str | None = None) -> tuple[str, str, str]:
    page.wait_for_selector("#browser-verdict:not([hidden])", timeout=20_000)
    if screenshot:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
    box = page.locator("#browser-verdict")
    return (page.locator("#server-verdict").get_attribute("data-code"), box.get_attribute("data-code"),
            box.get_attribute("data-agrees"))


@pytest.mark.browser
def test_the_mailed_receipt_verifies_in_chromium_by_upload_and_by_paste(page, live_server, mailed):
    path, text = mailed
    page.goto(f"{live_server.url}/verify/")
    page.set_input_files("#id_receipt_file", str(path))
    page.click("button[type=submit]")
    assert browser_verdicts(page, "verify-mailed-receipt-valid.png") == ("genuine", "genuine", "yes")
    assert "agrees with our server" in page.inner_text("#browser-verdict")

    page.goto(f"{live_server.url}/verify/")
    page.fill("#id_receipt", text)
    page.fill("#id_content", "my phone is 555 0199")
    page.click("button[type=submit]")
    assert browser_verdicts(page, "verify-mailed-receipt-valid-paste.png") == ("genuine", "genuine", "yes")
    assert page.get_attribute("#coverage", "data-covered") == "yes"
    assert "Covered: this piece of your data was among the records, and it was erased." in page.inner_text("#coverage")


@pytest.mark.browser
def test_a_tampered_copy_of_the_mailed_receipt_is_refused_in_chromium(page, live_server, mailed):
    _, text = mailed
    page.goto(f"{live_server.url}/verify/")
    page.fill("#id_receipt", tampered(text))
    page.click("button[type=submit]")
    assert browser_verdicts(page, "verify-mailed-receipt-tampered.png") == ("field_changed", "field_changed", "yes")
    assert "Receipt 2 of 2" in page.inner_text("#server-verdict") and "Receipt 2 of 2" in page.inner_text("#browser-verdict")
    assert page.input_value("#id_receipt") == tampered(text), "the pasted text is kept after a refusal"


@pytest.mark.browser
def test_the_spec_is_one_click_from_the_verify_page(page, live_server, transactional_db):
    page.goto(f"{live_server.url}/verify/")
    page.click("#spec-link")
    page.wait_for_selector("#spec h1")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "verify-spec.png"))
    assert page.url.endswith("/verify/spec")
    assert page.inner_text("#spec h1") == "Receipt verification specification, version 1"
    assert page.locator("#spec table").count() >= 4
