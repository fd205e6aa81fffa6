"""A legal hold's page lists the subject requests and retention conflicts waiting on it (dsr.selectors.
hold_waiting, shown through retention/admin.py's HOLD_PAGE_SECTIONS so that retention never imports dsr)."""
from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from dsr.models import ConflictStatus, RetentionConflict, SubjectRequest
from dsr.selectors import HOLD_WAITING_SHOWN, hold_waiting
from dsr.services.conflicts import conflict_uphold
from memory.models import Subject
from retention.models import LegalHold
from retention.services import hold_place
from tests.admin.conftest import conflicts_make

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def conflicts(mailoutbox):
    return conflicts_make()


def _waiting_on(hold: LegalHold, n: int, *, tenant=None, due_in=range(0, 10**6)) -> list[RetentionConflict]:
    """`n` requests each with one open conflict naming `hold` (as the workflow records it), due on varied days."""
    tenant = tenant or hold.tenant
    now = timezone.now()
    subjects = Subject.objects.bulk_create([Subject(tenant=tenant, ref=f"held-{hold.pk}-{i}") for i in range(n)])
    requests = SubjectRequest.objects.bulk_create([SubjectRequest(
        tenant=tenant, subject=s, type="erasure", regulation="gdpr", received_at=now, status="awaiting_legal",
        due_date=(now + timedelta(days=due_in[(i * 7) % len(due_in)] % 40 - 5)).date(), contact_email="x@example.org",
    ) for i, s in enumerate(subjects)])
    return RetentionConflict.objects.bulk_create([RetentionConflict(
        request=r, tenant=tenant, record_id=10**6 + i, code="legal_hold", authority=hold.authority, opened_at=now,
        blocking=[{"type": "hold", "hold_id": hold.pk, "matter": hold.matter, "authority": hold.authority}],
    ) for i, r in enumerate(requests)])


def test_the_hold_page_lists_the_requests_and_conflicts_waiting_on_it_with_links(client_as, conflicts):
    hold = LegalHold.objects.get()
    page = client_as("legal").get(f"/admin/retention/legalhold/{hold.pk}/change/").content.decode()
    section = page[page.index('id="hold-waiting"'):]
    assert "Waiting on this hold: 1 request, 1 conflict" in section
    assert f'href="/admin/dsr/retentionconflict/{conflicts.hold.pk}/change/"' in section
    assert f'href="/admin/dsr/subjectrequest/{conflicts.request.pk}/change/"' in section
    # Only the conflict the hold blocked: not the ones rules blocked.
    listed = set(map(int, re.findall(r'data-conflict="(\d+)"', section)))
    assert listed == {conflicts.hold.pk}

    conflict_uphold(conflict=conflicts.hold, actor="legal", justification="kept for the case")  # decided: no longer waits
    page = client_as("legal").get(f"/admin/retention/legalhold/{hold.pk}/change/").content.decode()
    assert "No request or conflict waits on this hold." in page


def test_hold_waiting_names_only_the_conflicts_the_hold_blocked(conflicts):
    hold = LegalHold.objects.get()
    other = hold_place(tenant=conflicts.tenant, matter="Doe v. Acme", authority="order 2",
                       record_ids=[conflicts.records["governance"].pk], actor="legal")
    # Conflicts naming another hold, or decided, are not waiting on this one.
    mine = _waiting_on(hold, 3)
    _waiting_on(other, 2)
    RetentionConflict.objects.filter(pk=mine[0].pk).update(status=ConflictStatus.OVERRIDDEN)
    RetentionConflict.objects.filter(pk=mine[1].pk).update(status=ConflictStatus.DEFERRED)
    waiting = hold_waiting(hold)
    assert {c.pk for c in waiting.conflicts} == {conflicts.hold.pk, mine[1].pk, mine[2].pk} and waiting.total == 3
    dues = [c.request.effective_due_date for c in waiting.conflicts]
    assert dues == sorted(dues)  # the most urgent request first
    assert [r.pk for r in waiting.requests] == list(dict.fromkeys(c.request_id for c in waiting.conflicts))
    assert {c.pk for c in hold_waiting(other).conflicts} == {c.pk for c in RetentionConflict.objects.filter(
        blocking__contains=[{"hold_id": other.pk}])}


@pytest.mark.parametrize("rows", [3, 30])
def test_the_hold_page_runs_a_bounded_number_of_queries(client_as, conflicts, django_assert_max_num_queries, rows):
    hold = LegalHold.objects.get()
    _waiting_on(hold, rows)
    legal = client_as("legal")
    legal.get("/admin/")
    # the hold, listed records, the count it covers, the waiting conflicts (2), and the admin's own 7
    with django_assert_max_num_queries(13):
        page = legal.get(f"/admin/retention/legalhold/{hold.pk}/change/")
    assert page.content.decode().count("data-conflict=") == rows + 1


def test_a_long_wait_is_shown_in_part_and_counted_in_full(client_as, conflicts):
    hold = LegalHold.objects.get()
    _waiting_on(hold, HOLD_WAITING_SHOWN + 5)
    waiting = hold_waiting(hold)
    assert (len(waiting.conflicts), waiting.total, waiting.more) == (HOLD_WAITING_SHOWN, HOLD_WAITING_SHOWN + 6, 6)
    page = client_as("legal").get(f"/admin/retention/legalhold/{hold.pk}/change/").content.decode()
    assert f"{HOLD_WAITING_SHOWN + 6} conflicts" in page and "And 6 more" in page


def test_retention_never_imports_dsr():
    # Apps depend one way: dsr imports retention. The hold page's section comes through HOLD_PAGE_SECTIONS.
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "retention").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.match(r"\s*(from dsr[. ]|import dsr\b)", line)]
    assert found == []
