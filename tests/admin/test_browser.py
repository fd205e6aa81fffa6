"""The admin in headless Chromium, as each role, against the live server: an operator triages a request
from the queue to the end of its workflow (on a real Celery worker), legal resolves a conflict each of
the three ways (and an override of a compliance lock is refused, a superuser's too), places and releases
a hold and edits the retention table; an auditor reads every screen and finds nothing to change.

Screenshots go to test-artifacts/admin-*.png. Chromium is Debian's (/usr/bin/chromium), never downloaded.
"""
from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from dsr.models import ConflictStatus, RequestStatus, RetentionConflict, SubjectNotice, SubjectRequest
from dsr.next_step import requests_needing_action
from dsr.selectors import requests_due_within, requests_overdue
from dsr.services import request_create
from memory.models import Record
from retention.models import ContentClass, LegalHold, RetentionRule, RetentionTableVersion
from tests.admin.conftest import conflicts_make, requests_bulk, staff_user
from tests.dsr.workflow_fixtures import erasure_scenario
from tests.workers import Worker, queue_purge, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def worker(django_db_setup):
    """One real Celery worker (a separate process, Redis broker) on the live server's database."""
    queue_purge()
    started = Worker("admin").wait_ready()
    yield started
    started.stop()
    queue_purge()


@pytest.fixture
def page_as(browser, live_server):
    """A browser page logged in as a staff user of the role (`superuser` for a superuser)."""
    contexts = []

    def open_as(role: str, *, javascript: bool = True):
        client = Client()
        client.force_login(staff_user(role))
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, java_script_enabled=javascript)
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "url": live_server.url,
                              "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.on("pageerror", lambda error: pytest.fail(f"JavaScript error on the page: {error}"))
        contexts.append(context)
        return page

    yield open_as
    for context in contexts:
        context.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"admin-{name}.png"), full_page=True)


def navigate(page, act) -> None:
    """Run `act` (a click, a key press) and wait until the page it leads to has loaded."""
    with page.expect_navigation():
        act()


def message(page, kind: str = "success") -> str:
    return page.locator(f"ul.messagelist li.{kind}").first.inner_text()


# --- operators -------------------------------------------------------------------------------------------

@pytest.mark.worker
def test_operator_triages_a_request_from_the_queue_to_the_end_of_its_workflow(page_as, live_server, worker,
                                                                              mailoutbox):
    scenario = erasure_scenario()  # three free records, a summary, one under a 7-year rule, one under a hold
    request = request_create(tenant=scenario.tenant, subject_ref="subject-7", type="erasure", regulation="gdpr",
                             channel="email", contact_email="subject7@example.org", actor="api")
    requests_bulk(14, tenant_name="globex", items_each=2)  # the rest of the queue: overdue, due soon, later
    page = page_as("operator")

    # The queue, most urgent first, with the countdown.
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == requests_needing_action(SubjectRequest.objects.all()).count()  # the default view
    overdue = page.locator("#result_list .ledger-countdown.overdue")
    assert overdue.count() == requests_overdue().count() + requests_due_within(days=0).count()
    assert page.locator("#result_list .ledger-countdown.soon").count() > 0
    days = [int(d) for d in page.locator("#result_list .ledger-countdown[data-days]").evaluate_all(
        "cells => cells.map(c => c.dataset.days)")]
    assert days == sorted(days)  # ordered by urgency
    shot(page, "queue")

    # Filters (status, type, regulation, tenant) and the search by subject reference or request id.
    navigate(page, lambda: page.locator("#changelist-filter a", has_text="Received").first.click())
    statuses = page.locator("#result_list tbody td.field-status").all_inner_texts()
    assert statuses and set(statuses) == {"Received"}
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/?regulation__exact=ccpa&type__exact=access")
    assert set(page.locator("#result_list td.field-regulation").all_inner_texts()) <= {"CCPA"}
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/?tenant__id__exact={scenario.tenant.pk}")
    assert page.locator("#result_list tbody tr").count() == 1
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/")
    page.fill("#searchbar", str(request.pk))
    navigate(page, lambda: page.press("#searchbar", "Enter"))
    assert page.locator("#result_list tbody tr").count() >= 1
    page.fill("#searchbar", "subject-7")
    navigate(page, lambda: page.press("#searchbar", "Enter"))
    # A piece of a reference: subject-7, and the other tenant's globex-subject-7.
    assert page.locator("#result_list tbody tr").count() == 2
    page.locator(f'#result_list tbody tr th a[href*="/subjectrequest/{request.pk}/change/"]').click()
    page.wait_for_selector("#actions")

    # Verify the identity, extend (the subject is told why), start the workflow.
    page.fill("#verify-method", "signed-in account with 2FA")
    page.click("#verify-form button")
    assert "Identity verified" in message(page)
    page.fill("#extend-reason", "Your request covers three years of conversations across several services.")
    page.click("#extend-form button")
    assert "Extended to" in message(page)
    assert mailoutbox[-1].to == ["subject7@example.org"] and "three years" in mailoutbox[-1].body
    polls = []
    page.on("request", lambda r: polls.append(r.url) if r.url.endswith("/progress/") else None)
    page.click("#start-form button")
    assert "Workflow started" in message(page)

    # The bar follows the worker, then the page shows the outcome.
    page.wait_for_selector('#progress[data-polling="0"]', timeout=90_000)
    assert page.locator("#request-status").inner_text() == RequestStatus.PARTIALLY_COMPLETED.label
    assert polls, "the progress bar never polled"
    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED and request.notified_at
    counts = {name: int(page.locator(f'[data-count="{name}"]').inner_text())
              for name in ("planned", "done", "refused", "pending")}
    assert counts["planned"] == request.items.count() and counts["pending"] == 0
    assert counts["refused"] == 2 and counts["done"] >= 3
    # the heading only: a row whose dates end in 2 next to its "Open" badge also contains the words "2 Open"
    assert page.locator("#conflicts h2").inner_text() == "Retention conflicts: 2 open"
    outcomes = page.locator("#items tbody tr")
    assert outcomes.count() == counts["planned"]
    assert page.locator("#items tr.outcome-hidden").filter(has_text="SEC 17a-4(f)").count() == 1
    assert page.locator("#items tr.outcome-hidden").filter(has_text="legal_hold").count() == 1
    links = page.locator("#tombstones a.tombstone-link")
    assert links.count() >= 1
    for href in links.evaluate_all("links => links.map(a => a.getAttribute('href'))"):
        assert re.fullmatch(r"/verify/\?id=[0-9a-f-]{36}", href)
    history = page.locator("#history").inner_text()
    for action in ("received", "verify_identity", "extend", "workflow_started", "plan", "confirm",
                   "subject_notified"):
        assert action in history
    shot(page, "request")
    actors = dict(request.history.filter(action__in=["verify_identity", "extend", "workflow_started"])
                  .values_list("action", "actor"))
    assert set(actors.values()) == {"admin:operator-ann"}
    assert SubjectNotice.objects.filter(request=request, kind="extension", sent_at__isnull=False).exists()

    # A tombstone link opens the public verification page on that tombstone.
    href = links.first.get_attribute("href")
    assert page.goto(f"{live_server.url}{href}").status == 200
    assert href.split("=", 1)[1] in page.content()


def test_operator_rejects_an_identity_and_the_request_closes_with_the_reason(page_as, live_server):
    scenario = erasure_scenario(subject="subject-8")
    request = request_create(tenant=scenario.tenant, subject_ref="subject-8", type="access", regulation="ccpa",
                             channel="letter", actor="api")
    page = page_as("operator")
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/{request.pk}/change/")
    assert page.locator("#extend-form").count() == 0  # no contact e-mail: an extension could not be told
    page.fill("#reject-reason", "The signature does not match the account holder's.")
    page.click("#reject-form button")
    assert "Identity rejected" in message(page)
    request.refresh_from_db()
    assert (request.status, request.closing_reason) == (RequestStatus.CLOSED,
                                                        "The signature does not match the account holder's.")
    assert page.locator("#actions").count() == 1 and page.locator("#actions form").count() == 0


def test_without_javascript_the_request_page_shows_the_numbers_and_refreshes_itself(page_as, live_server):
    c = conflicts_make()
    # The workflow is running again (an override made it resume): one record still to do.
    SubjectRequest.objects.filter(pk=c.request.pk).update(status=RequestStatus.EXECUTING, executed_at=None,
                                                          notified_at=None)
    c.request.items.filter(kind="record", object_id=c.records["governance"].pk).update(outcome="pending",
                                                                       decision="erase")
    page = page_as("operator", javascript=False)
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/{c.request.pk}/change/")
    counts = {name: page.locator(f'[data-count="{name}"]').inner_text() for name in ("planned", "done", "pending")}
    assert counts["pending"] == "1" and int(counts["planned"]) == c.request.items.count()
    assert '<meta http-equiv="refresh" content="5">' in page.content()  # inside <noscript>: reloads itself
    assert page.locator("#progress").get_attribute("data-polling") == "1"


# --- legal -----------------------------------------------------------------------------------------------

@pytest.mark.worker
def test_legal_resolves_conflicts_each_of_the_three_ways(page_as, live_server, worker, mailoutbox):
    c = conflicts_make()
    queue = f"{live_server.url}/admin/dsr/retentionconflict/"

    # A superuser cannot override a compliance-mode lock either.
    root = page_as("superuser")
    root.goto(f"{queue}{c.compliance.pk}/change/")
    assert root.locator("#decide-override").is_disabled()
    assert "not even a superuser" in root.locator("#override-refused").inner_text()

    page = page_as("legal")
    page.goto(queue)
    assert page.locator("#result_list tbody tr").count() == 3
    page.locator("#result_list tbody tr th a", has_text=str(c.compliance.pk)).first.click()
    page.wait_for_selector("#decide-form")
    blocking = page.locator("#blocking").inner_text()
    assert "SEC 17a-4(f)" in blocking and "compliance" in blocking and "override refused" in blocking
    assert "sold 50 ACME" not in page.content()  # never the record's content
    assert "trade-ledger" in page.locator("#record").inner_text()

    # Override refused (compliance mode): the button is disabled, saying why; then upheld: the subject is told why.
    assert page.locator("#decide-override").is_disabled()
    assert "compliance_lock" in page.locator("#override-refused").inner_text()
    shot(page, "conflict")
    page.fill("#id_justification", "SEC 17a-4 requires us to keep trade records for seven years.")
    page.click("#decide-uphold")
    assert "Upheld" in message(page)
    assert "admin:legal-ann" in page.locator("#decision").inner_text()
    assert "seven years" in mailoutbox[-1].body and "supervisory authority" in mailoutbox[-1].body

    # The hold: an override is refused while the hold is active; deferred to a date instead.
    page.goto(f"{queue}{c.hold.pk}/change/")
    assert "Roe v. Acme" in page.locator("#blocking").inner_text()
    assert page.locator("#decide-override").is_disabled()
    assert "legal_hold" in page.locator("#override-refused").inner_text()
    later = timezone.now().date() + timedelta(days=21)
    page.fill("#id_justification", "Counsel expects the case to settle within three weeks.")
    page.fill("#id_until", later.isoformat())
    page.click("#decide-defer")
    assert "Deferred to" in message(page)

    # The governance rule: overridden with a written justification; the record goes, the workflow resumes.
    page.goto(f"{queue}{c.governance.pk}/change/")
    page.fill("#id_justification", "The lease was cancelled; policy 12 no longer requires it.")
    page.click("#decide-override")
    assert "Overridden" in message(page)
    assert not Record.objects.filter(pk=c.records["governance"].pk).exists()

    decided = {x.pk: x for x in RetentionConflict.objects.all()}
    assert (decided[c.compliance.pk].status, decided[c.compliance.pk].decided_by) == (ConflictStatus.UPHELD,
                                                                                      "admin:legal-ann")
    assert (decided[c.hold.pk].status, decided[c.hold.pk].deferred_to) == (ConflictStatus.DEFERRED, later)
    assert decided[c.governance.pk].status == ConflictStatus.OVERRIDDEN
    assert "policy 12" in decided[c.governance.pk].justification
    assert Record.objects.get(pk=c.records["compliance"].pk).content == "sold 50 ACME"
    assert Record.objects.filter(pk=c.records["hold"].pk).exists()
    request = wait_for(lambda: SubjectRequest.objects.filter(pk=c.request.pk, notified_at__isnull=False,
                                                             status=RequestStatus.PARTIALLY_COMPLETED).first(),
                       timeout=60, what="the workflow to resume after the override and tell the subject")
    assert request.notices.filter(kind="outcome-2").exists()
    history = list(request.history.filter(action__startswith="conflict_").values_list("action", "actor"))
    assert sorted(history) == [("conflict_deferred", "admin:legal-ann"), ("conflict_overridden", "admin:legal-ann"),
                               ("conflict_upheld", "admin:legal-ann")]
    page.goto(f"{live_server.url}/admin/dsr/subjectrequest/{request.pk}/change/")
    assert page.locator("#conflicts h2").inner_text() == "Retention conflicts: 0 open"


def test_legal_places_a_hold_after_a_preview_and_releases_it(page_as, live_server):
    tenant_records = erasure_scenario(subject="subject-44")
    ids = sorted(Record.objects.filter(subject__ref="subject-44").values_list("pk", flat=True))
    page = page_as("legal")
    page.goto(f"{live_server.url}/admin/retention/legalhold/add/")
    page.select_option("#id_tenant", str(tenant_records.tenant.pk))
    page.fill("#id_matter", "Smith v. Acme")
    page.fill("#id_authority", "litigation hold notice 2026-14")
    page.check("input[name=target][value=subject]")
    page.fill("#id_subject_ref", "subject-44")
    page.click("#hold-preview-button")
    assert page.locator("#preview-count").inner_text() == str(len(ids))
    assert not LegalHold.objects.filter(matter="Smith v. Acme").exists()  # a preview places nothing
    page.click("#hold-confirm-button")
    assert "placed" in message(page)
    hold = LegalHold.objects.get(matter="Smith v. Acme")
    assert page.locator("#hold-state").inner_text() == "active"
    assert page.locator("#hold-covered").inner_text() == str(len(ids))
    assert set(Record.objects.filter(pk__in=ids).values_list("held", flat=True)) == {True}
    assert hold.placed_by == "admin:legal-ann"

    page.fill("#release-reason", "The claim was withdrawn on 2 December.")
    page.click("#release-form button")
    assert "released" in message(page)
    hold.refresh_from_db()
    assert hold.released_by == "admin:legal-ann" and hold.release_reason == "The claim was withdrawn on 2 December."
    assert "withdrawn" in page.locator("#hold-release").inner_text()
    still_held = {tenant_records.under_hold.pk}  # held by the scenario's own hold, not by this one
    assert {r.pk for r in Record.objects.filter(pk__in=ids, held=True)} == still_held
    assert page.locator("#release-form").count() == 0 and page.locator("a.deletelink").count() == 0


def test_legal_edits_the_retention_table_and_reads_its_history(page_as, live_server):
    c = conflicts_make()
    chat = ContentClass.objects.get(tenant=c.tenant, name="chat")
    page = page_as("legal")
    page.goto(f"{live_server.url}/admin/retention/retentionrule/add/")
    page.select_option("#id_content_class", str(chat.pk))
    page.select_option("#id_kind", "pact")
    page.fill("#id_duration_days", "90")
    page.fill("#id_authority", "Pact 4.2 (support chats)")
    page.select_option("#id_mode", "governance")
    page.click("input[type=submit]")
    assert "added" in message(page)
    added = RetentionRule.objects.get(authority="Pact 4.2 (support chats)")

    compliance = RetentionRule.objects.get(mode="compliance")
    page.goto(f"{live_server.url}/admin/retention/retentionrule/{compliance.pk}/change/")
    assert page.locator("#retire-form").count() == 0
    page.fill("#duration-form #id_duration_days", "30")
    page.fill("#duration-form #id_justification", "Too long")
    page.click("#duration-form button")
    assert "compliance_lock" in message(page, "error")
    page.goto(f"{live_server.url}/admin/retention/retentionrule/{compliance.pk}/change/")
    page.fill("#duration-form #id_duration_days", str(10 * 365))
    page.fill("#duration-form #id_justification", "New SEC guidance: ten years.")
    page.click("#duration-form button")
    assert "→ 3650 days" in message(page)

    page.goto(f"{live_server.url}/admin/retention/retentionrule/{added.pk}/change/")
    page.fill("#retire-justification", "The pact was renegotiated.")
    page.click("#retire-form button")
    assert "retired" in message(page)

    page.goto(f"{live_server.url}/admin/retention/retentiontableversion/?tenant__id__exact={c.tenant.pk}")
    changes = page.locator("#result_list td.field-what_changed").all_inner_texts()
    assert any("duration_days 2555 → 3650" in text for text in changes)
    assert any("removed rule" in text for text in changes) and any("added rule" in text for text in changes)
    latest = RetentionTableVersion.objects.filter(tenant=c.tenant).order_by("-number").first()
    page.goto(f"{live_server.url}/admin/retention/retentiontableversion/{latest.pk}/change/")
    assert page.locator("#diff tr.diff-removed").count() == 1
    assert RetentionRule.objects.get(pk=compliance.pk).duration_days == 3650


# --- auditors and the dashboard --------------------------------------------------------------------------

def test_an_auditor_reads_every_screen_and_finds_nothing_to_change(page_as, live_server):
    c = conflicts_make()
    hold = LegalHold.objects.get()
    compliance = RetentionRule.objects.get(mode="compliance")
    page = page_as("auditor")
    base = f"{live_server.url}/admin"
    page.goto(f"{base}/")
    assert page.locator("#dashboard").count() == 1
    assert page.locator(".addlink").count() == 0 and page.locator(".changelink").count() == 0
    # The request queue offers one action, a read-only one: the audit export of the selected requests
    assert page.goto(f"{base}/dsr/subjectrequest/?queue=all").status == 200
    offered = page.locator("select[name=action] option").evaluate_all("options => options.map(o => o.value)")
    assert [value for value in offered if value] == ["export_selected_requests"]
    for url, absent in [
        (f"/dsr/subjectrequest/{c.request.pk}/change/", "#actions"),
        ("/dsr/retentionconflict/", "#action-toggle"),
        (f"/dsr/retentionconflict/{c.compliance.pk}/change/", "#decide-form"),
        ("/retention/legalhold/", ".addlink"),
        (f"/retention/legalhold/{hold.pk}/change/", "#release-form"),
        ("/retention/retentionrule/", ".addlink"),
        (f"/retention/retentionrule/{compliance.pk}/change/", "#duration-form"),
        ("/retention/retentiontableversion/", ".addlink"),
        ("/memory/record/", "#action-toggle"),
    ]:
        response = page.goto(f"{base}{url}")
        assert response.status == 200, url
        assert page.locator(absent).count() == 0, url
        assert page.locator("input[name=_save], input[type=submit][value=Save]").count() == 0, url
    assert page.goto(f"{base}/retention/legalhold/add/").status == 403
    assert page.goto(f"{base}/dsr/subjectrequest/{c.request.pk}/start/").status == 403


def test_the_dashboard_shows_the_work_at_a_glance(page_as, live_server):
    requests_bulk(40, tenant_name="acme", items_each=3)
    conflicts_make(tenant_name="globex", subject="subject-99")
    page = page_as("operator")
    page.goto(f"{live_server.url}/admin/")
    assert int(page.locator("#dash-overdue").inner_text()) == requests_overdue().count()
    assert int(page.locator("#dash-soon").inner_text()) == requests_due_within(days=7).count()
    assert int(page.locator("#dash-conflicts").inner_text()) == RetentionConflict.objects.filter(status="open").count()
    assert int(page.locator("#dash-action").inner_text()) == requests_needing_action(SubjectRequest.objects.all()).count()
    assert int(page.locator("#dash-open").inner_text()) == SubjectRequest.objects.exclude(
        status__in=["completed", "refused", "closed"]).count()
    bars = page.locator("svg.ledger-chart rect[data-value]")
    assert bars.count() > 0
    assert page.locator(".ledger-deferred tbody tr").count() > 0
    shot(page, "dashboard")
    navigate(page, lambda: page.click("#dashboard a.ledger-card.overdue"))
    assert page.locator("#result_list .ledger-countdown.overdue").count() == requests_overdue().count()
