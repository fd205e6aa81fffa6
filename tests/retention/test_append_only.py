"""Issue 19, hole 4: the retention table, its versions and the legal holds cannot be weakened behind the service's
back, and the coverage audit believes only signed, chained versions of the table.

The attack it replays: delete a rule, turn a compliance rule into a governance one, shorten it, delete or un-release
a hold, rewrite or drop a table version, insert a weaker one; then forget the records they protected with
lawful-looking (signed) tombstones. On PostgreSQL through Django's connection (the test database's owner: the
triggers refuse even it) and as the application role (a real non-owner role); on SQLite from a database migrated
from an install made before the triggers (so the old, unsigned versions are signed late), with raw `sqlite3`.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sqlite3

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db import IntegrityError, connection, transaction

from config.errors import ApplicationError
from memory.models import ForgetMode, Record
from memory.services import ForgetTarget, records_forget
from retention.audit import coverage_audit
from retention.locks import locks_recompute_for_classes
from retention.models import (
    AuditStatus,
    ContentClass,
    HoldRecord,
    LegalHold,
    RetentionRule,
    RetentionTableVersion,
)
from retention.services import hold_place, hold_release, rule_change_duration, rule_retire
from tests.factories import ContentClassFactory, TenantFactory, record, rule
from tests.sqlite_service import manage, manage_script, sqlite_env

PREFIX = "^retention_table:"
postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's triggers; SQLite below")


class Table:
    """A tenant's retention table and holds: the compliance rule, a governance rule, a retired governance rule, a
    hold on a subject, a hold on listed records, a released hold."""

    def __init__(self):
        self.tenant = TenantFactory(name="acme")
        self.trades = ContentClassFactory(tenant=self.tenant, name="trades")
        self.chat = ContentClassFactory(tenant=self.tenant, name="chat")
        self.compliance = rule(self.tenant, self.trades, days=2555, mode="compliance", protects="content",
                               authority="SEC 17a-4(f)")
        self.governance = rule(self.tenant, self.chat, days=365, authority="policy 7")
        self.retired = rule_retire(rule=rule(self.tenant, self.chat, days=30, authority="policy 8"), actor="legal",
                                   justification="superseded")
        self.trade = record(self.tenant, self.trades, content="bought 100 ACME", subject="subject-t")
        held = record(self.tenant, self.chat, content="the disputed message", subject="subject-h")
        self.subject_hold = hold_place(tenant=self.tenant, matter="Doe v. Acme", subject=held.subject, actor="legal")
        self.listed_hold = hold_place(tenant=self.tenant, matter="Roe v. Acme", record_ids=[held.pk], actor="legal")
        self.released = hold_release(
            hold=hold_place(tenant=self.tenant, matter="closed", content_class=self.chat, actor="legal"),
            actor="legal", reason="matter closed")

    def snapshot(self) -> dict:
        """What the five tables hold, as comparable values."""
        return {model.__name__: sorted(tuple(str(v) for v in row) for row in model.objects.values_list())
                for model in (RetentionRule, RetentionTableVersion, LegalHold, HoldRecord, ContentClass)}


# (name, SQL, parameters from the table): each one a way around the service that the database must refuse.
ATTACKS = [
    ("delete_rule", "DELETE FROM retention_retentionrule WHERE id = %s", lambda t: [t.compliance.pk]),
    ("compliance_to_governance", "UPDATE retention_retentionrule SET mode = 'governance' WHERE id = %s",
     lambda t: [t.compliance.pk]),
    ("shorten_compliance", "UPDATE retention_retentionrule SET duration_days = 1 WHERE id = %s",
     lambda t: [t.compliance.pk]),
    ("retire_compliance", "UPDATE retention_retentionrule SET retired_at = now() WHERE id = %s",
     lambda t: [t.compliance.pk]),
    ("protect_existence_only", "UPDATE retention_retentionrule SET protects = 'existence' WHERE id = %s",
     lambda t: [t.compliance.pk]),
    ("move_rule_to_another_class", "UPDATE retention_retentionrule SET content_class_id = %s WHERE id = %s",
     lambda t: [t.chat.pk, t.compliance.pk]),
    ("unretire_rule", "UPDATE retention_retentionrule SET retired_at = NULL WHERE id = %s",
     lambda t: [t.retired.pk]),
    ("delete_hold", "DELETE FROM retention_legalhold WHERE id = %s", lambda t: [t.subject_hold.pk]),
    ("unrelease_hold", "UPDATE retention_legalhold SET released_at = NULL, released_by = '', release_reason = '' "
                       "WHERE id = %s", lambda t: [t.released.pk]),
    ("retarget_hold", "UPDATE retention_legalhold SET subject_id = NULL, content_class_id = %s WHERE id = %s",
     lambda t: [t.trades.pk, t.subject_hold.pk]),
    ("release_note_without_release", "UPDATE retention_legalhold SET release_reason = 'x' WHERE id = %s",
     lambda t: [t.subject_hold.pk]),
    ("delete_listed_record", "DELETE FROM retention_holdrecord WHERE hold_id = %s", lambda t: [t.listed_hold.pk]),
    ("change_listed_record", "UPDATE retention_holdrecord SET record_id = 0 WHERE hold_id = %s",
     lambda t: [t.listed_hold.pk]),
    ("rewrite_version", "UPDATE retention_retentiontableversion SET rules = '[]'::jsonb WHERE tenant_id = %s",
     lambda t: [t.tenant.pk]),
    ("resign_version", "UPDATE retention_retentiontableversion SET signature = '\\x00'::bytea WHERE tenant_id = %s",
     lambda t: [t.tenant.pk]),
    ("delete_version", "DELETE FROM retention_retentiontableversion WHERE tenant_id = %s", lambda t: [t.tenant.pk]),
    ("insert_unsigned_version",
     "INSERT INTO retention_retentiontableversion (tenant_id, number, actor, change, rules, digest, created_at, "
     "previous_digest, kid, signature, signed_late) VALUES (%s, 99, 'x', 'x', '[]', '', now(), '', '', '', false)",
     lambda t: [t.tenant.pk]),
    ("rename_class", "UPDATE retention_contentclass SET name = 'chat-old' WHERE id = %s", lambda t: [t.trades.pk]),
    ("delete_class", "DELETE FROM retention_contentclass WHERE id = %s",
     lambda t: [ContentClassFactory(tenant=t.tenant, name="unused").pk]),
]


@pytest.fixture
def table(db):
    return Table()


@postgresql
@pytest.mark.parametrize("sql, params", [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_raw_sql_cannot_weaken_rules_versions_or_holds(table, sql, params):
    arguments = params(table)
    before = table.snapshot()

    with pytest.raises(IntegrityError, match=PREFIX), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, arguments)

    assert table.snapshot() == before


@postgresql
def test_orm_deletes_and_updates_of_rules_versions_and_holds_are_refused(table):
    before = table.snapshot()
    attempts = [
        lambda: RetentionRule.objects.filter(pk=table.compliance.pk).delete(),
        lambda: RetentionRule.objects.filter(pk=table.compliance.pk).update(mode="governance"),
        lambda: RetentionRule.objects.filter(pk=table.compliance.pk).update(duration_days=30),
        lambda: LegalHold.objects.filter(pk=table.subject_hold.pk).delete(),
        lambda: LegalHold.objects.filter(pk=table.released.pk).update(released_at=None),
        lambda: RetentionTableVersion.objects.filter(tenant=table.tenant).update(rules=[]),
        lambda: RetentionTableVersion.objects.filter(tenant=table.tenant).delete(),
    ]
    for attempt in attempts:
        with pytest.raises(IntegrityError, match=PREFIX), transaction.atomic():
            attempt()
    assert table.snapshot() == before


def _change(obj, **values) -> None:
    for name, value in values.items():
        setattr(obj, name, value)
    with transaction.atomic():
        obj.save()


@postgresql
def test_a_whole_row_save_passes_when_values_are_unchanged_and_is_refused_when_it_weakens(table):
    rule_ = RetentionRule.objects.get(pk=table.compliance.pk)
    hold = LegalHold.objects.get(pk=table.released.pk)
    cls = ContentClass.objects.get(pk=table.trades.pk)

    # save() writes every column; those with the same value are no change
    _change(rule_)
    _change(hold)
    _change(cls, description="the trade ledger")
    _change(rule_, duration_days=3000)  # a compliance rule may grow

    for obj, values in ((rule_, {"duration_days": 2555}), (rule_, {"mode": "governance"}),
                        (hold, {"released_at": None}), (cls, {"name": "renamed"})):
        stored = type(obj).objects.get(pk=obj.pk)
        with pytest.raises(IntegrityError, match=PREFIX):
            _change(stored, **values)
    assert RetentionRule.objects.get(pk=rule_.pk).duration_days == 3000
    assert ContentClass.objects.get(pk=cls.pk).description == "the trade ledger"


@postgresql
def test_the_legal_levers_still_work_and_each_signs_a_version(table):
    extended = rule_change_duration(rule=table.compliance, duration_days=3650, actor="legal", justification="FINRA")
    shortened = rule_change_duration(rule=table.governance, duration_days=90, actor="legal", justification="policy")
    retired = rule_retire(rule=table.governance, actor="legal", justification="gone")
    released = hold_release(hold=table.subject_hold, actor="legal", reason="settled")
    with pytest.raises(ApplicationError) as refused:
        rule_change_duration(rule=table.compliance, duration_days=10, actor="legal", justification="no")

    assert refused.value.code == "compliance_lock"
    assert (extended.duration_days, shortened.duration_days) == (3650, 90)
    assert RetentionRule.objects.get(pk=retired.pk).retired_at is not None
    stored = LegalHold.objects.get(pk=released.pk)
    assert (stored.released_by, stored.release_reason) == ("legal", "settled")
    versions = list(RetentionTableVersion.objects.filter(tenant=table.tenant).order_by("number"))
    assert all(v.kid and bytes(v.signature) for v in versions) and not any(v.signed_late for v in versions)
    assert coverage_audit(actor="test").anomalies == []


def _key_set(client) -> dict:
    return {k["kid"]: k for k in client.get("/.well-known/tombstone-keys.json").json()["keys"]}


@postgresql
def test_a_version_is_signed_by_the_published_tombstone_key_over_its_statement_and_chained(table, client):
    from retention.versions import PAYLOAD_TYPE
    from tombstones.dsse import pae

    first, second = RetentionTableVersion.objects.filter(tenant=table.tenant).order_by("number")[:2]
    key = _key_set(client)[second.kid]
    statement = json.loads(_statement_bytes(second))

    assert key["purpose"] == "tombstone"
    x = base64.urlsafe_b64decode(key["x"] + "=" * (-len(key["x"]) % 4))
    Ed25519PublicKey.from_public_bytes(x).verify(bytes(second.signature), pae(PAYLOAD_TYPE, _statement_bytes(second)))
    assert statement["tenant_id"] == table.tenant.pk and statement["number"] == second.number == 2
    assert {(r["content_class"], r["content_class_id"]) for r in statement["rules"]} == {
        ("trades", table.trades.pk), ("chat", table.chat.pk)}
    assert first.previous_digest == "" and second.previous_digest == hashlib.sha256(_statement_bytes(first)).hexdigest()


def _statement_bytes(version) -> bytes:
    import rfc8785

    return rfc8785.dumps({
        "tenant_id": version.tenant_id, "number": version.number, "rules": version.rules,
        "created_at": version.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "previous_digest": version.previous_digest,
    })


def _bypassing(table_name: str, *statements: tuple[str, list]) -> None:
    """Run statements with the table's guard trigger disabled: what only the owner could do, simulated."""
    trigger = {"retention_retentionrule": "retention_retentionrule_guard",
               "retention_retentiontableversion": "retention_retentiontableversion_guard"}[table_name]
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending deferred checks: ALTER TABLE needs that
        cursor.execute(f"ALTER TABLE {table_name} DISABLE TRIGGER {trigger}")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute(f"ALTER TABLE {table_name} ENABLE TRIGGER {trigger}")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")  # back as they were: every deferrable one is initially so


def _forged_version(tenant_id: int, number: int, rules: list, kid: str) -> None:
    """A version row with a weaker table, inserted by raw SQL: with a key id the key set publishes, and a
    signature, since the database refuses one without; but not the key's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO retention_retentiontableversion (tenant_id, number, actor, change, rules, digest, created_at,"
            " previous_digest, kid, signature, signed_late) VALUES (%s, %s, 'legal', 'retired a rule', %s, '', now(),"
            " '', %s, %s, false)", [tenant_id, number, json.dumps(rules), kid, b"\x01" * 64])


@postgresql
def test_a_forged_weaker_version_is_not_believed_and_the_lawful_looking_forget_it_allowed_is_a_gap(table):
    # Given a weaker table inserted as the latest version, and the compliance rule's row gone (the guard's help
    # simulated: only the owner could disable it), then the locks recomputed from the rows as the service would
    latest = RetentionTableVersion.objects.filter(tenant=table.tenant).order_by("-number").first()
    weaker = [r for r in latest.rules if r["content_class"] != "trades"]
    _forged_version(table.tenant.pk, latest.number + 1, weaker, latest.kid)
    _bypassing("retention_retentionrule", ("DELETE FROM retention_retentionrule WHERE id = %s", [table.compliance.pk]))
    locks_recompute_for_classes([table.trades.pk])
    # When an agent forgets the trade: a signed tombstone, the record deleted
    result = records_forget(tenant=table.tenant, target=ForgetTarget(record_ids=(table.trade.pk,)),
                            mode=ForgetMode.HARD, actor="agent")
    assert result.status == "forgotten" and not Record.objects.filter(pk=table.trade.pk).exists()

    report = coverage_audit(actor="test")

    # Then the audit believes the last signed version: the trade was mandated when it was deleted
    assert report.status == AuditStatus.GAPS and report.gaps == 1
    row = next(c for c in report.classes if c["content_class"] == "trades")
    assert row["samples"]["gaps"] == [table.trade.pk] and row["mandate_days"] == 2555
    findings = {a["finding"]: a for a in report.anomalies}
    assert findings["retention_version_unverified"]["version"] == latest.number + 1
    assert findings["retention_version_unverified"]["problem"] == "signature_mismatch"
    assert findings["rule_table_drift"]["content_class_id"] == table.trades.pk
    assert findings["deleted_while_mandated"]["record_id"] == table.trade.pk


@postgresql
def test_a_version_dropped_from_the_chain_or_rewritten_is_reported_and_not_believed(table):
    versions = list(RetentionTableVersion.objects.filter(tenant=table.tenant).order_by("number"))
    assert len(versions) >= 4
    dropped, rewritten = versions[1], versions[-1]
    _bypassing("retention_retentiontableversion",
               ("DELETE FROM retention_retentiontableversion WHERE id = %s", [dropped.pk]),
               ("UPDATE retention_retentiontableversion SET rules = '[]'::jsonb WHERE id = %s", [rewritten.pk]))

    report = coverage_audit(actor="test")

    problems = {(a["version"], a["problem"]) for a in report.anomalies if a["finding"] == "retention_version_unverified"}
    assert problems == {(dropped.number + 1, "chain_broken"), (rewritten.number, "signature_mismatch")}
    # the emptied latest version is not believed, nor the one after the gap: the first version is, and the chat
    # rule it does not hold (added by the dropped one) is drift; the trades class keeps its mandate
    row = next(c for c in report.classes if c["content_class"] == "trades")
    assert row["mandate_days"] == 2555
    assert [a["content_class_id"] for a in report.anomalies if a["finding"] == "rule_table_drift"] == [table.chat.pk]


@postgresql
def test_the_version_page_says_whether_its_signature_verifies(table, admin_client):
    genuine, rewritten = RetentionTableVersion.objects.filter(tenant=table.tenant).order_by("number")[:2]
    _bypassing("retention_retentiontableversion",
               ("UPDATE retention_retentiontableversion SET rules = '[]'::jsonb WHERE id = %s", [rewritten.pk]))

    pages = {v.pk: admin_client.get(f"/admin/retention/retentiontableversion/{v.pk}/change/").content.decode()
             for v in (genuine, rewritten)}

    assert f"verifies · key <code>{genuine.kid}</code>" in pages[genuine.pk]
    assert "not trusted: signature_mismatch" in pages[rewritten.pk]


def _made_before_signing(tenant) -> list[int]:
    """Turn the tenant's versions into what an install made before migration 0005 holds: unsigned, no chain,
    rules without their class ids."""
    versions = list(RetentionTableVersion.objects.filter(tenant=tenant).order_by("number"))
    _bypassing("retention_retentiontableversion", *[
        ("UPDATE retention_retentiontableversion SET signature = '', kid = '', previous_digest = '', rules = %s"
         " WHERE id = %s", [json.dumps([{k: v for k, v in r.items() if k != "content_class_id"} for r in v.rules]),
                            v.pk])
        for v in versions])
    return [v.pk for v in versions]


@postgresql
def test_versions_made_before_signing_are_signed_late_once_by_the_first_audit(table):
    old = _made_before_signing(table.tenant)

    report = coverage_audit(actor="test")

    assert report.anomalies == [] and report.status == AuditStatus.CLEAN
    versions = list(RetentionTableVersion.objects.filter(pk__in=old).order_by("number"))
    assert all(v.signed_late and v.kid and bytes(v.signature) for v in versions)
    assert [v.previous_digest for v in versions[1:]] == [
        hashlib.sha256(_statement_bytes(v)).hexdigest() for v in versions[:-1]]
    with pytest.raises(IntegrityError, match=PREFIX), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE retention_retentiontableversion SET signature = '\\x02'::bytea, kid = 'k' WHERE id = %s",
                       [old[-1]])
    # the next version chains onto the last one signed late
    extended = rule_change_duration(rule=table.compliance, duration_days=3000, actor="legal", justification="FINRA")
    newest = RetentionTableVersion.objects.filter(tenant=extended.tenant).order_by("-number").first()
    assert newest.previous_digest == hashlib.sha256(_statement_bytes(versions[-1])).hexdigest()
    assert coverage_audit(actor="test").anomalies == []


@postgresql
def test_a_new_version_signs_the_old_ones_first_when_no_audit_did(table):
    old = _made_before_signing(table.tenant)

    rule(table.tenant, table.chat, days=10, authority="policy 9")

    assert all(v.signed_late for v in RetentionTableVersion.objects.filter(pk__in=old))
    assert coverage_audit(actor="test").anomalies == []


@postgresql
def test_the_application_role_cannot_weaken_rules_versions_or_holds(app_role):
    table = Table()
    attacks = [(sql, params(table)) for _name, sql, params in ATTACKS]
    before = table.snapshot()
    with app_role() as app:
        for sql, arguments in attacks:
            with pytest.raises(psycopg.errors.RestrictViolation, match=PREFIX):
                app.execute(sql, arguments)
        for name in ("retention_retentionrule", "retention_retentiontableversion", "retention_legalhold",
                     "retention_holdrecord", "retention_contentclass"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(f"TRUNCATE {name} CASCADE")
    assert table.snapshot() == before


# --- SQLite, the embedded default ---------------------------------------------------------------------------

SQLITE_TRIGGERS = {
    "retention_retentionrule_no_delete", "retention_retentionrule_guard", "retention_retentiontableversion_signed",
    "retention_retentiontableversion_no_update", "retention_retentiontableversion_no_delete",
    "retention_legalhold_no_delete", "retention_legalhold_guard", "retention_holdrecord_no_update",
    "retention_holdrecord_no_delete", "retention_contentclass_no_delete", "retention_contentclass_named_once",
}

# Run in `manage.py shell` on the migrated database: the service's own paths, then the audit.
SQLITE_SCRIPT = r"""
import json, logging
logging.disable(logging.WARNING)
from memory.models import Subject, Tenant
from retention.audit import coverage_audit
from retention.models import ContentClass, LegalHold, RetentionRule, RetentionTableVersion
from retention.services import hold_place, hold_release, rule_change_duration, rule_create, rule_retire

first = coverage_audit(actor="t")
late = list(RetentionTableVersion.objects.values_list("number", "signed_late", "kid"))
tenant = Tenant.objects.get(name="acme")
trades = ContentClass.objects.get(tenant=tenant, name="trades")
compliance = RetentionRule.objects.get(tenant=tenant, mode="compliance")
rule_change_duration(rule=compliance, duration_days=3000, actor="legal", justification="FINRA")
governance = rule_create(tenant=tenant, content_class=trades, kind="operational", duration_days=30,
                         authority="policy", actor="legal")
rule_change_duration(rule=governance, duration_days=10, actor="legal", justification="shorter")
rule_retire(rule=governance, actor="legal", justification="gone")
subject = Subject.objects.create(tenant=tenant, ref="subject-h")
hold_release(hold=hold_place(tenant=tenant, matter="closed", subject=subject, actor="legal"), actor="legal",
             reason="settled")
active = hold_place(tenant=tenant, matter="Doe", subject=subject, actor="legal")
second = coverage_audit(actor="t")
print(json.dumps({"first": [first.status, first.anomalies], "late": late, "second": [second.status, second.anomalies],
                  "rule": compliance.pk, "governance": governance.pk, "hold": active.pk,
                  "released": LegalHold.objects.exclude(released_at=None).get().pk}))
"""


@pytest.fixture(scope="module")
def sqlite_install(tmp_path_factory):
    """A SQLite install made before migration 0005 (a tenant, a class, a compliance rule and its unsigned version,
    as the service wrote them then), migrated to the end; then the service run on it."""
    var_dir = tmp_path_factory.mktemp("append-only-sqlite")
    path = var_dir / "x.sqlite3"
    env = sqlite_env(path, LEDGER_SIGNING_PASSPHRASE="test-only")
    manage("migrate", "retention", "0004", "--noinput", "--skip-checks", env=env)
    rules = [{"id": 1, "content_class": "trades", "kind": "regulatory", "duration_days": 2555,
              "authority": "SEC 17a-4(f)", "mode": "compliance", "protects": "content"}]
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO memory_tenant (id, name, created_at) VALUES (1, 'acme', '2025-01-01 00:00:00')")
        conn.execute("INSERT INTO retention_contentclass (id, tenant_id, name, description, created_at)"
                     " VALUES (1, 1, 'trades', '', '2025-01-01 00:00:00')")
        conn.execute("INSERT INTO retention_retentionrule (id, tenant_id, content_class_id, kind, duration_days,"
                     " authority, mode, protects, created_at) VALUES (1, 1, 1, 'regulatory', 2555, 'SEC 17a-4(f)',"
                     " 'compliance', 'content', '2025-01-01 00:00:00')")
        conn.execute("INSERT INTO retention_retentiontableversion (tenant_id, number, actor, change, rules, digest,"
                     " created_at) VALUES (1, 1, 'legal', 'added rule 1', ?, ?, '2025-01-01 00:00:00.250000')",
                     [json.dumps(rules), "d" * 64])
    manage("migrate", "--noinput", "--skip-checks", env=env)
    results = manage_script(SQLITE_SCRIPT, env=env)
    return path, results


def test_sqlite_triggers_survive_every_migration(sqlite_install):
    with sqlite3.connect(sqlite_install[0]) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert SQLITE_TRIGGERS <= names


def test_sqlite_old_versions_are_signed_late_and_the_levers_still_work(sqlite_install):
    results = sqlite_install[1]
    assert results["first"] == ["clean", []]
    assert [(n, late, bool(kid)) for n, late, kid in results["late"]] == [(1, True, True)]
    assert results["second"] == ["clean", []]


SQLITE_ATTACKS = [
    ("DELETE FROM retention_retentionrule WHERE id = :rule", "never deleted"),
    ("UPDATE retention_retentionrule SET mode = 'governance' WHERE id = :rule", "UPDATE of a retention rule"),
    ("UPDATE retention_retentionrule SET duration_days = 1 WHERE id = :rule", "never shortened"),
    ("UPDATE retention_retentionrule SET retired_at = '2026-01-01 00:00:00' WHERE id = :rule", "never retired"),
    ("UPDATE retention_retentionrule SET retired_at = NULL WHERE id = :governance", "never changes"),
    ("DELETE FROM retention_legalhold WHERE id = :hold", "never deleted"),
    ("UPDATE retention_legalhold SET released_at = NULL WHERE id = :released", "never changes"),
    ("UPDATE retention_legalhold SET matter = 'other' WHERE id = :hold", "only by its release"),
    ("UPDATE retention_retentiontableversion SET rules = '[]'", "append-only"),
    ("DELETE FROM retention_retentiontableversion", "append-only"),
    ("INSERT INTO retention_retentiontableversion (tenant_id, number, actor, change, rules, digest, created_at,"
     " previous_digest, kid, signature, signed_late) VALUES (1, 99, 'x', 'x', '[]', '', '2026-01-01 00:00:00', '',"
     " '', x'', 0)", "without a signature"),
    ("UPDATE retention_contentclass SET name = 'renamed'", "named once"),
    ("DELETE FROM retention_contentclass", "never deleted"),
]


@pytest.mark.parametrize("sql, message", SQLITE_ATTACKS)
def test_sqlite_refuses_the_same_attacks(sqlite_install, sql, message):
    path, results = sqlite_install
    with sqlite3.connect(path, isolation_level=None) as conn:
        with pytest.raises(sqlite3.IntegrityError, match=f"^retention_table: .*{message}"):
            conn.execute(sql, results)
