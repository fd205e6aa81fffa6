"""Legal's conflicts queue and a conflict's page (dsr/admin_conflicts.py): the request's due date, the
most urgent first, one decision over a selection (the bulk action), an Override button disabled for the
reason the service would refuse it; each page in a bounded number of queries."""
from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry

from dsr.models import ConflictStatus, RequestTransition, RetentionConflict
from dsr.services.conflicts import MAX_SELECTION
from memory.models import Record
from tests.admin.actions import act, covers, said
from tests.admin.conftest import conflicts_make, requests_bulk

pytestmark = pytest.mark.django_db
QUEUE = "/admin/dsr/retentionconflict/"
WHY = "Counsel reviewed the batch: the lease files are no longer needed."


@pytest.fixture
def conflicts(mailoutbox):
    return conflicts_make()


def _statuses() -> dict[int, str]:
    return dict(RetentionConflict.objects.values_list("pk", "status"))


def test_the_queue_shows_the_requests_due_date_most_urgent_first(client_as):
    requests_bulk(30)
    response = client_as("legal").get(f"{QUEUE}?state=all")
    rows = list(response.context["cl"].result_list)
    dues = [c.request.effective_due_date for c in rows]
    assert len(rows) == 30 and dues == sorted(dues) and dues[0] < dues[-1]
    assert b"request due" in response.content.lower()
    assert b'class="ledger-countdown overdue"' in response.content  # the queue's countdown badge
    assert b"ledger/conflicts.css" in response.content


@pytest.mark.parametrize("rows", [5, 50])
def test_the_queue_runs_a_bounded_number_of_queries(client_as, django_assert_max_num_queries, rows):
    requests_bulk(rows, items_each=2)
    legal = client_as("legal")
    legal.get("/admin/")
    # count, rows (with their requests), the tenant filter, the date hierarchy (2), and the admin's own 7
    with django_assert_max_num_queries(12):
        assert legal.get(QUEUE).status_code == 200
    with django_assert_max_num_queries(12):
        assert legal.get(f"{QUEUE}?state=all&o=3").status_code == 200


@covers(("dsr.RetentionConflict", "decide_selected"))
def test_one_uphold_over_the_selection_decides_each_conflict_on_its_own(client_as, conflicts, mailoutbox):
    legal = client_as("legal")
    ids = [conflicts.governance.pk, conflicts.compliance.pk, conflicts.hold.pk]

    # The action first asks for the decision and the justification, and decides nothing yet.
    asked = act(legal, RetentionConflict, "decide_selected", ids)
    assert asked.status_code == 200 and b'id="bulk-decide-form"' in asked.content
    assert set(_statuses().values()) == {ConflictStatus.OPEN}

    done = act(legal, RetentionConflict, "decide_selected", ids, apply="1", decision="uphold", justification=WHY)

    assert "3 conflicts upheld, each recorded on its own with your justification." in said(done)
    stored = RetentionConflict.objects.filter(pk__in=ids)
    assert {(c.status, c.decided_by, c.justification) for c in stored} == {
        (ConflictStatus.UPHELD, "admin:legal-ann", WHY)}
    assert RequestTransition.objects.filter(action="conflict_upheld", actor="admin:legal-ann").count() == 3
    logged = LogEntry.objects.filter(object_id__in=[str(pk) for pk in ids]).values_list("change_message", flat=True)
    assert sorted(logged) == ["Upheld (with 3 selected conflicts)"] * 3  # the admin's log, one entry each


def test_a_bulk_override_with_a_locked_record_decides_nothing_and_the_page_says_which(client_as, conflicts):
    legal = client_as("legal")
    ids = [conflicts.governance.pk, conflicts.compliance.pk, conflicts.hold.pk]
    before = _statuses()

    answer = act(legal, RetentionConflict, "decide_selected", ids, apply="1", decision="override", justification=WHY)

    assert answer.status_code == 200 and b'id="bulk-decide-form"' in answer.content  # the form again
    text = answer.content.decode()
    assert "selection_refused" in text and "compliance_lock" in text and "legal_hold" in text
    assert text.count('class="refused"') == 2
    assert _statuses() == before
    assert Record.objects.filter(pk=conflicts.records["governance"].pk).exists()


def test_a_selection_over_the_cap_is_refused_before_the_form(client_as, conflicts):
    legal = client_as("legal")
    too_many = [conflicts.governance.pk] + list(range(10**9, 10**9 + MAX_SELECTION))
    answer = act(legal, RetentionConflict, "decide_selected", too_many)
    assert any("selection_too_large" in m for m in said(answer))
    assert b'id="bulk-decide-form"' not in answer.content
    bad = act(legal, RetentionConflict, "decide_selected", ["12x"], apply="1", decision="uphold", justification=WHY)
    assert any("invalid_selection" in m for m in said(bad))
    assert set(_statuses().values()) == {ConflictStatus.OPEN}


@pytest.mark.parametrize("role", ["operator", "auditor"])
def test_only_legal_may_decide_a_selection(client_as, conflicts, role):
    ids = [conflicts.governance.pk]
    act(client_as(role), RetentionConflict, "decide_selected", ids, apply="1", decision="override",
        justification=WHY)
    assert set(_statuses().values()) == {ConflictStatus.OPEN}
    assert Record.objects.filter(pk=conflicts.records["governance"].pk).exists()


def test_the_override_button_is_disabled_with_the_services_reason(client_as, conflicts,
                                                                  django_assert_max_num_queries):
    legal = client_as("legal")
    legal.get("/admin/")
    for conflict, code in [(conflicts.compliance, "compliance_lock"), (conflicts.hold, "legal_hold")]:
        with django_assert_max_num_queries(14):  # conflict_page_get, the override check, the admin's own
            page = legal.get(f"{QUEUE}{conflict.pk}/change/").content.decode()
        button = page[page.index('id="decide-override"') - 80:page.index("Override: erase it after all")]
        assert " disabled" in button and 'id="override-reason"' in page and f"<code>{code}</code>" in page
    page = legal.get(f"{QUEUE}{conflicts.governance.pk}/change/").content.decode()
    button = page[page.index('id="decide-override"') - 80:page.index("Override: erase it after all")]
    assert "disabled" not in button and 'id="override-reason"' not in page
    # The service still refuses a POST that a disabled button cannot send.
    refused = legal.post(f"{QUEUE}{conflicts.compliance.pk}/decide/", {"decision": "override", "justification": WHY})
    assert b"compliance_lock" in refused.content and b'id="override-reason"' in refused.content
    assert RetentionConflict.objects.get(pk=conflicts.compliance.pk).status == ConflictStatus.OPEN
