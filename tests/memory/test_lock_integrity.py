"""Issue 19, holes 1, 2, 3 and 5, on PostgreSQL: the lock a record carries cannot be raced, masked, forged or
written around, by the service or by a client holding the application's own database credentials.

  1. a record written while a rule or a hold is being placed gets it (real threads, real connections);
  2. a longer governance rule does not mask a compliance one: a refusal names every rule that keeps the
     record, and legal's override is refused while any compliance rule or hold keeps it;
  3. the application role (a real non-owner role, `manage.py db_grant_app_role`) cannot forge the lock
     recompute grant nor write the lock columns; only the lock functions shorten a lock, from the rules;
  5. under any lock, a record's content changes only by a redaction.
"""
from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone

from config.errors import ApplicationError
from dsr.models import ConflictStatus, RetentionConflict
from dsr.services.conflicts import conflict_override
from memory.models import ForgetMode, Record
from memory.services import ForgetTarget, records_forget
from retention.models import ContentClass
from retention.services import hold_place, rule_create
from tests.conftest import APP_ROLE
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import TenantFactory, record, rule

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the lock functions are PostgreSQL's")

WRITERS = 12
PER_WRITER = 6


def _in_threads(*targets):
    """Run the callables at once on real threads, each on its own database connection; re-raise the first error."""
    barrier = threading.Barrier(len(targets))
    errors = []

    def run(target):
        try:
            barrier.wait()
            target()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the main thread)
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]


def _writer(tenant, content_class, subject):
    def write():
        for i in range(PER_WRITER):
            record(tenant, content_class, scope=f"user:s/session:{threading.get_ident()}-{i}", subject=subject)
    return write


@pytest.mark.parametrize("round_", range(4))
def test_records_written_while_a_compliance_rule_is_placed_all_get_its_lock(transactional_db, round_):
    tenant = TenantFactory(name="acme")
    trades = ContentClass.objects.create(tenant=tenant, name="trades")

    def place_rule():
        rule(tenant, trades, days=2555, mode="compliance", authority="SEC 17a-4")

    _in_threads(*[_writer(tenant, trades, "subject-s") for _ in range(WRITERS)], place_rule)

    records = Record.objects.filter(content_class=trades)
    assert records.count() == WRITERS * PER_WRITER
    unprotected = [r.pk for r in records if r.retained_until != r.created_at + timedelta(days=2555)]
    assert unprotected == []
    # and so an agent's hard forget of all of them deletes nothing
    result = records_forget(tenant=tenant, target=ForgetTarget(subjects=("subject-s",)), mode=ForgetMode.HARD, actor="agent")
    assert result.status == "refused" and records.count() == WRITERS * PER_WRITER


@pytest.mark.parametrize("round_", range(4))
def test_records_written_while_a_hold_is_placed_on_their_subject_are_all_held(transactional_db, round_):
    tenant = TenantFactory(name="acme")
    chat = ContentClass.objects.create(tenant=tenant, name="chat")
    subject = record(tenant, chat, subject="subject-s").subject

    def place_hold():
        hold_place(tenant=tenant, matter="Doe v. Acme", subject=subject, actor="legal")

    _in_threads(*[_writer(tenant, chat, "subject-s") for _ in range(WRITERS)], place_hold)

    records = Record.objects.filter(subject=subject)
    assert records.count() == WRITERS * PER_WRITER + 1
    assert list(records.filter(held=False).values_list("pk", flat=True)) == []


def test_a_written_record_carries_the_lock_the_database_computed(db, tenant, ledger_class):
    rule(tenant, ledger_class, days=100, mode="compliance", protects="content")
    written = record(tenant, ledger_class)
    stored = Record.objects.get(pk=written.pk)
    assert (written.retained_until, written.lock_protects_content) == (stored.retained_until, True)
    assert stored.retained_until == stored.created_at + timedelta(days=100)


def test_a_raw_insert_cannot_leave_out_or_shorten_the_lock(db, tenant, ledger_class):
    rule(tenant, ledger_class, days=100, mode="compliance")
    template = record(tenant, ledger_class)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt, "
            "tier, created_at, erasure_pending, retained_until, held, lock_protects_content) "
            "SELECT tenant_id, scope_id, subject_id, content_class_id, 'raw', commitment, salt, tier, created_at, "
            "false, NULL, false, false FROM memory_record WHERE id = %s RETURNING id, retained_until", [template.pk])
        raw_id, retained_until = cursor.fetchone()
    assert retained_until == template.created_at + timedelta(days=100)


# --- 2. a longer governance rule does not mask a compliance rule ------------------------------------------


@pytest.fixture
def masked(db, mailoutbox):
    """The erasure scenario (a 7-year compliance content rule on trade-ledger), plus a longer governance rule on
    the same class, and the erasure request's conflicts."""
    scenario = erasure_scenario()
    trades = ContentClass.objects.get(tenant=scenario.tenant, name="trade-ledger")
    rule(scenario.tenant, trades, days=3000, mode="governance", authority="internal policy 4.2")
    request = verified_request(scenario)
    run_to_end(request.pk)
    conflict = RetentionConflict.objects.get(request=request, record_id=scenario.under_rule.pk)
    return scenario, conflict


def test_a_refusal_names_every_rule_that_keeps_the_record_not_only_the_longest(masked):
    scenario, _ = masked
    result = records_forget(tenant=scenario.tenant, target=ForgetTarget(record_ids=(scenario.under_rule.pk,)),
                            mode=ForgetMode.HARD, actor="agent")
    blocking = result.results[0]["reason"]["blocking"]
    assert [(b["duration_days"], b["mode"]) for b in blocking] == [(3000, "governance"), (7 * 365, "compliance")]
    created = Record.objects.get(pk=scenario.under_rule.pk).created_at
    assert blocking[1]["until"] == (created + timedelta(days=7 * 365)).isoformat()


def test_override_is_refused_while_a_compliance_rule_keeps_the_record_behind_a_longer_governance_one(masked):
    scenario, conflict = masked
    with pytest.raises(ApplicationError) as refused:
        conflict_override(conflict=conflict, actor="legal:alice", justification="the governance rule is ours")
    assert refused.value.code == "compliance_lock"
    assert "SEC 17a-4(f)" in refused.value.detail
    assert Record.objects.get(pk=scenario.under_rule.pk).content == "bought 100 ACME"
    assert RetentionConflict.objects.get(pk=conflict.pk).status == ConflictStatus.OPEN


def test_the_database_refuses_the_override_of_a_compliance_lock_even_when_python_is_skipped(masked):
    scenario, _ = masked
    with pytest.raises(IntegrityError, match=r"^retention_lock: .*compliance rule"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT retention_lock_override(%s)", [scenario.under_rule.pk])
    with pytest.raises(IntegrityError, match=r"^legal_hold:"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT retention_lock_override(%s)", [scenario.under_hold.pk])
    assert Record.objects.filter(pk__in=[scenario.under_rule.pk, scenario.under_hold.pk]).count() == 2


def test_override_of_a_governance_lock_alone_still_erases(db, tenant, chat, mailoutbox):
    scenario = erasure_scenario(tenant_name=tenant.name)
    policy = ContentClass.objects.create(tenant=tenant, name="support")
    rule(tenant, policy, days=400, mode="governance", authority="internal policy 1.1", protects="content")
    kept = record(tenant, policy, scope="user:7/session:1", content="a ticket", subject="subject-7")
    request = verified_request(scenario)
    run_to_end(request.pk)
    conflict = RetentionConflict.objects.get(request=request, record_id=kept.pk)
    conflict_override(conflict=conflict, actor="legal:alice", justification="no business need")
    assert not Record.objects.filter(pk=kept.pk).exists()


# --- 3. the application role cannot forge the grant or write the lock ---------------------------------------


@pytest.fixture
def locked(app_role):
    tenant = TenantFactory(name="acme")
    trades = ContentClass.objects.create(tenant=tenant, name="trades")
    rule(tenant, trades, days=2555, mode="compliance")
    chat = ContentClass.objects.create(tenant=tenant, name="chat")
    held = record(tenant, chat, subject="subject-h", content="held")
    hold_place(tenant=tenant, matter="Doe", record_ids=[held.pk], actor="legal")
    return tenant, record(tenant, trades, content="kept"), Record.objects.get(pk=held.pk), app_role


def test_the_application_role_cannot_forge_a_lock_grant_nor_unlock_and_delete(locked):
    tenant, kept, held, connect = locked
    with connect() as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (now())")
        for column, value in (("held", "false"), ("retained_until", "NULL"), ("lock_protects_content", "false")):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(f"UPDATE memory_record SET {column} = {value} WHERE id = ANY(%s)", [[kept.pk, held.pk]])
        for pk, code in ((kept.pk, "retention_lock:"), (held.pk, "legal_hold:")):
            with pytest.raises(psycopg.errors.RestrictViolation, match=f"^{code}"):
                app.execute("DELETE FROM memory_record WHERE id = %s", [pk])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("TRUNCATE memory_record CASCADE")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("ALTER TABLE memory_record DISABLE TRIGGER memory_record_guard_delete")
    assert Record.objects.filter(pk__in=[kept.pk, held.pk]).count() == 2
    assert Record.objects.get(pk=held.pk).held


def test_the_lock_functions_recompute_from_the_rules_and_cannot_shorten_below_them(locked):
    tenant, kept, held, connect = locked
    with connect() as app:
        app.execute("SELECT retention_locks_recompute_classes(%s)", [[kept.content_class_id]])
        app.execute("SELECT retention_locks_recompute_hold(h.id) FROM retention_legalhold h")
    assert Record.objects.get(pk=kept.pk).retained_until == kept.created_at + timedelta(days=2555)
    assert Record.objects.get(pk=held.pk).held


def test_the_application_role_runs_the_service(locked, as_app_role):
    tenant, kept, held, _ = locked
    chat = ContentClass.objects.get(tenant=tenant, name="chat")
    written = record(tenant, chat, subject="subject-x", content="as the app")
    rule(tenant, chat, days=30, mode="governance", authority="policy")
    assert Record.objects.get(pk=written.pk).retained_until == written.created_at + timedelta(days=30)
    result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(kept.pk, held.pk)), mode=ForgetMode.HARD,
                            actor="agent")
    assert result.status == "refused"
    assert records_forget(tenant=tenant, target=ForgetTarget(record_ids=(written.pk,)), mode=ForgetMode.SOFT,
                          actor="agent").status == "forgotten"
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (APP_ROLE,)


def test_db_grant_app_role_refuses_a_role_that_would_hold_the_owners_rights(db):
    with pytest.raises(CommandError, match="superuser"):
        call_command("db_grant_app_role", "postgres")
    with pytest.raises(CommandError, match="no role"):
        call_command("db_grant_app_role", "no_such_role_here")


# --- 5. under a lock, content changes only by a redaction ---------------------------------------------------


@pytest.fixture
def existence_locked(db, tenant, ledger_class):
    rule(tenant, ledger_class, days=2555, mode="compliance", protects="existence")
    return record(tenant, ledger_class, content="bought 100 ACME")


REWRITES = {
    "orm_update": lambda r: Record.objects.filter(pk=r.pk).update(content="TAMPERED"),
    "save": lambda r: (setattr(r, "content", "TAMPERED"), r.save()),
    "bulk_update": lambda r: (setattr(r, "content", "TAMPERED"), Record.objects.bulk_update([r], ["content"])),
    "raw_sql": lambda r: connection.cursor().execute("UPDATE memory_record SET content = 'TAMPERED' WHERE id = %s",
                                                     [r.pk]),
    "empty_without_redacted_at": lambda r: Record.objects.filter(pk=r.pk).update(content=""),
}


@pytest.mark.parametrize("how", sorted(REWRITES))
def test_content_of_an_existence_locked_record_cannot_be_rewritten(existence_locked, how):
    with pytest.raises(IntegrityError, match=r"^retention_lock: .*content"), transaction.atomic():
        REWRITES[how](Record.objects.get(pk=existence_locked.pk))
    assert Record.objects.get(pk=existence_locked.pk).content == "bought 100 ACME"


def test_the_redaction_an_existence_lock_permits_still_works_with_its_tombstone(existence_locked, tenant):
    result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(existence_locked.pk,)),
                            mode=ForgetMode.REDACT, actor="agent")
    assert result.status == "forgotten" and result.tombstone_id
    stored = Record.objects.get(pk=existence_locked.pk)
    assert (stored.content, stored.redacted_at is not None) == ("", True)


def test_a_rule_placed_after_a_write_is_seen_by_a_record_written_in_the_same_tenant_later(db, tenant, chat):
    first = record(tenant, chat)
    rule_create(tenant=tenant, content_class=chat, kind="regulatory", duration_days=10, authority="law",
                actor="legal")
    second = record(tenant, chat)
    assert Record.objects.get(pk=first.pk).retained_until == first.created_at + timedelta(days=10)
    assert second.retained_until == second.created_at + timedelta(days=10)
    assert timezone.now() < second.retained_until
