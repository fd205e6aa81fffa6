"""A legal hold on a subject covers the person whatever the spelling of their reference (memory.subjects),
and the coverage audit counts a hold on a subject over the records the write ledger has under a subject
merged into it (memory migration 0011)."""
from __future__ import annotations

import json
import unicodedata

import pytest
from django.db import connection

from memory.models import Record, Subject
from memory.services import ForgetTarget, records_forget, subject_get_or_create
from retention.audit import coverage_audit
from retention.locks import lock_grant
from retention.models import AuditStatus, LegalHold, WriteLedgerEntry
from retention.services import hold_preview_count, hold_release
from tests.factories import record

pytestmark = pytest.mark.django_db

NFC = "José Müller"
NFD = unicodedata.normalize("NFD", NFC)


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_nfc_hold_covers_the_records_written_under_nfd(tenant, chat, legal):
    written = [record(tenant, chat, subject=NFD, scope=f"user:7/session:{n}") for n in range(2)]
    other = record(tenant, chat, subject="someone else")

    response = post(legal, "/api/v1/holds", {"matter": "Doe v. Acme", "subject": f" {NFC}"})

    assert response.status_code == 201, response.json()
    assert response.json()["subject"] == NFC
    hold = LegalHold.objects.get(pk=response.json()["id"])
    assert hold_preview_count(hold=hold) == 2
    assert sorted(Record.objects.filter(held=True).values_list("pk", flat=True)) == sorted(r.pk for r in written)
    assert not Record.objects.get(pk=other.pk).held
    # and a record written afterwards under yet another spelling is held as it is written
    later = record(tenant, chat, subject=f"José  {unicodedata.normalize('NFD', 'Müller')}")
    assert Record.objects.get(pk=later.pk).held


def test_hold_on_a_subject_with_a_control_character_is_invalid_subject(tenant, chat, legal):
    record(tenant, chat, subject=NFC)

    response = post(legal, "/api/v1/holds", {"matter": "m", "subject": "José\x1bMüller"})

    assert response.status_code == 400 and response.json()["code"] == "invalid_subject"
    assert not LegalHold.objects.exists() and not Record.objects.filter(held=True).exists()


@pytest.fixture
def merged_record(tenant, chat):
    """A record the write ledger has under a subject that memory 0011 merged into another, as that
    migration leaves it: the record moved to the surviving subject, the ledger row as it was written."""
    survivor = subject_get_or_create(tenant=tenant, ref=NFC)
    written = record(tenant, chat, subject="the other spelling")
    merged = written.subject
    Subject.objects.filter(pk=merged.pk).update(ref=NFC, merged_into=survivor)
    Record.objects.filter(pk=written.pk).update(subject=survivor)  # unlocked yet: the guard lets it move
    assert WriteLedgerEntry.objects.get(record_id=written.pk).subject_id == merged.pk
    return written


def test_audit_counts_a_hold_on_the_survivor_over_records_ledgered_under_a_merged_subject(tenant, legal,
                                                                                          merged_record):
    assert post(legal, "/api/v1/holds", {"matter": "Doe v. Acme", "subject": NFD}).status_code == 201
    assert Record.objects.get(pk=merged_record.pk).held
    with connection.cursor() as cursor:  # destroyed behind the system's back, as an attacker would
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_guard_delete")
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [merged_record.pk])
        cursor.execute("ALTER TABLE memory_record ENABLE TRIGGER memory_record_guard_delete")

    report = coverage_audit(actor="test")

    assert report.status == AuditStatus.GAPS and report.gaps == 1
    assert report.classes[0]["samples"]["gaps"] == [merged_record.pk]


def test_released_hold_unholds_the_records_of_every_spelling(tenant, chat, legal, merged_record):
    nfd = record(tenant, chat, subject=NFD)
    hold = LegalHold.objects.get(pk=post(legal, "/api/v1/holds", {"matter": "m", "subject": NFC}).json()["id"])
    assert set(Record.objects.filter(held=True).values_list("pk", flat=True)) == {merged_record.pk, nfd.pk}

    hold_release(hold=hold, actor="legal", reason="settled")

    assert not Record.objects.filter(held=True).exists()
    assert coverage_audit(actor="test").status == AuditStatus.CLEAN


def test_audit_knows_a_tombstoned_deletion_of_a_merged_subjects_record_was_under_the_survivors_hold(
        tenant, legal, merged_record):
    """The lock columns were cleared behind the system's back and a forget then deleted the record with a
    tombstone: the hold on the surviving subject was active when it did, and the ledger names the merged one."""
    assert post(legal, "/api/v1/holds", {"matter": "Doe v. Acme", "subject": NFC}).status_code == 201
    with lock_grant():
        Record.objects.filter(pk=merged_record.pk).update(held=False)
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(merged_record.pk,)), mode="hard", actor="test")

    report = coverage_audit(actor="test")

    assert report.status == AuditStatus.GAPS and report.classes[0]["samples"]["gaps"] == [merged_record.pk]
    assert [a["finding"] for a in report.anomalies] == ["deleted_while_mandated"]
