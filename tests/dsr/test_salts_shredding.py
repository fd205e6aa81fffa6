"""Crypto-shredding of the commitment salts (DESIGN.md invariant 6): once the subject holds their receipt (its
notice sent) and the deferred items have closed, no row anywhere in the database holds the salt of an erased
record, and the receipt the subject got still verifies offline, coverage included. Forgets no subject request
asked for keep no salts; the sweep destroys what was kept before; a later notice works without them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django_celery_beat.models import PeriodicTask

from config.errors import ApplicationError
from dsr.models import RetentionConflict, SubjectNotice
from dsr.services.conflicts import conflict_override
from memory.models import Record, SweepRun
from memory.services import ForgetTarget, records_forget
from memory.sweeps import sweep_run_sync
from retention.models import LegalHold
from retention.services import hold_release
from tests.dsr.test_workflow_steps import STEPS, run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import ContentClassFactory, record, rule
from tests.memory.sweep_fixtures import snapshot
from tombstones.models import TombstoneSalts
from tombstones.selectors import jwks_document
from tombstones.services import receipt_build

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
OFFLINE_ENV = {"PATH": os.environ.get("PATH", ""), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
               "PYTHONPATH": str(ROOT)}


def rows_holding(values: list[str]) -> list[tuple[str, str]]:
    """(table, column) of every text, JSON or binary column of every table in the database whose value
    contains one of `values` (PostgreSQL: every table of the schema, not only this project's models)."""
    assert connection.vendor == "postgresql"
    pattern = "|".join(values)
    found = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
                       "JOIN information_schema.tables t USING (table_schema, table_name) "
                       "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
                       "AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea', 'ARRAY')")
        for table, column, data_type in cursor.fetchall():
            value = f'encode("{column}", \'escape\')' if data_type == "bytea" else f'"{column}"::text'
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE {value} ~ %s', [pattern])
            if cursor.fetchone()[0]:
                found.append((table, column))
    return found


def mailed_receipts(mailoutbox, request) -> list[dict]:
    return [receipt for mail in mailoutbox if f"request {request.pk}" in mail.body
            for receipt in json.loads(mail.attachments[0][1])["receipts"]] if mailoutbox else []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the scan reads PostgreSQL's catalog")
def test_no_row_holds_an_erased_records_salt_once_the_receipt_is_sent_and_the_deferred_items_close(
        mailoutbox, django_capture_on_commit_callbacks, tmp_path):
    # Given the erasure scenario, plus a record whose lock protects only its existence (redacted, not
    # deleted), and every record's salt as written
    scenario = erasure_scenario()
    invoices = ContentClassFactory(tenant=scenario.tenant, name="invoices")
    rule(scenario.tenant, invoices, days=365, authority="Tax code §147 (existence)")
    invoice = record(scenario.tenant, invoices, scope="user:7/session:4", content="invoice for Jane Doe",
                     subject="subject-7")
    erased = scenario.free + [scenario.under_hold, invoice]
    salts = {r.pk: r.salt for r in erased}
    assert rows_holding([invoice.salt]) == [("memory_record", "salt")]  # the scan finds what is there
    request = verified_request(scenario)

    # When the request runs to its end (the notice with the receipts sent), the hold is released and the
    # deferred erasure runs (its notice sent too)
    run_to_end(request.pk)
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")
    with django_capture_on_commit_callbacks(execute=True):
        sweep_run_sync(kind="deferred_erasures", actor="test")

    # Then the deleted ones are gone, the invoice is redacted with its salt emptied and its commitment kept
    assert not Record.objects.filter(pk__in=[r.pk for r in scenario.free + [scenario.under_hold]]).exists()
    kept_invoice = Record.objects.get(pk=invoice.pk)
    assert (kept_invoice.content, kept_invoice.salt, kept_invoice.commitment) == ("", "", invoice.commitment)
    # and no row of any table holds any of their salts: tombstone salts, notices, records, events, anything
    assert SubjectNotice.objects.filter(request=request, sent_at__isnull=True).count() == 0
    assert rows_holding(list(salts.values())) == []
    assert not TombstoneSalts.objects.exists()
    # while the subject's receipts carry them, and verify offline, coverage included
    receipts = mailed_receipts(mailoutbox, request)
    given = {record_id: salt for receipt in receipts for record_id, salt in receipt["salts"].items()}
    assert {str(pk): salt for pk, salt in salts.items()}.items() <= given.items()
    (tmp_path / "keys.json").write_text(json.dumps(jwks_document()))
    for target in (scenario.free[0], scenario.under_hold):
        receipt = next(r for r in receipts if str(target.pk) in r["salts"])
        (tmp_path / "receipt.json").write_text(json.dumps(receipt))
        (tmp_path / "content.txt").write_text(target.content)
        done = subprocess.run([sys.executable, "-m", "tombstones.verify", tmp_path / "receipt.json",
                               tmp_path / "keys.json", "--content-file", tmp_path / "content.txt",
                               "--salt", receipt["salts"][str(target.pk)]],
                              cwd=ROOT, env=OFFLINE_ENV, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "content: Covered" in done.stdout, done.stdout + done.stderr


def test_salts_are_kept_until_the_notice_is_sent_then_only_the_subject_has_them(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario)
    step = "plan"
    while step != "notify":  # planned, executed, confirmed: the notice is not sent yet
        step = STEPS[step](request_id=request.pk).next_step
    tombstones = set(TombstoneSalts.objects.values_list("tombstone_id", flat=True))
    assert len(tombstones) == 2  # erase and hide: kept for the receipt

    sweep_run_sync(kind="salts_shredding", actor="test")  # the backstop leaves what a receipt awaits
    assert set(TombstoneSalts.objects.values_list("tombstone_id", flat=True)) == tombstones

    STEPS["notify"](request_id=request.pk)

    assert not TombstoneSalts.objects.exists()
    notice = SubjectNotice.objects.get(request=request)
    assert notice.receipt["salts_destroyed_at"] == notice.sent_at.isoformat()
    assert all("salts" not in r for r in notice.receipt["receipts"])
    assert all(r["salts"] for r in mailed_receipts(mailoutbox, request))
    assert request.history.get(action="subject_notified").note.endswith("the salts of its 2 tombstones destroyed")


def test_a_forget_no_subject_request_asked_for_keeps_no_salt_and_a_receipt_with_salts_is_refused_clearly(
        agent, tenant, chat):
    kept = record(tenant, chat, content="carol@example.com")
    answer = agent.post("/api/v1/memory/forget", {"target": {"record_id": kept.pk}, "mode": "hard",
                                                  "reason": "user asked"}, format="json").json()
    tombstone_id = answer["handle"]["tombstone_id"]

    assert not TombstoneSalts.objects.exists()
    with pytest.raises(ApplicationError) as refused:
        receipt_build(tombstone_id=tombstone_id)
    assert (refused.value.code, refused.value.status_code) == ("salts_destroyed", 410)
    with pytest.raises(CommandError, match="no longer kept"):
        call_command("tombstone_receipt", tombstone_id)
    assert "salts" not in receipt_build(tombstone_id=tombstone_id, include_salts=False)  # the proof still goes


def test_a_later_notice_after_an_override_carries_the_new_salts_and_not_the_destroyed_ones(mailoutbox):
    # Given a request with a record kept under a governance rule, notified once (its salts destroyed)
    scenario = erasure_scenario()
    contracts = ContentClassFactory(tenant=scenario.tenant, name="contracts")
    rule(scenario.tenant, contracts, days=5 * 365, authority="Company policy 12", protects="content")
    contract = record(scenario.tenant, contracts, scope="user:7/session:5", content="contract with Jane",
                      subject="subject-7")
    request = verified_request(scenario)
    run_to_end(request.pk)
    first_tombstones = {r["tombstone_id"] for r in mailed_receipts(mailoutbox, request)}

    # When legal overrides, and the workflow runs again to a second notice
    conflict = RetentionConflict.objects.get(request=request, record_id=contract.pk)
    conflict_override(conflict=conflict, actor="legal:alice", justification="contract ended")
    step = "execute"
    while step:
        step = STEPS[step](request_id=request.pk).next_step

    # Then the second notice carries the override's receipt with the contract's salt, the first ones without
    second = json.loads(mailoutbox[-1].attachments[0][1])["receipts"]
    assert {r["tombstone_id"] for r in second} > first_tombstones
    override = [r for r in second if r["tombstone_id"] not in first_tombstones]
    assert [r["salts"] for r in override] == [{str(contract.pk): contract.salt}]
    assert all(r["salts"] == {} for r in second if r["tombstone_id"] in first_tombstones)
    assert "earlier receipt" in mailoutbox[-1].body
    assert not TombstoneSalts.objects.exists()
    assert not RetentionConflict.objects.filter(pk=conflict.pk, status="open").exists()


def test_the_sweep_destroys_salts_kept_before_and_strips_sent_notices_and_runs_twice_harmlessly(tenant, chat):
    # Given salts kept the old way (a forget no request awaits) and a sent notice still holding salts
    old = record(tenant, chat, content="old content")
    forget = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(old.pk,)), mode="hard", actor="t",
                            salts_for_receipt=True)
    scenario = erasure_scenario()
    request = verified_request(scenario)
    run_to_end(request.pk)
    notice = SubjectNotice.objects.get(request=request)
    with_salts = {**notice.receipt, "receipts": [{**r, "salts": {"1": "ab" * 16}} for r in notice.receipt["receipts"]]}
    with_salts.pop("salts_destroyed_at")
    SubjectNotice.objects.filter(pk=notice.pk).update(receipt=with_salts)
    assert TombstoneSalts.objects.filter(tombstone_id=forget.tombstone_id).exists()

    # When a dry run, then the sweep, runs
    before = snapshot()
    dry = sweep_run_sync(kind="salts_shredding", actor="test", dry_run=True)
    assert snapshot() == before and dry.report["would_destroy"] == 1 and dry.report["would_strip_notices"] == 1
    run = sweep_run_sync(kind="salts_shredding", actor="test")

    # Then nothing holds them any more, on record in the run; a second run finds nothing to do
    assert not TombstoneSalts.objects.exists()
    stripped = SubjectNotice.objects.get(pk=notice.pk).receipt
    assert "salts_destroyed_at" in stripped and all("salts" not in r for r in stripped["receipts"])
    assert (run.counts["salts_destroyed"], run.counts["notices_stripped"]) == (1, 1)
    again = sweep_run_sync(kind="salts_shredding", actor="test")
    assert again.counts.get("claimed", 0) == 0 and SweepRun.objects.filter(kind="salts_shredding").count() == 3


def test_the_salts_shredding_sweep_is_scheduled():
    task = PeriodicTask.objects.get(name="sweep: salts shredding")
    assert (task.task, json.loads(task.kwargs), task.enabled) == ("memory.sweep_start", {"kind": "salts_shredding"},
                                                                  True)
