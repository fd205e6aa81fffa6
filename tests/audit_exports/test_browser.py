"""An auditor in headless Chromium (Debian's /usr/bin/chromium) finds the export page on the admin index, picks
an export and a period, downloads the CSV, and the file holds the requests and no record content.
Screenshot: test-artifacts/admin-audit-export.png."""
from __future__ import annotations

import csv
import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.admin.conftest import staff_user
from tests.audit_exports.conftest import MARKER, SUBJECT_REF, world_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def auditor_page(browser, live_server):
    client = Client()
    client.force_login(staff_user("auditor"))
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                          "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.on("pageerror", lambda error: pytest.fail(f"JavaScript error on the page: {error}"))
    yield page
    context.close()


def test_an_auditor_downloads_the_requests_csv_from_the_admin(auditor_page, live_server, mailoutbox, tmp_path):
    world = world_make()
    page = auditor_page
    day = world.request.received_at.date()

    page.goto(f"{live_server.url}/admin/")
    with page.expect_navigation():
        page.click('a[href="/admin/audit_exports/auditexport/"]')
    assert page.locator("#audit-export-form").count() == 1
    page.select_option("#id_kind", "requests")
    page.select_option("#id_format", "csv")
    page.fill("#id_start", (day - timedelta(days=1)).isoformat())
    page.fill("#id_end", day.isoformat())
    page.select_option("#id_tenant", str(world.tenant.pk))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "admin-audit-export.png"), full_page=True)
    with page.expect_download() as download:
        page.click("#audit-export-download")
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)

    assert saved.name == f"audit-requests-tenant-{world.tenant.pk}-{day - timedelta(days=1)}_{day}.csv"
    text = saved.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["id"]) for r in rows] == [world.request.pk]
    assert rows[0]["status"] == world.request.status and rows[0]["subject_id"] == str(world.request.subject_id)
    assert rows[0]["tombstone_ids"]
    assert MARKER not in text and SUBJECT_REF not in text

    # A bad period is shown on the form, and nothing is downloaded.
    page.goto(f"{live_server.url}/admin/audit_exports/auditexport/")
    page.fill("#id_start", day.isoformat())
    page.fill("#id_end", (day - timedelta(days=2)).isoformat())
    with page.expect_navigation():
        page.click("#audit-export-download")
    assert "invalid_period" in page.locator(".errorlist").first.inner_text()
