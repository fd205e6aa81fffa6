"""The public page without JavaScript: the server verifies, says why, shows no personal data, limits rates."""
import base64
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tombstones.services import receipt_build

from .factories import TenantFactory, tombstone_make
from .tampering import payload_field_changed

pytestmark = pytest.mark.django_db
SECRETS = ["my address is 1 Main St", "operator:7", "subject-42", "subject request"]


@pytest.fixture
def receipt():
    tenant = TenantFactory()
    tombstones = [tombstone_make(tenant, contents=["my address is 1 Main St", "my phone"]) for _ in range(2)]
    return receipt_build(tombstone_id=tombstones[0].id)


def verdict(response) -> str:
    match = re.search(r'id="server-verdict" data-code="([a-z_]+)"', response.content.decode())
    return match.group(1) if match else ""


def assert_no_personal_data(response, receipt=None):
    html = response.content.decode()
    for secret in SECRETS + list((receipt or {}).get("salts", {}).values()):
        assert secret not in html
    assert not re.search(r'(src|href)="(https?:)?//', html), "the page loads nothing from elsewhere"


def test_empty_form_is_public_and_has_no_external_assets(client):
    response = client.get("/verify/")
    assert response.status_code == 200 and b'name="receipt"' in response.content
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert_no_personal_data(response)


def test_lookup_by_id_shows_a_genuine_verdict_with_counts_kinds_dates_and_authority(client, receipt):
    response = client.get("/verify/", {"id": receipt["tombstone_id"]})
    html = response.content.decode()
    assert response.status_code == 200 and verdict(response) == "genuine"
    for shown in ["GDPR Art. 17", "2 deleted", "1 embedding", "1 summary", "due 2026-03-01T00:00:00Z", "2025-12-02"]:
        assert shown in html, shown
    assert_no_personal_data(response, receipt)
    assert 'id="verify-bundle"' in html and '"salts"' not in html


def test_pasted_receipt_with_content_says_it_is_covered_without_echoing_it(client, receipt):
    response = client.post("/verify/", {"receipt": json.dumps(receipt), "content": "my address is 1 Main St"})
    assert verdict(response) == "genuine"
    assert 'data-covered="yes"' in response.content.decode()
    assert_no_personal_data(response, receipt)


def test_content_with_a_given_salt_that_does_not_match_is_not_covered(client, receipt):
    salt = receipt["salts"]["1001"]  # the salt of the other record
    response = client.post("/verify/", {"tombstone_id": receipt["tombstone_id"], "content": "my address is 1 Main St",
                                        "salt": salt})
    assert verdict(response) == "genuine" and 'data-covered="no"' in response.content.decode()


def test_uploaded_receipt_file_is_verified(client, receipt):
    upload = SimpleUploadedFile("receipt.json", json.dumps(receipt).encode(), content_type="application/json")
    assert verdict(client.post("/verify/", {"receipt_file": upload})) == "genuine"


def test_tampered_receipt_says_plainly_which_field_changed(client, receipt):
    response = client.post("/verify/", {"receipt": json.dumps(payload_field_changed(receipt))})
    assert response.status_code == 200 and verdict(response) == "field_changed"
    assert "execution.records[0].outcome" in response.content.decode()
    assert 'id="summary"' not in response.content.decode()


@pytest.mark.parametrize("paste", ["{not json", "[]", '{"envelope": 5}', "\x01\x02binary"])
def test_malformed_paste_gets_a_400_with_a_clear_message(client, paste):
    response = client.post("/verify/", {"receipt": paste})
    assert response.status_code == 400 and verdict(response) == "malformed"
    assert "This is not a receipt we can read" in response.content.decode()


def test_envelope_with_a_deeply_nested_payload_gets_a_verdict_not_an_error(client):
    payload = base64.b64encode(("[" * 1_000 + "]" * 1_000).encode()).decode()
    envelope = {"payloadType": "application/vnd.in-toto+json", "payload": payload,
                "signatures": [{"keyid": "k", "sig": "AAAA"}]}
    response = client.post("/verify/", {"receipt": json.dumps(envelope)})
    assert response.status_code in (200, 400) and verdict(response) not in ("", "genuine")


def test_binary_upload_is_a_malformed_receipt_not_an_error(client):
    upload = SimpleUploadedFile("receipt.json", b"\xff\xfe\x00garbage", content_type="application/octet-stream")
    response = client.post("/verify/", {"receipt_file": upload})
    assert response.status_code == 400 and verdict(response) == "malformed"


@pytest.mark.parametrize("data, field_error", [
    ({}, "Give one thing to check"),
    ({"tombstone_id": "not-an-id"}, "A tombstone id looks like"),
    ({"tombstone_id": "00000000-0000-0000-0000-000000000000", "receipt": "{}"}, "Give one thing to check"),
    ({"tombstone_id": "00000000-0000-0000-0000-000000000000", "content": "x", "salt": "nothex"}, "A salt is"),
    ({"tombstone_id": "00000000-0000-0000-0000-000000000000", "salt": "0" * 32}, "Give the piece of data"),
])
def test_invalid_form_gets_a_400_saying_what_to_fix(client, data, field_error):
    response = client.post("/verify/", data)
    assert response.status_code == 400 and field_error in response.content.decode()


def test_unknown_tombstone_id_is_a_404_page(client, db):
    response = client.get("/verify/", {"id": "00000000-0000-0000-0000-000000000000"})
    assert response.status_code == 404 and verdict(response) == "tombstone_not_found"


def test_form_post_requires_the_csrf_token(receipt):
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/verify/", {"tombstone_id": receipt["tombstone_id"]}).status_code == 403
    page = strict.get("/verify/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    ok = strict.post("/verify/", {"tombstone_id": receipt["tombstone_id"], "csrfmiddlewaretoken": token})
    assert ok.status_code == 200


def test_verification_is_rate_limited_per_address_with_a_clear_message(client, receipt, settings):
    settings.LEDGER_VERIFY_RATE_LIMIT = 2
    for _ in range(2):
        assert client.get("/verify/", {"id": receipt["tombstone_id"]}).status_code == 200
    response = client.post("/verify/", {"tombstone_id": receipt["tombstone_id"]})
    assert response.status_code == 429 and verdict(response) == "rate_limited"
    assert "Too many verification requests" in response.content.decode()
    assert client.get("/verify/").status_code == 200  # the empty form is not counted


def test_the_browser_script_is_served_from_this_site(client):
    response = client.get("/verify/verify.js")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/javascript")
    assert b"crypto.subtle" in response.content and b"http" not in response.content.replace(b"https://", b"")


def test_lookup_page_uses_a_bounded_number_of_queries(client, receipt, django_assert_max_num_queries):
    client.get("/verify/", {"id": receipt["tombstone_id"]})
    with django_assert_max_num_queries(14):
        client.get("/verify/", {"id": receipt["tombstone_id"]})


def test_the_result_is_said_in_words_and_the_codes_only_in_a_collapsed_details_section(client, receipt):
    html = client.get("/verify/", {"id": receipt["tombstone_id"]}).content.decode()
    summary = html[html.index('id="summary"'):html.index("</div>", html.index('id="summary"'))]
    words, details = summary.split('<details class="codes">')
    for shown in ["2 December 2025, 10:00 UTC", "2 records erased.", "You asked us to erase your data",
                  "Copies derived from them (1 embedding, 1 summary) also erased.",
                  "1 step still to finish, by 1 March 2026, 00:00 UTC."]:
        assert shown in words, shown
    for code in ["2025-12-02T", "(target:", "subject_ids", "Mode", "hot", "Storage tiers", ">hard<"]:
        assert code not in words, code
    assert "<details class=\"codes\" open" not in summary  # collapsed
    for code in ["2025-12-02T10:00:00Z", "api (target: subject_ids)", "hard", "2 hot", "due 2026-03-01T00:00:00Z"]:
        assert code in details, code


def test_the_spec_is_linked_and_served_as_html(client, db):
    assert 'href="/verify/spec"' in client.get("/verify/").content.decode()
    response = client.get("/verify/spec")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert "<h1" in response.content.decode()
