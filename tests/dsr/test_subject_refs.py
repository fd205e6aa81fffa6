"""A subject request names the subject whatever the spelling of their reference: the request stores the
normal form (memory.subjects), and the workflow's plan finds every record written under another spelling."""
from __future__ import annotations

import json
import unicodedata

import pytest

from dsr.models import RequestItem, RequestStatus, SubjectRequest
from memory.models import Record, Subject
from tests.dsr.test_workflow_steps import run_to_end
from tests.factories import record

pytestmark = pytest.mark.django_db

NFC = "José Müller"
NFD = unicodedata.normalize("NFD", NFC)


@pytest.fixture
def operator(tenant, api_client_for):
    return api_client_for(tenant.name, "operator")


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def received_and_verified(operator, ref: str, type: str = "erasure") -> SubjectRequest:
    created = post(operator, "/api/v1/requests", {"subject": ref, "type": type, "regulation": "gdpr",
                                                  "channel": "email", "contact_email": "jose@example.org"})
    assert created.status_code == 201, created.json()
    verified = post(operator, f"/api/v1/requests/{created.json()['id']}/verify-identity", {"method": "passport"})
    assert verified.status_code == 200, verified.json()
    return SubjectRequest.objects.get(pk=created.json()["id"])


def test_requests_api_stores_the_normal_form_of_the_reference(operator, tenant):
    response = post(operator, "/api/v1/requests", {"subject": f"  {unicodedata.normalize('NFD', 'José  Müller')} ",
                                                   "type": "erasure", "regulation": "gdpr", "channel": "email"})

    assert response.status_code == 201, response.json()
    assert response.json()["subject"] == NFC
    assert list(Subject.objects.values_list("ref", flat=True)) == [NFC]
    assert SubjectRequest.objects.get(pk=response.json()["id"]).subject.ref == NFC


def test_requests_api_refuses_a_reference_with_a_control_character(operator):
    response = post(operator, "/api/v1/requests", {"subject": "José\x1bMüller", "type": "erasure",
                                                   "regulation": "gdpr", "channel": "email"})

    assert response.status_code == 400 and response.json()["code"] == "invalid_subject"
    assert not SubjectRequest.objects.exists() and not Subject.objects.exists()


def test_nfc_erasure_request_erases_the_records_written_under_nfd(operator, tenant, chat, mailoutbox):
    written = [record(tenant, chat, subject=NFD, scope=f"user:7/session:{n}", content=f"my secret {n}")
               for n in range(3)]
    request = received_and_verified(operator, NFC)

    run_to_end(request.pk)

    request.refresh_from_db()
    assert request.status == RequestStatus.COMPLETED
    planned = RequestItem.objects.filter(request=request, kind="record").values_list("object_id", flat=True)
    assert sorted(planned) == sorted(r.pk for r in written)
    assert not Record.objects.filter(pk__in=[r.pk for r in written]).exists()


def test_nfd_access_request_exports_the_records_written_under_nfc_with_spaces(operator, tenant, chat, mailoutbox):
    written = record(tenant, chat, subject=f" {NFC}  ", content="my phone is 555 0199")
    request = received_and_verified(operator, NFD, type="access")

    run_to_end(request.pk)

    request.refresh_from_db()
    assert request.export["subject"] == NFC
    assert [r["id"] for r in request.export["records"]] == [written.pk]
