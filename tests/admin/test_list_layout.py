"""The request queue and the records list fit a 1400 px window with the admin's sidebar open (issue 21, item 8):
every column header is inside the window and inside the table's container (none hidden by overflow), in
Debian's Chromium. Screenshots: test-artifacts/queue.png, dashboard.png, records.png."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.admin.conftest import requests_bulk, staff_user
from tests.factories import ContentClassFactory, TenantFactory, record, rule

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WIDTH, HEIGHT = 1400, 900

# Each header cell's right edge, the window's width, and the right edge of the box the table sits in.
MEASURE = """() => {
  const box = document.querySelector('#changelist .results') || document.querySelector('#changelist');
  return {
    window: window.innerWidth,
    page: document.documentElement.scrollWidth,
    box: box.getBoundingClientRect().right,
    sidebar: !!document.querySelector('#nav-sidebar') && document.querySelector('#nav-sidebar').getBoundingClientRect().width > 0,
    headers: [...document.querySelectorAll('#result_list thead th')].map(th => ({
      text: th.innerText.trim(), right: th.getBoundingClientRect().right, width: th.getBoundingClientRect().width})),
  };
}"""


@pytest.fixture
def operator_page(browser, live_server):
    client = Client()
    client.force_login(staff_user("operator"))
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                          "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
    context.set_default_timeout(20_000)
    page = context.new_page()
    # The sidebar open, as the admin keeps it once a user opened it.
    page.add_init_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'true')")
    yield page
    context.close()


def _fits(page, url: str, name: str, expected: list[str]) -> None:
    page.goto(url)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    m = page.evaluate(MEASURE)
    assert m["sidebar"], "the admin's sidebar is open"
    texts = [h["text"].upper() for h in m["headers"]]
    for title in expected:
        assert any(title in t for t in texts), (title, texts)
    hidden = [h for h in m["headers"] if h["right"] > min(m["window"], m["box"]) + 1 or h["width"] < 8]
    assert not hidden, f"{name}: columns past the edge ({m['window']} px window, box {m['box']}): {hidden}"
    assert m["page"] <= m["window"], f"{name}: the page scrolls sideways ({m['page']} > {m['window']})"


def test_the_queue_the_records_list_and_the_dashboard_fit_1400px_with_the_sidebar_open(operator_page, live_server):
    # Given a busy queue (long references) and records with locks and holds
    requests_bulk(30, tenant_name="a-tenant-with-a-rather-long-name", items_each=1)
    tenant = TenantFactory(name="globex-international-holdings")
    trades = ContentClassFactory(tenant=tenant, name="trade-ledger-confirmations")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4(f)")
    for n in range(12):
        record(tenant, trades, scope=f"user:{n}/session:{n}/document:quarterly-statement-{n}",
               subject=f"customer-reference-{n:05d}", content=f"trade {n}")
    base = live_server.url
    # Then every column is in view
    _fits(operator_page, f"{base}/admin/dsr/subjectrequest/?queue=all", "queue",
          ["RECEIVED", "NEXT STEP", "OPEN CONFLICTS", "SUBJECT", "TENANT"])
    _fits(operator_page, f"{base}/admin/memory/record/", "records", ["RETAINED UNTIL", "HELD", "CREATED"])
    # and the records list has a search box
    assert operator_page.locator("#searchbar").count() == 1
    operator_page.goto(f"{base}/admin/")
    operator_page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
    assert operator_page.evaluate("document.documentElement.scrollWidth") <= WIDTH
