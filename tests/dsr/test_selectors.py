"""The due-date queues and a request's progress (dsr/selectors.py): an extended request is due at its
extended date, finished requests leave the queues, and the queues are answered from the partial index."""
import uuid
from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection

from config.errors import ApplicationError
from dsr.models import ItemOutcome, RequestItem, RequestStatus, SubjectRequest
from dsr.selectors import request_progress, requests_due_within, requests_overdue
from dsr.services import request_create

TODAY = datetime.now(UTC).date()


def received(days_ago: int) -> datetime:
    return datetime.combine(TODAY, time(9, 0), tzinfo=UTC) - timedelta(days=days_ago)


def new(tenant, ref, *, days_ago, regulation="ccpa", **fields) -> SubjectRequest:
    request = request_create(tenant=tenant, subject_ref=ref, type="erasure", regulation=regulation, channel="email",
                             received_at=received(days_ago), actor="test")
    if fields:
        SubjectRequest.objects.filter(pk=request.pk).update(**fields)
    return SubjectRequest.objects.get(pk=request.pk)


def ids(queryset):
    return [r.pk for r in queryset]


def test_overdue_and_soon_due_follow_the_effective_due_date(tenant, other_tenant):
    # CCPA: due 45 days after receipt.
    late = new(tenant, "late", days_ago=50)                                            # due 5 days ago
    extended = new(tenant, "extended", days_ago=50, extended_due_date=TODAY + timedelta(days=40))
    due_today = new(tenant, "today", days_ago=45)
    soon = new(tenant, "soon", days_ago=40)                                            # due in 5 days
    later = new(tenant, "later", days_ago=10)                                          # due in 35 days
    done = new(tenant, "done", days_ago=60, status=RequestStatus.COMPLETED)
    refused = new(tenant, "refused", days_ago=60, status=RequestStatus.REFUSED)
    partial = new(tenant, "partial", days_ago=60, status=RequestStatus.PARTIALLY_COMPLETED)  # still open
    theirs = new(other_tenant, "theirs", days_ago=55)

    assert extended.effective_due_date == TODAY + timedelta(days=40) and extended.due_date < TODAY
    assert ids(requests_overdue(today=TODAY)) == [partial.pk, theirs.pk, late.pk]
    assert ids(requests_overdue(today=TODAY, tenant=tenant)) == [partial.pk, late.pk]
    assert ids(requests_due_within(days=5, today=TODAY)) == [due_today.pk, soon.pk]
    assert ids(requests_due_within(days=0, today=TODAY)) == [due_today.pk]
    assert ids(requests_due_within(days=40, today=TODAY)) == [due_today.pk, soon.pk, later.pk, extended.pk]
    assert done.pk not in ids(requests_overdue(today=TODAY)) and refused.pk not in ids(requests_overdue(today=TODAY))


def test_extending_moves_a_request_out_of_the_overdue_queue_at_once(tenant):
    request = new(tenant, "s", days_ago=50)
    assert ids(requests_overdue(today=TODAY)) == [request.pk]
    # The generated column follows extended_due_date however it is written: no service has to remember it.
    SubjectRequest.objects.filter(pk=request.pk).update(extended_due_date=TODAY + timedelta(days=1))
    assert ids(requests_overdue(today=TODAY)) == []
    assert ids(requests_due_within(days=1, today=TODAY)) == [request.pk]


@pytest.mark.parametrize("query", [
    lambda: requests_overdue(today=TODAY),
    lambda: requests_due_within(days=7, today=TODAY),
])
def test_due_date_queues_are_answered_by_a_due_date_index(tenant, query):
    new(tenant, "s", days_ago=50)
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            pytest.skip("the plan is PostgreSQL's")
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = query().query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Any of the indexes led by the effective due date answers it (the planner's pick depends on the data).
    assert any(name in plan for name in ("request_open_effective_due_idx", "request_due_idx",
                                         "request_status_due_idx")), plan
    assert "Seq Scan on dsr_subjectrequest" not in plan, plan


def test_due_within_refuses_a_bad_window():
    for days in (-1, 367, "7", True, 1.5):
        with pytest.raises(ApplicationError) as refused:
            requests_due_within(days=days, today=TODAY)
        assert refused.value.code == "invalid_days"


def test_progress_counts_each_outcome_and_lists_tombstones_once(tenant):
    request = new(tenant, "s", days_ago=1)
    first, second = uuid.uuid4(), uuid.uuid4()
    rows = [
        (ItemOutcome.DELETED, None, first), (ItemOutcome.REDACTED, None, first), (ItemOutcome.GONE, None, None),
        (ItemOutcome.LOGGED, None, second), (ItemOutcome.HIDDEN, received(-400), first),
        (ItemOutcome.NOTIFIED, None, second), (ItemOutcome.PENDING, None, None), (ItemOutcome.PENDING, None, None),
    ]
    for n, (outcome, deferred_until, tombstone) in enumerate(rows, start=1):
        RequestItem.objects.create(request=request, kind="record", object_id=n, outcome=outcome,
                                   deferred_until=deferred_until, tombstone_id=tombstone)

    progress = request_progress(request)

    assert progress.as_api() == {"planned": 8, "done": 4, "refused": 1, "deferred": 2, "pending": 2}
    assert progress.tombstone_ids == sorted([first, second])


def test_progress_of_an_unplanned_request_is_zero(tenant, django_assert_num_queries):
    request = new(tenant, "s", days_ago=1)
    with django_assert_num_queries(2):
        progress = request_progress(request)
    assert progress.as_api() == {"planned": 0, "done": 0, "refused": 0, "deferred": 0, "pending": 0}
    assert progress.tombstone_ids == []
