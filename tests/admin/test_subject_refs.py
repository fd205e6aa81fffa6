"""The admin finds a subject whatever the spelling of their reference (memory.subjects): a hold's preview
and placement, the request queue's search, the subjects' search; and it never types a reference in."""
from __future__ import annotations

import unicodedata

import pytest

from dsr.services import request_create
from memory.models import Record, Subject
from retention.models import LegalHold
from tests.factories import record

pytestmark = pytest.mark.django_db

NFC = "José Müller"
NFD = unicodedata.normalize("NFD", NFC)


def test_an_nfc_hold_previews_and_covers_the_records_written_under_nfd(client_as, tenant, chat):
    written = [record(tenant, chat, subject=NFD, scope=f"user:7/session:{n}").pk for n in range(2)]
    record(tenant, chat, subject="someone else")
    legal = client_as("legal")
    form = {"tenant": tenant.pk, "matter": "Doe v. Acme", "authority": "court order", "target": "subject",
            "subject_ref": f"  {NFC} "}

    preview = legal.post("/admin/retention/legalhold/add/", {**form, "_preview": "1"})

    assert preview.status_code == 200 and preview.context["preview"] == 2
    placed = legal.post("/admin/retention/legalhold/add/", {**form, "preview_key": preview.context["preview_key"],
                                                             "_confirm": "1"})
    assert placed.status_code == 302
    assert LegalHold.objects.get().subject.ref == NFC
    assert sorted(Record.objects.filter(held=True).values_list("pk", flat=True)) == written


def test_a_hold_reference_with_a_control_character_is_refused_in_the_form(client_as, tenant, chat):
    record(tenant, chat, subject=NFC)
    response = client_as("legal").post("/admin/retention/legalhold/add/", {
        "tenant": tenant.pk, "matter": "m", "target": "subject", "subject_ref": "José\x1bMüller", "_preview": "1"})
    assert b"control characters" in response.content
    assert not LegalHold.objects.exists()


def test_the_queue_finds_a_request_by_another_spelling_of_its_subject(client_as, tenant):
    request = request_create(tenant=tenant, subject_ref=NFC, type="erasure", regulation="gdpr", channel="api",
                             actor="api")
    operator = client_as("operator")
    for term in (NFD, f" José  {unicodedata.normalize('NFD', 'Müller')} "):
        found = operator.get("/admin/dsr/subjectrequest/", {"q": term})
        assert [r.pk for r in found.context["cl"].result_list] == [request.pk]
    assert operator.get("/admin/dsr/subjectrequest/", {"q": "José\x1bMüller"}).context["cl"].result_count == 0


def test_subjects_are_searched_in_normal_form_and_never_typed_in(client_as, tenant, chat):
    record(tenant, chat, subject=NFC)
    root = client_as("superuser")

    found = root.get("/admin/memory/subject/", {"q": NFD})

    assert [s.ref for s in found.context["cl"].result_list] == [NFC]
    assert root.get("/admin/memory/subject/add/").status_code == 403
    subject = Subject.objects.get()
    assert root.post(f"/admin/memory/subject/{subject.pk}/change/", {"ref": NFD, "tenant": tenant.pk}).status_code in (
        200, 302)
    assert Subject.objects.get().ref == NFC
