"""The admin's export page: every role may download; a bad period is shown on the form, never a 500; it is
listed on the admin index; it offers nothing to add or change."""
from __future__ import annotations

import csv
import io

import pytest

from tests.admin.actions import changelist, covers, offered
from tests.audit_exports.conftest import EMAIL, MARKER, SUBJECT_REF, body, csv_rows, json_doc

pytestmark = pytest.mark.django_db
PAGE = "/admin/audit_exports/auditexport/"


@pytest.mark.parametrize("role", ["auditor", "operator", "legal", "superuser"])
def test_every_role_opens_the_page_and_downloads(world, client_as, role):
    client = client_as(role)
    page = client.get(PAGE)
    assert page.status_code == 200 and b'id="audit-export-form"' in page.content
    response = client.get(PAGE, {"kind": "requests", "format": "csv", "start": "", "end": ""})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    # Staff see every tenant: both tenants' requests, unless one is picked.
    assert {int(r["id"]) for r in csv_rows(response)} == {world.request.pk, world.other_request.pk}
    one = client.get(PAGE, {"kind": "requests", "format": "json", "tenant": world.other.pk})
    assert [r["id"] for r in json_doc(one)["rows"]] == [world.other_request.pk]


def test_the_admin_index_links_to_the_page(world, client_as):
    assert PAGE.encode() in client_as("auditor").get("/admin/").content


@pytest.mark.parametrize("query, error", [
    ({"kind": "requests", "format": "csv", "start": "garbage"}, b"invalid_period"),
    ({"kind": "requests", "format": "csv", "start": "2026-03-02", "end": "2026-03-01"}, b"invalid_period"),
    ({"kind": "nope", "format": "csv"}, b"Select a valid choice"),
    ({"kind": "requests", "format": "xlsx"}, b"Select a valid choice"),
    ({"kind": "requests", "format": "csv", "tenant": "999999999"}, b"Select a valid choice"),
    ({"kind": "requests", "format": "csv", "tenant": "x" * 5000}, b"Select a valid choice"),
])
def test_bad_input_is_shown_on_the_form(world, client_as, query, error):
    response = client_as("auditor").get(PAGE, query)
    assert response.status_code == 200 and error in response.content
    assert not response.has_header("Content-Disposition")


def test_a_user_without_a_role_is_refused(world, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("nobody", password="x", is_staff=True))
    assert client.get(PAGE).status_code == 403
    assert client.get(PAGE, {"kind": "requests", "format": "csv"}).status_code == 403


def test_anonymous_is_sent_to_the_login(world, client):
    response = client.get(PAGE, {"kind": "requests", "format": "csv"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@covers(("dsr.SubjectRequest", "export_selected_requests"))
@pytest.mark.parametrize("role", ["auditor", "operator"])
def test_the_request_queue_exports_the_selected_requests_and_nothing_else(world, client_as, role):
    # Given a role on the request queue, with one of the two tenants' requests selected
    from dsr.models import SubjectRequest, RequestTransition

    client = client_as(role)
    before = (SubjectRequest.objects.count(), RequestTransition.objects.count())

    # When it runs the export action (an auditor is offered it: it only reads)
    response = client.post(changelist(SubjectRequest) + "?queue=all", {"action": "export_selected_requests",
                                                        "_selected_action": [str(world.request.pk)], "index": "0"})

    # Then the CSV holds the selected request only, with its history counted, and no content or reference
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    raw = body(response)
    rows = list(csv.DictReader(io.StringIO(raw.decode())))
    assert [int(r["id"]) for r in rows] == [world.request.pk]
    assert MARKER.encode() not in raw and SUBJECT_REF.encode() not in raw and EMAIL.encode() not in raw
    # and nothing changed
    assert (SubjectRequest.objects.count(), RequestTransition.objects.count()) == before


def test_the_export_action_is_the_only_action_an_auditor_is_offered(world, client_as):
    from django.contrib.auth.models import User

    from dsr.models import SubjectRequest

    client_as("auditor"), client_as("operator")
    assert offered(SubjectRequest, User.objects.get(username="auditor-ann")) == {"export_selected_requests"}
    assert {"export_selected_requests", "workflow_start_selected"} <= offered(
        SubjectRequest, User.objects.get(username="operator-ann"))
