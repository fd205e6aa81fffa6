"""Legal's conflicts in headless Chromium (Debian's /usr/bin/chromium) at 1400x900 with the sidebar open: the
queue fits with every column, shows each request's due date, most urgent first; one decision over a selection
(refused as a whole when one conflict cannot take it); a conflict's Override button disabled with the reason;
a hold's page lists what waits on it. Screenshots: test-artifacts/conflicts.png, test-artifacts/conflict.png."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from dsr.models import ConflictStatus, RetentionConflict
from memory.models import Record
from retention.models import LegalHold
from tests.admin.conftest import conflicts_make, requests_bulk, staff_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WIDTH, HEIGHT = 1400, 900
WHY = "Counsel reviewed these together on 5 December."


@pytest.fixture
def legal_page(browser, live_server):
    client = Client()
    client.force_login(staff_user("legal"))
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                          "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.on("pageerror", lambda error: pytest.fail(f"JavaScript error on the page: {error}"))
    yield page
    context.close()


def _select(page, ids) -> None:
    for pk in ids:
        page.check(f'#result_list input[name="_selected_action"][value="{pk}"]')


def _run_action(page) -> None:
    page.select_option('select[name="action"]', "decide_selected")
    with page.expect_navigation():
        page.click('button[name="index"]')


def _statuses() -> dict[int, str]:
    return dict(RetentionConflict.objects.values_list("pk", "status"))


def test_the_conflicts_queue_fits_at_1400_with_the_sidebar_open_most_urgent_first(legal_page, live_server):
    c = conflicts_make()
    requests_bulk(20, tenant_name="globex-international-holdings")  # long tenant names, many due dates
    page = legal_page
    page.goto(f"{live_server.url}/admin/dsr/retentionconflict/?state=all")
    assert page.locator("#nav-sidebar").is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "conflicts.png"), full_page=True)

    viewport = page.evaluate("document.documentElement.clientWidth")
    edges = page.eval_on_selector_all("#result_list thead th", "ths => ths.map(th => [(th.querySelector('.text') || th)"
                                      ".innerText.trim(), th.getBoundingClientRect().right])")
    headers = [name.lower() for name, _ in edges]
    for name in ("request due", "held" if "held" in headers else "opened at", "deferred to", "locked until"):
        assert name in headers, headers
    overflowing = [(name, right) for name, right in edges if right > viewport]
    assert overflowing == [], f"header cells past the viewport's {viewport} px: {overflowing}"
    # Nor scrolled out of sight inside the results box, under the filters.
    visible = page.eval_on_selector("#changelist-form .results", "r => r.getBoundingClientRect().right")
    assert [(name, right) for name, right in edges if right > visible + 0.5] == []
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport

    dues = page.eval_on_selector_all("#result_list tbody td.field-request_due .ledger-countdown",
                                     "spans => spans.map(s => s.dataset.days === undefined ? null : +s.dataset.days)")
    open_dues = [d for d in dues if d is not None]
    assert len(dues) == page.locator("#result_list tbody tr").count() and open_dues == sorted(open_dues)
    assert c.request.pk  # (the acme conflicts are among them)


def test_legal_decides_a_selection_at_once_and_sees_a_refusal_as_a_whole(legal_page, live_server, mailoutbox):
    c = conflicts_make()
    queue = f"{live_server.url}/admin/dsr/retentionconflict/"
    page = legal_page

    # A conflict under a compliance rule: Override is disabled, and the page says why, beside it.
    page.goto(f"{queue}{c.compliance.pk}/change/")
    assert page.locator("#decide-override").is_disabled()
    assert "compliance-mode rule" in page.locator("#override-reason").inner_text()
    assert "compliance_lock" in page.locator("#override-refused").inner_text()
    assert page.locator("#decide-uphold").is_enabled()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "conflict.png"), full_page=True)
    page.goto(f"{queue}{c.hold.pk}/change/")
    assert page.locator("#decide-override").is_disabled() and "legal hold" in page.locator("#override-reason").inner_text()
    page.goto(f"{queue}{c.governance.pk}/change/")
    assert page.locator("#decide-override").is_enabled() and page.locator("#override-reason").count() == 0

    # The hold's page lists the request and the conflict waiting on it, with links.
    hold = LegalHold.objects.get()
    page.goto(f"{live_server.url}/admin/retention/legalhold/{hold.pk}/change/")
    waiting = page.locator("#hold-waiting")
    assert "1 request, 1 conflict" in waiting.locator("h2").inner_text()
    with page.expect_navigation():
        waiting.locator(f'a[href$="/dsr/retentionconflict/{c.hold.pk}/change/"]').click()
    assert page.locator(f'[data-conflict="{c.hold.pk}"]').count() == 1

    # One override over the three: refused as a whole, the page says which and why; nothing changed.
    before = _statuses()
    page.goto(queue)
    _select(page, [c.governance.pk, c.compliance.pk, c.hold.pk])
    _run_action(page)
    assert page.locator("#selected-conflicts tbody tr").count() == 3
    page.check('input[name="decision"][value="override"]')
    page.fill("#id_justification", WHY)
    with page.expect_navigation():
        page.click("#bulk-decide-submit")
    assert "selection_refused" in page.locator("ul.messagelist li.error").inner_text()
    refused = page.locator("#selected-conflicts tr.refused")
    assert refused.count() == 2
    assert "compliance_lock" in page.locator(f'tr[data-conflict="{c.compliance.pk}"]').inner_text()
    assert "legal_hold" in page.locator(f'tr[data-conflict="{c.hold.pk}"]').inner_text()
    assert _statuses() == before and Record.objects.filter(pk=c.records["governance"].pk).exists()
    page.screenshot(path=str(ARTIFACTS / "conflicts-decide.png"), full_page=True)

    # The same selection upheld, from the same page: each recorded on its own with the justification.
    page.check('input[name="decision"][value="uphold"]')
    page.fill("#id_justification", WHY)
    with page.expect_navigation():
        page.click("#bulk-decide-submit")
    assert "3 conflicts upheld" in page.locator("ul.messagelist li.success").inner_text()
    stored = RetentionConflict.objects.filter(pk__in=[c.governance.pk, c.compliance.pk, c.hold.pk])
    assert {(x.status, x.decided_by, x.justification) for x in stored} == {
        (ConflictStatus.UPHELD, "admin:legal-ann", WHY)}
    assert page.locator("#result_list tbody tr").count() == 0 or "0 " in page.locator("#changelist").inner_text()
