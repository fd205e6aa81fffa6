"""The write ledger on SQLite, the embedded default, and the sweeps and the coverage audit that use it (the
embedded worker runs beat, so every sweep and the audit run there too).

As tests/memory/test_guard_sqlite.py does (tests/sqlite_service.py): `manage.py migrate` from scratch in a
subprocess (Django's SQLite schema editor re-creates tables, dropping their triggers, for many ALTERs: this
notices), the service's own code in a `manage.py shell` subprocess, and raw SQL through Python's `sqlite3`,
bypassing Django.
"""
from __future__ import annotations

import sqlite3

import pytest

from tests.sqlite_service import manage_script, sqlite_copy, sqlite_env

SCRIPT = r"""
import json, logging
from datetime import timedelta
from django.db import connection
from django.utils import timezone
logging.disable(logging.WARNING)
from memory.models import Record
from memory.services import ForgetTarget, records_forget
from memory.sweeps import sweep_run_sync
from retention.audit import coverage_audit
from tests.factories import ContentClassFactory, TenantFactory, record, rule

tenant = TenantFactory(name="acme")
chat, notes, trades = (ContentClassFactory(tenant=tenant, name=n) for n in ("chat", "notes", "trades"))
rule(tenant, notes, days=30, kind="pact", authority="pact 4.2")
rule(tenant, trades, days=7 * 365, authority="SEC 17a-4", protects="content")
hidden = [record(tenant, chat, content=f"hidden {i}") for i in range(3)]
expired = record(tenant, notes, content="expired", age_days=40)
trade = record(tenant, trades, content="bought 100")
records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in hidden)), mode="soft", actor="t")
dry = sweep_run_sync(kind="compaction", actor="t", dry_run=True)
runs = {k: sweep_run_sync(kind=k, actor="t") for k in ("compaction", "pact_expiry", "deferred_erasures", "confirmations")}
clean = coverage_audit(actor="t")
with connection.cursor() as cursor:
    cursor.execute("DROP TRIGGER memory_record_guard_delete")  # the attack: the guard is gone
    cursor.execute("DELETE FROM memory_lineage WHERE source_id = %s", [trade.pk])  # no cascade on SQLite
    cursor.execute("DELETE FROM memory_record WHERE id = %s", [trade.pk])
gap = coverage_audit(actor="t")
print(json.dumps({
    "dry": dry.report, "runs": {k: [r.status, r.counts] for k, r in runs.items()},
    "left": sorted(Record.objects.values_list("pk", flat=True)), "trade": trade.pk, "expired": expired.pk,
    "clean": [clean.status, clean.totals], "gap": [gap.status, gap.totals, [c["samples"] for c in gap.classes]],
}))
"""


@pytest.fixture(scope="module")
def sqlite_db(sqlite_template, tmp_path_factory):
    return sqlite_copy(sqlite_template, tmp_path_factory.mktemp("sweeps-sqlite"))


@pytest.fixture(scope="module")
def results(sqlite_db):
    return manage_script(SCRIPT, env=sqlite_env(sqlite_db, LEDGER_SIGNING_PASSPHRASE="test-only"))


def test_ledger_triggers_survive_every_migration(sqlite_db):
    with sqlite3.connect(sqlite_db) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"memory_record_write_ledger", "retention_writeledger_no_update", "retention_writeledger_no_delete",
            "retention_tombstoneddeletion_no_update", "retention_tombstoneddeletion_no_delete"} <= names


def test_sweeps_run_on_sqlite(results):
    assert results["dry"]["would_delete"] == 3
    assert {k: v[0] for k, v in results["runs"].items()} == dict.fromkeys(results["runs"], "finished")
    assert results["runs"]["compaction"][1]["deleted"] == 3 and results["runs"]["pact_expiry"][1]["deleted"] == 1
    assert results["runs"]["confirmations"][1]["confirmed"] == 3
    assert results["left"] == []  # the trade: see the next test


def test_audit_runs_on_sqlite_and_finds_the_gap(results):
    assert results["clean"][0] == "clean" and results["clean"][1]["deleted_with_tombstone"] == 4
    status, totals, samples = results["gap"]
    assert status == "gaps" and totals["gaps"] == 1 and {"gaps": [results["trade"]]} in samples


def test_raw_inserts_are_ledgered_and_the_ledger_is_append_only(sqlite_db, results):
    with sqlite3.connect(sqlite_db, isolation_level=None) as conn:
        conn.execute("INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment,"
                     " salt, tier, created_at, erasure_pending, held, lock_protects_content)"
                     " VALUES (1, 1, NULL, 1, 'raw', 'c', 's', 'hot', '2026-01-01 00:00:00', 0, 0, 0)")
        (raw_id,) = conn.execute("SELECT max(id) FROM memory_record").fetchone()
        assert conn.execute("SELECT count(*) FROM retention_writeledgerentry WHERE record_id = ?", (raw_id,)).fetchone()[0] == 1
        for statement in ("UPDATE retention_writeledgerentry SET record_id = 0", "DELETE FROM retention_writeledgerentry"):
            with pytest.raises(sqlite3.IntegrityError, match="write_ledger: the write ledger is append-only"):
                conn.execute(statement)
