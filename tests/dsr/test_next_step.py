"""Done vs needs action (dsr/next_step.py): who must act on a request, the queue's default view, and the clock
that stops once the subject has their answer (issue 21, item 4)."""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dsr.dashboard import dashboard_get
from dsr.models import ConflictStatus, RequestStatus, RetentionConflict, SubjectRequest
from dsr.next_step import request_next_step, requests_needing_action
from dsr.selectors import requests_overdue
from memory.models import Subject
from tests.admin.conftest import client_as  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
TODAY = datetime.now(UTC).date()


def make(tenant, ref, *, status, overdue_days=20, notified=False, open_conflicts=0, started=True, gaps=None,
         type="erasure"):
    now = timezone.now()
    subject = Subject.objects.create(tenant=tenant, ref=ref)
    request = SubjectRequest.objects.create(
        tenant=tenant, subject=subject, type=type, regulation="gdpr", received_at=now - timedelta(days=50),
        due_date=TODAY - timedelta(days=overdue_days), status=status, contact_email=f"{ref}@example.org",
        notified_at=now - timedelta(days=1) if notified else None, workflow_started_at=now if started else None,
        gaps=gaps or [])
    for n in range(open_conflicts):
        RetentionConflict.objects.create(request=request, tenant=tenant, record_id=1000 + n, code="legal_hold",
                                         authority="court order", blocking=[], opened_at=now)
    # A decided conflict never makes a request wait on legal.
    RetentionConflict.objects.create(request=request, tenant=tenant, record_id=1, code="retention_lock",
                                     authority="SEC 17a-4", blocking=[], opened_at=now, status=ConflictStatus.UPHELD)
    return request


CASES = [
    # (status, notified, open conflicts, started, gaps) -> who, what
    ((RequestStatus.RECEIVED, False, 0, False, None), ("operator", "verify identity")),
    ((RequestStatus.VERIFIED, False, 0, False, None), ("operator", "start the workflow")),
    ((RequestStatus.VERIFIED, False, 0, True, None), ("workflow", "plan")),
    ((RequestStatus.EXECUTING, False, 0, True, None), ("workflow", "erase and confirm")),
    ((RequestStatus.EXECUTING, False, 0, True, [{"gap": "visible"}]), ("operator", "check 1 gap the confirmation found")),
    ((RequestStatus.EXECUTING, False, 3, True, None), ("legal", "waiting on legal: 3 open conflicts")),
    ((RequestStatus.AWAITING_LEGAL, False, 1, True, None), ("legal", "waiting on legal: 1 open conflict")),
    ((RequestStatus.PARTIALLY_COMPLETED, False, 0, True, None), ("workflow", "tell the subject")),
    ((RequestStatus.PARTIALLY_COMPLETED, True, 2, True, None), ("legal", "waiting on legal: 2 open conflicts")),
    ((RequestStatus.PARTIALLY_COMPLETED, True, 0, True, None), ("nobody", "nothing left")),
    ((RequestStatus.COMPLETED, True, 0, True, None), ("nobody", "nothing left")),
    ((RequestStatus.COMPLETED, False, 0, True, None), ("workflow", "tell the subject")),
    ((RequestStatus.REFUSED, False, 0, True, None), ("nobody", "nothing left")),
    ((RequestStatus.CLOSED, False, 0, False, None), ("nobody", "nothing left")),
]


def test_next_step_says_who_must_act_and_the_queue_filter_agrees(tenant):
    # Given a request in every state that matters
    made = {}
    for n, ((status, notified, conflicts, started, gaps), expected) in enumerate(CASES):
        made[make(tenant, f"s-{n}", status=status, notified=notified, open_conflicts=conflicts, started=started,
                  gaps=gaps).pk] = expected
    # Then each one's next step is as a person reads it
    for request in SubjectRequest.objects.filter(pk__in=made):
        n_open = request.conflicts.filter(status=ConflictStatus.OPEN).count()
        step = request_next_step(request, open_conflicts=n_open)
        assert (step.who, step.what) == made[request.pk], request.status
    # and the set-based filter picks exactly those that need someone's action
    needing = set(requests_needing_action(SubjectRequest.objects.all()).values_list("pk", flat=True))
    assert needing == {pk for pk, (who, _) in made.items() if who != "nobody"}


def test_a_partially_completed_request_whose_subject_was_told_is_not_overdue(tenant, client_as):  # noqa: F811
    # Given two requests due 20 days ago, kept records, the subject told; one still has an open conflict
    answered = make(tenant, "answered", status=RequestStatus.PARTIALLY_COMPLETED, notified=True)
    with_legal = make(tenant, "with-legal", status=RequestStatus.PARTIALLY_COMPLETED, notified=True,
                      open_conflicts=1)
    late = make(tenant, "late", status=RequestStatus.EXECUTING)  # really late: the answer is not sent
    # Then only the late one is overdue: the clock stopped when the answer was sent
    assert list(requests_overdue().values_list("pk", flat=True)) == [late.pk]
    board = dashboard_get()
    assert board.overdue == 1 and board.needs_action == 2  # late, and with_legal (legal must still decide)
    # and the queue's default view ("Needs action") leaves the answered one out, shows who acts, no red badge
    client = client_as("operator")
    html = client.get("/admin/dsr/subjectrequest/").content.decode()
    rows = re.findall(r'<tr>.*?</tr>', html, re.S)
    ids = {int(m) for m in re.findall(r'field-id"><a href="/admin/dsr/subjectrequest/(\d+)/', html)}
    assert ids == {with_legal.pk, late.pk}
    legal_row = next(r for r in rows if f"/admin/dsr/subjectrequest/{with_legal.pk}/" in r)
    assert "waiting on legal: 1 open conflict" in legal_row and "overdue" not in legal_row
    assert re.search(r'field-open_conflicts"><a [^>]*>1</a>', legal_row)
    late_row = next(r for r in rows if f"/admin/dsr/subjectrequest/{late.pk}/" in r)
    assert "overdue by 20 days" in late_row
    # Nothing left: findable under its own filter, with the clock stopped
    html = client.get("/admin/dsr/subjectrequest/?queue=nothing").content.decode()
    assert f"/admin/dsr/subjectrequest/{answered.pk}/" in html and "ledger-countdown overdue" not in html
    # and its page says so
    page = client.get(f"/admin/dsr/subjectrequest/{answered.pk}/change/").content.decode()
    assert 'id="clock-stopped"' in page and "overdue by" not in page and "nothing left" in page
