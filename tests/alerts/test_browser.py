"""The alerts' banner and list in headless Chromium (Debian's): an operator sees the banner on an admin page,
follows it to the open alerts, acknowledges them, and the banner is gone. Screenshots:
test-artifacts/admin-alerts-*.png."""
from __future__ import annotations

import pytest

from alerts.models import Alert, AlertKind
from alerts.services import alert_raise
from tests.admin.test_browser import navigate, page_as, shot  # noqa: F401 - page_as is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_follows_the_banner_to_the_alerts_and_acknowledges_them(page_as, live_server, tenant):
    alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="The compaction sweep failed",
                detail="RuntimeError: disk full")
    alert_raise(kind=AlertKind.DEADLINE_NEAR, cause="request:42", tenant_id=tenant.pk, level="warning",
                title="Erasure request 42 due in 3 days (2026-12-09), work left")
    page = page_as("operator")

    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/")
    banner = page.locator("#alerts-banner")
    assert banner.is_visible() and "2 open alerts" in banner.inner_text()
    shot(page, "alerts-banner")

    navigate(page, lambda: banner.get_by_role("link", name="See the alerts").click())
    assert "/admin/alerts/alert/" in page.url
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2 and "The compaction sweep failed" in page.locator("#result_list").inner_text()
    shot(page, "alerts-list")

    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "acknowledge")
    navigate(page, lambda: page.locator("div.actions button[type=submit]").click())
    assert "2 alerts acknowledged" in page.locator("ul.messagelist li.success").inner_text()
    assert page.locator("#alerts-banner").count() == 0
    assert Alert.objects.filter(acknowledged_at__isnull=False).count() == 2
    shot(page, "alerts-acknowledged")
