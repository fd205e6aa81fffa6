"""Memory migration 0011 and dsr migration 0012 on a store written before references were normalized: the
NFD, NFC and padded spellings of one person's reference were three subjects, with locked and held records,
holds and a request among them. After the migration they are one person: the oldest subject survives, the
others point at it, and a hold, a forget or an erasure request for that person covers every record of
every spelling; no lock was lowered, the guard is back, and the coverage audit still reads the ledger right.

Run on PostgreSQL in this process (Django's MigrationExecutor: back to the state before, seed, forward) and
on SQLite in a subprocess (the embedded default: its triggers are dropped and created again, not disabled).
"""
from __future__ import annotations

import importlib
import sqlite3
import unicodedata

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from hypothesis import given, settings
from hypothesis import strategies as st

from config.errors import ApplicationError
from memory.subjects import subject_ref_normalize
from tests.sqlite_service import manage, manage_script, sqlite_env

NFC = "José Müller"
NFD = unicodedata.normalize("NFD", NFC)
MINE = [("memory", "0011_subject_refs_normalized"), ("dsr", "0012_subject_refs_normalized")]


def _before(graph) -> list[tuple[str, str]]:
    """Each app's migration just before ours, wherever the other migrations put them."""
    return [next(p.key for p in graph.node_map[key].parents if p.key[0] == key[0]) for key in MINE]


BEFORE = _before(MigrationLoader(None, ignore_no_migrations=True).graph)

# Runs against the historical models of BEFORE (no `merged_into` yet), here and in the SQLite subprocess.
SEED = r'''
import unicodedata
from datetime import timedelta

from django.utils import timezone


def seed(apps):
    Tenant, Subject, Scope, Record = (apps.get_model("memory", n) for n in ("Tenant", "Subject", "Scope", "Record"))
    ContentClass, LegalHold = apps.get_model("retention", "ContentClass"), apps.get_model("retention", "LegalHold")
    SubjectRequest = apps.get_model("dsr", "SubjectRequest")
    nfc = "José Müller"
    now = timezone.now()
    acme, globex = Tenant.objects.create(name="acme"), Tenant.objects.create(name="globex")
    chat = ContentClass.objects.create(tenant=acme, name="chat")
    scope = Scope.objects.create(tenant=acme, path="user:7", depth=1)

    def subject(tenant, ref, age_days):
        pk = Subject.objects.create(tenant=tenant, ref=ref).pk
        Subject.objects.filter(pk=pk).update(created_at=now - timedelta(days=age_days))
        return pk

    subjects = {
        "nfd": subject(acme, unicodedata.normalize("NFD", nfc), 30),  # the oldest spelling: it survives
        "nfc": subject(acme, nfc, 20),
        "padded": subject(acme, " José \t Müller ", 10),
        "Ann": subject(acme, "Ann", 5),
        "ann": subject(acme, "ann", 4),  # case is kept: another person
        "control": subject(acme, "bad\x01ref", 3),  # no valid normal form: left as it is
        "globex": subject(globex, nfc, 40),  # another tenant's José
    }

    def record(subject, content, **lock):
        return Record.objects.create(tenant=acme, scope=scope, subject_id=subjects[subject], content_class=chat,
                                     content=content, commitment="a" * 64, salt="b" * 32, created_at=now, **lock).pk

    records = {
        "nfd": record("nfd", "written under NFD"),
        "nfc_locked": record("nfc", "a trade, write-once for 7 years", retained_until=now + timedelta(days=2555),
                             lock_protects_content=True),
        "padded_held": record("padded", "the disputed message", held=True),
        "nfc": record("nfc", "written under NFC"),
        "Ann": record("Ann", "Ann's"),
    }
    holds = {
        "active": LegalHold.objects.create(tenant=acme, matter="Doe v. Acme", placed_by="legal", placed_at=now,
                                           subject_id=subjects["padded"]).pk,
        "released": LegalHold.objects.create(tenant=acme, matter="old matter", placed_by="legal", placed_at=now,
                                             subject_id=subjects["nfc"], released_at=now, released_by="legal",
                                             release_reason="settled").pk,
    }
    request = SubjectRequest.objects.create(
        tenant=acme, subject_id=subjects["nfc"], type="erasure", regulation="gdpr", channel="email",
        contact_email="jose@example.org", received_at=now, due_date=(now + timedelta(days=30)).date(),
        status="verified", identity_verified_by="operator", identity_method="passport", identity_verified_at=now,
    ).pk
    return {"subjects": subjects, "records": records, "holds": holds, "request": request}
'''


def _seed(apps) -> dict:
    namespace: dict = {}
    exec(SEED, namespace)
    return namespace["seed"](apps)


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


# --- the normal form the migration applies ---------------------------------------------------------------

migration = importlib.import_module("memory.migrations.0011_subject_refs_normalized")


@settings(max_examples=300, deadline=None)
@given(ref=st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(" \t\n\x00\x01\x85\u00a0\u0301"),
                   max_size=40) | st.text(min_size=195, max_size=210))
def test_the_migration_applies_the_normal_form_of_memory_subjects(ref):
    try:
        expected = subject_ref_normalize(ref)
    except ApplicationError:
        expected = None
    assert migration.normal_form(ref) == expected


# --- PostgreSQL ------------------------------------------------------------------------------------------

@pytest.fixture
def seeded(transactional_db):
    """The store as it was before memory 0011 (and dsr 0012), seeded; the latest migrations again after."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    executor = _migrate(BEFORE)
    ids = _seed(executor.loader.project_state(BEFORE).apps)
    yield ids, leaves
    _migrate(leaves)


def _triggers(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal",
                       [table])
        return dict(cursor.fetchall())


def test_migration_merges_one_persons_spellings_and_keeps_every_lock(seeded):
    from memory.models import Record, Subject
    from retention.models import LegalHold, WriteLedgerEntry
    from dsr.models import SubjectRequest

    ids, leaves = seeded
    s, r = ids["subjects"], ids["records"]
    # Raw SQL: the current models do not match the state before the migration.
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, content, commitment, salt, created_at, retained_until, lock_protects_content, held "
                       "FROM memory_record ORDER BY id")
        rows_before = {row[0]: row[1:] for row in cursor.fetchall()}
    triggers_before = _triggers("memory_record")
    assert triggers_before["memory_record_guard_update"] == "O" and triggers_before["memory_record_write_ledger"] == "A"

    _migrate(leaves)

    survivor = s["nfd"]
    subjects = {pk: (ref, merged) for pk, ref, merged in Subject.objects.values_list("pk", "ref", "merged_into_id")}
    assert subjects[survivor] == (NFC, None)
    assert subjects[s["nfc"]] == subjects[s["padded"]] == (NFC, survivor)
    assert subjects[s["Ann"]] == ("Ann", None) and subjects[s["ann"]] == ("ann", None)
    assert subjects[s["control"]] == ("bad\x01ref", None)
    assert subjects[s["globex"]] == (NFC, None)
    # Every record of the person is on the surviving subject; nothing else of any record changed, and the
    # active hold that covered the padded spelling's record now holds every record of the person.
    on = dict(Record.objects.values_list("pk", "subject_id"))
    assert {on[r[k]] for k in ("nfd", "nfc_locked", "padded_held", "nfc")} == {survivor} and on[r["Ann"]] == s["Ann"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, content, commitment, salt, created_at, retained_until, lock_protects_content, held "
                       "FROM memory_record ORDER BY id")
        rows_after = {row[0]: row[1:] for row in cursor.fetchall()}
    assert {pk: row[:-1] for pk, row in rows_after.items()} == {pk: row[:-1] for pk, row in rows_before.items()}
    assert {pk for pk, row in rows_after.items() if row[-1]} == {r["nfd"], r["nfc_locked"], r["padded_held"], r["nfc"]}
    assert set(LegalHold.objects.values_list("subject_id", flat=True)) == {survivor}
    assert SubjectRequest.objects.get(pk=ids["request"]).subject_id == survivor
    # The ledger keeps what was written.
    assert WriteLedgerEntry.objects.get(record_id=r["nfc_locked"]).subject_id == s["nfc"]
    assert WriteLedgerEntry.objects.get(record_id=r["padded_held"]).subject_id == s["padded"]
    # The guard is back as it was, and refuses what it refused.
    assert _triggers("memory_record") == triggers_before
    for sql in ("DELETE FROM memory_record WHERE id = %s", "UPDATE memory_record SET subject_id = NULL WHERE id = %s"):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [r["nfc_locked"]])
    # One live subject per reference and tenant, as before.
    with pytest.raises(IntegrityError), transaction.atomic():
        Subject.objects.create(tenant_id=Subject.objects.get(pk=survivor).tenant_id, ref=NFC)


def test_after_the_migration_holds_requests_and_the_audit_cover_every_spelling(seeded, mailoutbox):
    from dsr.models import RequestItem, SubjectRequest
    from memory.models import Record, Tenant
    from memory.services import ForgetTarget
    from memory.subjects import subject_find
    from retention.audit import coverage_audit
    from retention.models import LegalHold
    from retention.services import hold_preview_count, hold_release
    from tests.dsr.test_workflow_steps import run_to_end

    ids, leaves = seeded
    r = ids["records"]
    person = {r["nfd"], r["nfc_locked"], r["padded_held"], r["nfc"]}
    _migrate(leaves)
    acme = Tenant.objects.get(name="acme")

    assert subject_find(tenant=acme, ref=f" {NFC}").pk == ids["subjects"]["nfd"]
    assert set(ForgetTarget.parse({"subject": NFC}).records(acme).values_list("pk", flat=True)) == person
    hold = LegalHold.objects.get(pk=ids["holds"]["active"])
    assert hold_preview_count(hold=hold) == 4
    report = coverage_audit(actor="test")
    assert report.gaps == 0 and report.classes[0]["held"] == 4  # the ledger's spellings resolve to the hold's

    hold_release(hold=hold, actor="legal", reason="settled")
    assert not Record.objects.filter(held=True).exists()
    run_to_end(ids["request"])

    request = SubjectRequest.objects.get(pk=ids["request"])
    planned = set(RequestItem.objects.filter(request=request, kind="record").values_list("object_id", flat=True))
    assert planned == person
    # The three free records are erased; the write-once trade is kept (its lock is the record's own).
    assert set(Record.objects.filter(pk__in=person).values_list("pk", flat=True)) == {r["nfc_locked"]}
    assert Record.objects.get(pk=r["nfc_locked"]).content == "a trade, write-once for 7 years"


def test_migration_cannot_be_reversed_once_it_merged_subjects(seeded):
    ids, leaves = seeded
    _migrate(leaves)

    with pytest.raises(RuntimeError, match="cannot be undone"):
        _migrate(BEFORE)

    from memory.models import Subject
    assert Subject.objects.filter(merged_into=ids["subjects"]["nfd"]).count() == 2


# --- SQLite ----------------------------------------------------------------------------------------------

SQLITE_SEED = SEED + r'''
import json
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

BEFORE = %r
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
print(json.dumps(seed(executor.loader.project_state(BEFORE).apps)))
''' % (BEFORE + [("retention", "0004_audit_tombstone_index")],)  # a fresh file: the write ledger's trigger too


def test_migration_on_sqlite_moves_locked_records_and_puts_the_guard_back(tmp_path):
    path = tmp_path / "x.sqlite3"
    env = sqlite_env(path)
    ids = manage_script(SQLITE_SEED, env=env)
    conn = sqlite3.connect(path, isolation_level=None)
    triggers_before = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                                        "AND tbl_name = 'memory_record'").fetchall())
    assert "memory_record_guard_update" in triggers_before

    manage("migrate", "memory", "0011_subject_refs_normalized", "--noinput", "--skip-checks", env=env)
    # The guard is put back exactly as it was (later migrations, such as memory 0012, may change it themselves).
    triggers_after = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                                       "AND tbl_name = 'memory_record'").fetchall())
    assert triggers_after == triggers_before
    manage("migrate", "--noinput", "--skip-checks", env=env)

    s, r = ids["subjects"], ids["records"]
    subjects = {pk: (ref, merged) for pk, ref, merged in conn.execute("SELECT id, ref, merged_into_id FROM memory_subject")}
    assert subjects[s["nfd"]] == (NFC, None)
    assert subjects[s["nfc"]] == subjects[s["padded"]] == (NFC, s["nfd"])
    assert subjects[s["ann"]] == ("ann", None) and subjects[s["globex"]] == (NFC, None)
    rows = {pk: (subject, held, retained) for pk, subject, held, retained in conn.execute(
        "SELECT id, subject_id, held, retained_until FROM memory_record")}
    assert {rows[r[k]][0] for k in ("nfd", "nfc_locked", "padded_held", "nfc")} == {s["nfd"]}
    assert {pk for pk, row in rows.items() if row[1]} == {r["nfd"], r["nfc_locked"], r["padded_held"], r["nfc"]}
    assert rows[r["nfc_locked"]][2] is not None
    assert {h for (h,) in conn.execute("SELECT DISTINCT subject_id FROM retention_legalhold")} == {s["nfd"]}
    assert conn.execute("SELECT subject_id FROM dsr_subjectrequest").fetchall() == [(s["nfd"],)]
    with pytest.raises(sqlite3.IntegrityError, match="legal_hold: .*subject"):
        conn.execute("UPDATE memory_record SET subject_id = ? WHERE id = ?", (s["Ann"], r["nfc_locked"]))
    conn.close()
