"""The busy pages run a fixed number of queries, whatever the number of rows: the same bound with 5 and
with 50 requests (conflicts, plan items, history rows), so no page does a query per row. (Their time
over 100,000 requests and 1,000,000 records is bench/bench_admin.py's.)"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dsr.models import SubjectRequest
from tests.admin.conftest import requests_bulk

pytestmark = pytest.mark.django_db

# Each bound: the page's own queries, plus the 6 or 7 that every admin page has (the session, the user, the
# user's and the groups' permissions, the coverage audit's banner, the failure alerts' banner) and one spare.
BOUNDS = {
    "queue": 12,         # count, rows, the tenant filter's choices, the date hierarchy's range and its list
    "queue_search": 12,
    "request": 14,       # the request, progress (2), one page of the plan, conflicts, history, notices
    "progress": 9,       # the request, progress (2)
    "conflicts": 12,     # count, rows, the tenant filter's choices, the date hierarchy (2)
    "dashboard": 15,     # dsr.dashboard.dashboard_get (7) and the recent-actions box
}


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured)


def _url(page: str) -> str:
    newest = SubjectRequest.objects.order_by("-pk").first()
    return {
        "queue": "/admin/dsr/subjectrequest/",
        "queue_search": "/admin/dsr/subjectrequest/?q=bulk-subject-3&type__exact=erasure",
        "request": f"/admin/dsr/subjectrequest/{newest.pk}/change/",
        "progress": f"/admin/dsr/subjectrequest/{newest.pk}/progress/",
        "conflicts": "/admin/dsr/retentionconflict/?state=all",
        "dashboard": "/admin/",
    }[page]


@pytest.mark.parametrize("page", list(BOUNDS))
@pytest.mark.parametrize("rows", [5, 50])
def test_page_queries_are_bounded_whatever_the_rows(client_as, django_assert_max_num_queries, page, rows):
    requests_bulk(rows, items_each=rows)  # the request page's plan grows with the rows too
    client = client_as("operator")
    client.get("/admin/")  # the session's first request
    url = _url(page)
    with django_assert_max_num_queries(BOUNDS[page]):
        response = client.get(url)
    assert response.status_code == 200


@pytest.mark.parametrize("page", list(BOUNDS))
def test_ten_times_the_rows_runs_exactly_the_same_queries(client_as, page):
    client = client_as("operator")
    client.get("/admin/")
    requests_bulk(5, tenant_name="small", items_each=5)
    few = _queries(client, _url(page))
    requests_bulk(50, tenant_name="large", items_each=50)
    many = _queries(client, _url(page))
    assert few == many <= BOUNDS[page]
