"""Operators start work in the admin (issue 21, item 6): "Add" on the request queue receives a request through
the API's own service (dsr.services.request_create), identity verified at once when the operator says how."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dsr import deadlines
from dsr.models import RequestStatus, SubjectRequest
from memory.models import Tenant

pytestmark = pytest.mark.django_db
ADD = "/admin/dsr/subjectrequest/add/"


def form(tenant, **fields):
    return {"tenant": tenant.pk, "subject": "  cust-1001 ", "type": "erasure", "regulation": "gdpr",
            "channel": "letter", "received_at": "", "contact_email": "cust@example.org", "identity_method": "",
            **fields}


def test_operator_receives_a_request_in_the_admin_through_the_service(client_as):
    tenant = Tenant.objects.create(name="acme")
    client = client_as("operator")
    # Given the queue, which offers "Add"
    assert ADD in client.get("/admin/dsr/subjectrequest/").content.decode()
    assert client.get(ADD).status_code == 200
    # When an operator receives a letter that arrived three days ago
    received = (timezone.now() - timedelta(days=3)).replace(microsecond=0)
    response = client.post(ADD, form(tenant, received_at=received.strftime("%Y-%m-%d %H:%M:%S")))
    # Then the request is recorded as the service records it: normalized subject, legal due date, history
    request = SubjectRequest.objects.get()
    assert response.status_code == 302 and response.url == f"/admin/dsr/subjectrequest/{request.pk}/change/"
    assert (request.subject.ref, request.channel, request.status) == ("cust-1001", "letter", RequestStatus.RECEIVED)
    assert request.received_at == received
    assert request.due_date == deadlines.due_date(regulation="gdpr", received_at=received)
    (row,) = request.history.all()
    assert (row.action, row.actor) == ("received", "admin:operator-ann")


def test_identity_verified_at_once_when_the_operator_says_how(client_as):
    tenant = Tenant.objects.create(name="acme")
    client_as("operator").post(ADD, form(tenant, identity_method="copy of ID checked by phone"))
    request = SubjectRequest.objects.get()
    assert request.status == RequestStatus.VERIFIED and request.identity_method == "copy of ID checked by phone"
    assert [h.action for h in request.history.all()] == ["received", "verify_identity"]


def test_the_services_refusal_is_shown_and_nothing_is_recorded(client_as):
    tenant = Tenant.objects.create(name="acme")
    future = (timezone.now() + timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S")
    response = client_as("operator").post(ADD, form(tenant, received_at=future), follow=True)
    assert "invalid_received_at" in response.content.decode()
    response = client_as("operator").post(ADD, form(tenant, subject="bad\x00ref"), follow=True)
    assert response.status_code == 200 and not SubjectRequest.objects.exists()


@pytest.mark.parametrize("role", ["auditor", "legal"])
def test_roles_that_do_not_run_requests_cannot_add_one(client_as, role):
    tenant = Tenant.objects.create(name="acme")
    client = client_as(role)
    assert client.get(ADD).status_code == 403
    assert client.post(ADD, form(tenant)).status_code == 403
    assert not SubjectRequest.objects.exists()
