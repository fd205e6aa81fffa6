"""The export API: who may read, which tenant's rows, bounded queries, and bad input refused with a stable
code (never a 500)."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Concat
from django.test.utils import CaptureQueriesContext

from audit_exports import selectors
from memory.models import Subject
from tests.admin.conftest import requests_bulk
from tests.audit_exports.conftest import KINDS, body, csv_rows, json_doc

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", ["auditor", "operator", "legal"])
def test_reader_roles_may_export(world, token_for, role):
    response = token_for("acme", role).get("/api/v1/audit/exports/requests.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-requests-tenant-')
    assert [int(r["id"]) for r in csv_rows(response)] == [world.request.pk]


def test_an_agent_token_is_refused_and_nothing_is_streamed(world, token_for):
    response = token_for("acme", "agent").get("/api/v1/audit/exports/requests.csv")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_no_token_is_refused(world, client):
    response = client.get("/api/v1/audit/exports/requests.csv")
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize("kind", KINDS)
def test_an_auditor_of_one_tenant_never_sees_another_tenants_rows(world, token_for, kind):
    mine = json_doc(token_for("acme", "auditor").get(f"/api/v1/audit/exports/{kind}.json"))
    theirs = json_doc(token_for("globex", "auditor").get(f"/api/v1/audit/exports/{kind}.json"))
    assert mine["tenant"] == "acme" and theirs["tenant"] == "globex"
    text = str(theirs)
    assert "Roe v. Acme" not in text and "SEC 17a-4" not in text and "operator-ann" not in text
    for row in theirs["rows"]:
        assert row.get("tenant") in (None, "globex")
    if kind == "requests":
        assert [r["id"] for r in theirs["rows"]] == [world.other_request.pk]
        assert [r["id"] for r in mine["rows"]] == [world.request.pk]
    if kind == "holds":
        assert [r["id"] for r in theirs["rows"]] == [world.other_hold.pk]
    if kind in ("request-transitions", "request-items"):
        assert {r["request_id"] for r in theirs["rows"]} <= {world.other_request.pk}
        assert world.other_request.pk not in {r["request_id"] for r in mine["rows"]}
    if kind == "conflicts":
        assert theirs["rows"] == []


def _queries(client, name) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/api/v1/audit/exports/{name}")
        assert response.status_code == 200
        body(response)
    return len(captured)


@pytest.mark.parametrize("kind", KINDS)
def test_queries_do_not_grow_with_rows(token_for, kind, django_assert_max_num_queries):
    auditor = token_for("bulk", "auditor")
    requests_bulk(5, tenant_name="bulk", items_each=3)
    few = _queries(auditor, f"{kind}.json")
    Subject.objects.filter(tenant__name="bulk").update(ref=Concat("ref", Value("-first")))  # refs are unique
    requests_bulk(60, tenant_name="bulk", items_each=3)
    assert _queries(auditor, f"{kind}.csv") == few
    with django_assert_max_num_queries(6):
        body(auditor.get(f"/api/v1/audit/exports/{kind}.json"))


def test_queries_grow_with_chunks_only(token_for, monkeypatch):
    auditor = token_for("bulk", "auditor")
    requests_bulk(60, tenant_name="bulk", items_each=3)
    monkeypatch.setattr(selectors, "CHUNK", 10)
    # The token, then per chunk of 10 requests: the requests, their history, their items.
    assert _queries(auditor, "requests.json") <= 1 + 3 * 6 + 1
    assert len(json_doc(auditor.get("/api/v1/audit/exports/requests.json"))["rows"]) == 60


BAD = [
    ("requests.csv?from=garbage", 400, "invalid_period"),
    ("requests.csv?to=2026-13-01", 400, "invalid_period"),
    ("requests.csv?from=2026-02-30", 400, "invalid_period"),
    ("requests.csv?from=2026-1-1", 400, "invalid_period"),
    ("requests.csv?from=2026-03-02&to=2026-03-01", 400, "invalid_period"),
    ("requests.csv?from=2026-03-01&from=2026-03-02", 400, "invalid_period"),
    ("requests.csv?from=2026-03-01T00:00:00Z", 400, "invalid_period"),
    ("requests.csv?tenant=globex", 400, "unknown_parameter"),
    ("requests.csv?from=" + "9" * 5000, 400, "query_too_long"),
    ("requests.csv?" + "&".join(f"p{i}=1" for i in range(300)), 400, "query_too_long"),
    ("secrets.csv", 404, "unknown_export"),
    ("records.json", 404, "unknown_export"),
    ("requests.xlsx", 404, "unknown_format"),
    ("requests", 404, "unknown_format"),
    ("requests.", 404, "unknown_format"),
    (".csv", 404, "unknown_export"),
    ("requests.csv.json", 404, "unknown_export"),
    ("x" * 3000 + ".csv", 404, "unknown_export"),
]


@pytest.mark.parametrize("url, status, code", BAD)
def test_bad_input_is_refused_with_a_stable_code(world, token_for, url, status, code):
    response = token_for("acme", "auditor").get(f"/api/v1/audit/exports/{url}")
    assert response.status_code == status, response.content[:300]
    assert response.json()["code"] == code


def test_the_other_methods_are_refused(world, token_for):
    response = token_for("acme", "auditor").post("/api/v1/audit/exports/requests.csv", {}, format="json")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_a_null_byte_in_the_period_is_refused(world, token_for):
    response = token_for("acme", "auditor").get("/api/v1/audit/exports/requests.csv?from=2026%00-01-01")
    assert response.status_code == 400 and response.json()["code"] == "invalid_parameter"
