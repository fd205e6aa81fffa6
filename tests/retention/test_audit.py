"""The coverage audit (retention.audit) and its write ledger: it trusts storage, not the system's own
account; it finds what was destroyed behind the system's back and what was kept past its time."""
from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.models import Record
from memory.services import ForgetTarget, records_forget
from retention.audit import audit_alerts, coverage_audit
from retention.locks import lock_grant
from retention.models import AuditStatus, CoverageReport, WriteLedgerEntry
from retention.services import hold_place
from tests.factories import ContentClassFactory, record, rule

pytestmark = pytest.mark.django_db


def by_class(report: CoverageReport) -> dict[str, dict]:
    return {c["content_class"]: c for c in report.classes}


@pytest.fixture
def trades(tenant):
    trades = ContentClassFactory(tenant=tenant, name="trades")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4", protects="content", mode="compliance")
    return trades


def test_a_consistent_store_audits_clean(tenant, chat, trades):
    record(tenant, chat, content="hello")
    trade = record(tenant, trades, content="bought 100")
    gone = record(tenant, chat, content="bye")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(gone.pk,)), mode="hard", actor="test")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(trade.pk,)), mode="soft", actor="test")

    report = coverage_audit(actor="test")

    assert report.status == AuditStatus.CLEAN and report.gaps == 0 and audit_alerts() == []
    chat_row, trades_row = by_class(report)["chat"], by_class(report)["trades"]
    assert (chat_row["ledgered"], chat_row["at_rest"], chat_row["deleted_with_tombstone"]) == (2, 1, 1)
    assert (trades_row["mandated"], trades_row["hidden"], trades_row["mandate_days"]) == (1, 1, 7 * 365)


def test_audit_finds_a_mandated_record_deleted_behind_the_systems_back(tenant, chat, trades, caplog, admin_client):
    trade = record(tenant, trades, content="bought 100")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending deferred checks: ALTER TABLE needs that
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_guard_delete")
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [trade.pk])
        cursor.execute("ALTER TABLE memory_record ENABLE TRIGGER memory_record_guard_delete")

    with caplog.at_level(logging.ERROR, logger="retention.audit"):
        report = coverage_audit(actor="test")

    assert report.status == AuditStatus.GAPS and report.gaps == 1
    row = by_class(report)["trades"]
    assert row["gaps"] == 1 and row["samples"]["gaps"] == [trade.pk] and row["authority"] == "SEC 17a-4"
    assert any(r.levelno == logging.ERROR and "coverage gap" in r.getMessage() for r in caplog.records)
    (alert,) = audit_alerts()
    assert alert["level"] == "error" and "missing from storage" in alert["message"]
    page = admin_client.get("/admin/")
    assert page.status_code == 200 and b'id="audit-banner"' in page.content and b"missing from storage" in page.content
    assert admin_client.get(f"/admin/retention/coveragereport/{report.pk}/change/").status_code == 200


def test_audit_does_not_trust_the_records_own_lock(tenant, trades):
    """The lock columns say the record is free (someone cleared them), and a forget deleted it with a tombstone:
    the audit applies the rules to the ledger itself and knows it was mandated when it was deleted."""
    trade = record(tenant, trades, content="bought 100")
    with lock_grant():
        Record.objects.filter(pk=trade.pk).update(retained_until=None, lock_protects_content=False)
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(trade.pk,)), mode="hard", actor="test")

    report = coverage_audit(actor="test")

    assert report.status == AuditStatus.GAPS and by_class(report)["trades"]["samples"]["gaps"] == [trade.pk]
    assert [a["finding"] for a in report.anomalies] == ["deleted_while_mandated"]


def test_a_mandate_that_came_after_the_deletion_is_accounted_for_by_the_tombstone(tenant, chat):
    note = record(tenant, chat, content="old note")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(note.pk,)), mode="hard", actor="test")
    rule(tenant, chat, days=365, authority="new policy")

    report = coverage_audit(actor="test")

    assert report.gaps == 0 and by_class(report)["chat"]["deleted_with_tombstone"] == 1


def test_audit_finds_a_record_kept_past_its_time(tenant):
    notes = ContentClassFactory(tenant=tenant, name="notes")
    rule(tenant, notes, days=30, kind="pact", authority="Customer pact §4.2")
    stale = record(tenant, notes, content="kept too long", age_days=45)
    record(tenant, notes, content="young", age_days=5)

    report = coverage_audit(actor="test")

    assert report.status == AuditStatus.FINDINGS and report.kept_past_mandate == 1
    assert by_class(report)["notes"]["samples"] == {"kept_past_mandate": [stale.pk]}
    assert audit_alerts()[0]["level"] == "warning"


def test_audit_finds_hidden_records_whose_erasure_is_overdue_and_not_held_ones(tenant, chat):
    overdue, held = record(tenant, chat, content="still here"), record(tenant, chat, content="held", subject="x")
    hold_place(tenant=tenant, matter="m", actor="legal", record_ids=[held.pk])
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(overdue.pk, held.pk)), mode="soft", actor="test")
    Record.objects.filter(pk__in=[overdue.pk, held.pk]).update(forgotten_at=timezone.now() - timedelta(days=40))

    report = coverage_audit(actor="test")

    assert report.erasure_overdue == 1 and by_class(report)["chat"]["samples"]["erasure_overdue"] == [overdue.pk]
    assert by_class(report)["chat"]["held"] == 1


def test_audit_reports_deletions_without_tombstone_and_rows_the_ledger_never_saw(tenant, chat):
    deleted = record(tenant, chat, content="quietly gone")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [deleted.pk])  # unlocked: the guard lets it go
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_write_ledger")
    sneaked = record(tenant, chat, content="never ledgered")
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE memory_record ENABLE ALWAYS TRIGGER memory_record_write_ledger")

    report = coverage_audit(actor="test")

    row = by_class(report)["chat"]
    assert row["samples"] == {"unaccounted_deletions": [deleted.pk], "unledgered": [sneaked.pk]}
    assert report.gaps == 0 and report.status == AuditStatus.FINDINGS


# --- the write ledger --------------------------------------------------------------------------------

def test_every_write_is_ledgered_even_a_raw_bulk_insert_under_replica_mode(tenant, chat):
    written = record(tenant, chat, content="through the service")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")  # how bulk loaders skip triggers
        cursor.execute("""INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content,
                              commitment, salt, tier, created_at, erasure_pending, held, lock_protects_content)
                          SELECT tenant_id, scope_id, subject_id, content_class_id, 'bulk ' || g, commitment, salt,
                                 tier, now(), false, false, false
                          FROM memory_record, generate_series(1, 3) g WHERE id = %s RETURNING id""", [written.pk])
        bulk = sorted(r[0] for r in cursor.fetchall())
        cursor.execute("SET LOCAL session_replication_role = origin")

    ledgered = dict(WriteLedgerEntry.objects.values_list("record_id", "content_class_id"))
    assert set(ledgered) == {written.pk, *bulk} and set(ledgered.values()) == {chat.pk}


@pytest.mark.parametrize("statement", ["UPDATE retention_writeledgerentry SET record_id = record_id + 1",
                                       "DELETE FROM retention_writeledgerentry"])
def test_the_write_ledger_is_append_only(tenant, chat, statement):
    record(tenant, chat)
    with pytest.raises(IntegrityError, match="write_ledger: the write ledger is append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    with pytest.raises(IntegrityError, match="write_ledger"):
        with transaction.atomic():
            WriteLedgerEntry.objects.all().delete()
    assert WriteLedgerEntry.objects.count() == 1


def test_tombstones_are_indexed_once_and_a_forged_index_entry_excuses_nothing(tenant, chat, trades):
    from retention.audit import tombstones_index_update
    from retention.models import TombstonedDeletion

    note = record(tenant, chat, content="bye")
    trade = record(tenant, trades, content="bought 100")
    event = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(note.pk,)), mode="hard", actor="t").event
    first = coverage_audit(actor="test")
    assert first.tombstones_indexed_to == 0 and TombstonedDeletion.objects.count() == 1
    assert tombstones_index_update() == 0  # nothing new in the log
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_guard_delete")
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [trade.pk])
        cursor.execute("ALTER TABLE memory_record ENABLE TRIGGER memory_record_guard_delete")
    # Someone adds an index entry claiming that the note's tombstone deleted the trade too.
    TombstonedDeletion.objects.create(tombstone_id=event.public_id, leaf_index=0, tenant_id=tenant.pk,
                                      record_id=trade.pk)

    report = coverage_audit(actor="test")

    assert report.gaps == 1 and by_class(report)["trades"]["samples"]["gaps"] == [trade.pk]
    assert [a["finding"] for a in report.anomalies] == ["tombstone_index_mismatch"]
    with pytest.raises(IntegrityError, match="write_ledger: the audit's tombstone index is append-only"):
        with transaction.atomic():
            TombstonedDeletion.objects.filter(record_id=trade.pk).delete()


def test_the_write_ledger_and_the_reports_show_in_the_admin_read_only(admin_client, tenant, chat):
    written = record(tenant, chat)
    report = coverage_audit(actor="test")

    found = admin_client.get("/admin/retention/writeledgerentry/", {"q": str(written.pk)})
    nonsense = admin_client.get("/admin/retention/writeledgerentry/", {"q": "not a number"})
    page = admin_client.get(f"/admin/retention/coveragereport/{report.pk}/change/")

    assert found.status_code == 200 and f">{written.pk}<".encode() in found.content
    assert nonsense.status_code == 200
    assert page.status_code == 200 and b"chat" in page.content and b"Save" not in page.content
    assert admin_client.get("/admin/retention/coveragereport/add/").status_code == 403
