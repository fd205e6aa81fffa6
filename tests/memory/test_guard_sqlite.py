"""The database guard (memory migration 0003) on SQLite, the embedded default.

The database is built the way the embedded service builds it: `manage.py migrate` in a subprocess
(so every later migration runs too: Django's SQLite schema editor re-creates a table, dropping its
triggers, for many ALTERs, and this would notice; tests/sqlite_service.py). The rows are written by Django's ORM in a
subprocess, so the datetimes are stored exactly as Django stores them; the attacks are then raw SQL
through Python's `sqlite3` module, bypassing Django entirely.
"""
from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from tests.sqlite_service import manage_script, sqlite_copy, sqlite_env

SEED = r"""
import json
from datetime import timedelta
from django.utils import timezone
from memory.models import Record, Scope, Subject, Tenant
from retention.models import ContentClass

tenant, other_tenant = Tenant.objects.create(name="acme"), Tenant.objects.create(name="globex")
scope = Scope.objects.create(tenant=tenant, path="user:42", depth=1)
other_scope = Scope.objects.create(tenant=tenant, path="user:43", depth=1)
subject = Subject.objects.create(tenant=tenant, ref="subject-1")
content_class = ContentClass.objects.create(tenant=tenant, name="trade-confirmations")
other_class = ContentClass.objects.create(tenant=tenant, name="chat")
now = timezone.now().replace(microsecond=123456)
seven_years = timedelta(days=7 * 366)

def record(**lock):
    fields = dict(tenant=tenant, scope=scope, subject=subject, content_class=content_class,
                  content="the original content", commitment="a" * 64, salt="b" * 32, created_at=now)
    fields.update(lock)
    return Record.objects.create(**fields).pk

print(json.dumps({
    "other_tenant": other_tenant.pk, "other_scope": other_scope.pk, "other_class": other_class.pk,
    "records": {
        "retention": record(retained_until=now + seven_years),
        "content_retention": record(retained_until=now + seven_years, lock_protects_content=True),
        "hold": record(held=True),
        "hold_and_retention": record(held=True, retained_until=now + seven_years),
        "none": record(),
        "expired": record(retained_until=now - timedelta(seconds=2), lock_protects_content=True),
        "ends_in_an_hour": record(retained_until=now + timedelta(hours=1)),
        "ends_in_an_hour_whole_second": record(retained_until=(now + timedelta(hours=1)).replace(microsecond=0)),
    },
}))
"""

PROTECTED_UPDATES = {
    "id": "id = id + 1000000",
    "tenant_id": "tenant_id = :other_tenant",
    "scope_id": "scope_id = :other_scope",
    "subject_id": "subject_id = NULL",
    "content_class_id": "content_class_id = :other_class",
    "created_at": "created_at = '2001-01-01 00:00:00'",
    "commitment": "commitment = 'ffff'",
    "salt": "salt = 'eeee'",
}
LOCK_PREFIX = {"retention": "retention_lock:", "content_retention": "retention_lock:", "hold": "legal_hold:",
               "hold_and_retention": "legal_hold:"}


@pytest.fixture(scope="module")
def migrated(sqlite_template, tmp_path_factory):
    """A migrated, seeded SQLite file (built once) and the ids of its rows."""
    path = sqlite_copy(sqlite_template, tmp_path_factory.mktemp("guard-sqlite"))
    return path, manage_script(SEED, env=sqlite_env(path))


@pytest.fixture
def ids(migrated):
    return migrated[1]


@pytest.fixture
def db_path(migrated, tmp_path):
    return sqlite_copy(migrated[0], tmp_path)


@pytest.fixture
def conn(db_path):
    connection = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    yield connection
    connection.close()


def row(conn, record_id: int) -> dict | None:
    cursor = conn.execute("SELECT * FROM memory_record WHERE id = ?", (record_id,))
    found = cursor.fetchone()
    return None if found is None else dict(zip([c[0] for c in cursor.description], found))


def refused(conn, sql: str, params=()) -> str:
    with pytest.raises(sqlite3.IntegrityError) as caught:
        conn.execute(sql, params)
    return str(caught.value)


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def test_triggers_survive_every_migration(conn):
    names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"memory_record_guard_delete", "memory_record_guard_update"} <= names


# --- DELETE and the stored datetime format ------------------------------------------------------

@pytest.mark.parametrize("lock", sorted(LOCK_PREFIX))
def test_raw_delete_of_locked_record_is_refused(conn, ids, lock):
    record_id = ids["records"][lock]
    message = refused(conn, "DELETE FROM memory_record WHERE id = ?", (record_id,))
    assert message.startswith(LOCK_PREFIX[lock]) and "DELETE refused" in message
    assert row(conn, record_id) is not None


@pytest.mark.parametrize("name", ["none", "expired"])
def test_raw_delete_of_unlocked_record_is_allowed(conn, ids, name):
    conn.execute("DELETE FROM memory_record WHERE id = ?", (ids["records"][name],))
    assert row(conn, ids["records"][name]) is None


def test_set_based_delete_touching_one_locked_row_deletes_nothing(conn, ids):
    r = ids["records"]
    refused(conn, "DELETE FROM memory_record WHERE id IN (?, ?)", (r["none"], r["retention"]))
    refused(conn, "DELETE FROM memory_record")
    assert row(conn, r["none"]) is not None


def test_lock_as_django_stores_it_is_compared_correctly(conn, ids):
    # Django writes naive UTC text, with microseconds only when there are some
    r = ids["records"]
    fractional = row(conn, r["ends_in_an_hour"])["retained_until"]
    whole = row(conn, r["ends_in_an_hour_whole_second"])["retained_until"]
    expired = row(conn, r["expired"])["retained_until"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.123456", fractional)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", whole)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.123456", expired)
    # a lock an hour from now holds, one two seconds ago does not
    for name in ("ends_in_an_hour", "ends_in_an_hour_whole_second"):
        assert refused(conn, "DELETE FROM memory_record WHERE id = ?", (r[name],)).startswith("retention_lock:")
    conn.execute("DELETE FROM memory_record WHERE id = ?", (r["expired"],))


@pytest.mark.parametrize("retained_until, locked", [
    # Django's format, a second either side of now
    (lambda now: str(now + timedelta(seconds=1)), True),
    (lambda now: str((now - timedelta(seconds=1)).replace(microsecond=0)), False),
    # ISO 8601 written by hand: a 'T' sorts after ' ', so a text comparison would call this one locked
    (lambda now: (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S"), False),
    (lambda now: (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"), True),
    # an offset: an hour ahead on a clock two hours ahead of UTC is an hour ago
    (lambda now: (now + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S+02:00"), False),
    (lambda now: (now + timedelta(hours=3)).strftime("%Y-%m-%d %H:%M:%S+02:00"), True),
    # something unreadable is treated as locked
    (lambda now: "not a date", True),
    (lambda now: "", True),
])
def test_lock_end_in_any_text_form_is_compared_as_a_time(conn, ids, retained_until, locked):
    record_id = ids["records"]["none"]
    conn.execute("UPDATE memory_record SET retained_until = ? WHERE id = ?", (retained_until(utc_now()), record_id))
    if locked:
        assert refused(conn, "DELETE FROM memory_record WHERE id = ?", (record_id,)).startswith("retention_lock:")
    else:
        conn.execute("DELETE FROM memory_record WHERE id = ?", (record_id,))
        assert row(conn, record_id) is None


# --- UPDATE -------------------------------------------------------------------------------------

@pytest.mark.parametrize("lock", ["retention", "hold"])
@pytest.mark.parametrize("column", sorted(PROTECTED_UPDATES))
def test_update_of_protected_column_of_locked_record_is_refused(conn, ids, column, lock):
    record_id = ids["records"][lock]
    before = row(conn, record_id)
    params = dict(other_tenant=ids["other_tenant"], other_scope=ids["other_scope"], other_class=ids["other_class"],
                  id=record_id)
    message = refused(conn, f"UPDATE memory_record SET {PROTECTED_UPDATES[column]} WHERE id = :id", params)
    assert message.startswith(LOCK_PREFIX[lock])
    assert row(conn, record_id) == before


@pytest.mark.parametrize("column", sorted(PROTECTED_UPDATES))
def test_update_of_protected_column_of_unlocked_record_is_allowed(conn, ids, column):
    params = dict(other_tenant=ids["other_tenant"], other_scope=ids["other_scope"], other_class=ids["other_class"],
                  id=ids["records"]["expired"])
    conn.execute(f"UPDATE memory_record SET {PROTECTED_UPDATES[column]} WHERE id = :id", params)


@pytest.mark.parametrize("lock", ["content_retention", "hold"])
def test_redact_of_record_whose_lock_protects_content_is_refused(conn, ids, lock):
    record_id = ids["records"][lock]
    message = refused(conn, "UPDATE memory_record SET content = '', redacted_at = '2030-01-01 00:00:00' WHERE id = ?",
                      (record_id,))
    assert message.startswith(LOCK_PREFIX[lock]) and "content" in message
    assert row(conn, record_id)["content"] == "the original content"


def test_redact_under_existence_only_lock_is_allowed_and_cannot_be_undone(conn, ids):
    record_id = ids["records"]["retention"]
    conn.execute("UPDATE memory_record SET content = '', redacted_at = datetime('now'), forgotten_at = datetime('now')"
                 " WHERE id = ?", (record_id,))
    assert row(conn, record_id)["content"] == ""
    for column in ("redacted_at", "forgotten_at"):
        assert refused(conn, f"UPDATE memory_record SET {column} = NULL WHERE id = ?",
                       (record_id,)).startswith("retention_lock:")


@pytest.mark.parametrize("update", ["content = 'TAMPERED'", "content = ''", "content = 'x', redacted_at = datetime('now')"])
def test_content_of_existence_locked_record_changes_only_by_a_redaction(conn, ids, update):
    record_id = ids["records"]["retention"]
    message = refused(conn, f"UPDATE memory_record SET {update} WHERE id = ?", (record_id,))
    assert message.startswith("retention_lock:") and "only a redaction" in message
    assert row(conn, record_id)["content"] == "the original content"


def test_clearing_redacted_at_is_refused_even_when_unlocked(conn, ids):
    record_id = ids["records"]["none"]
    conn.execute("UPDATE memory_record SET content = '', redacted_at = datetime('now') WHERE id = ?", (record_id,))
    message = refused(conn, "UPDATE memory_record SET redacted_at = NULL, content = 'back' WHERE id = ?", (record_id,))
    assert message.startswith("redaction_final:")


@pytest.mark.parametrize("lock", sorted(LOCK_PREFIX))
def test_soft_forget_and_tiering_of_locked_record_are_allowed(conn, ids, lock):
    record_id = ids["records"][lock]
    conn.execute("UPDATE memory_record SET forgotten_at = datetime('now'), erasure_pending = 1, tier = 'cold'"
                 " WHERE id = ?", (record_id,))
    assert row(conn, record_id)["tier"] == "cold"


# --- shortening the lock ------------------------------------------------------------------------

SHORTENINGS = {
    "retained_until lowered": ("retention", "retained_until = datetime('now', '+1 day')"),
    "retained_until to past": ("retention", "retained_until = datetime('now', '-1 day')"),
    "retained_until cleared": ("retention", "retained_until = NULL"),
    "retained_until unreadable": ("retention", "retained_until = 'soon'"),
    "held cleared": ("hold", "held = 0"),
    "content protection cleared": ("content_retention", "lock_protects_content = 0"),
}


@pytest.mark.parametrize("case", sorted(SHORTENINGS))
def test_shortening_the_lock_without_grant_is_refused(conn, ids, case):
    lock, assignment = SHORTENINGS[case]
    record_id = ids["records"][lock]
    before = row(conn, record_id)
    message = refused(conn, f"UPDATE memory_record SET {assignment} WHERE id = ?", (record_id,))
    assert message.startswith(LOCK_PREFIX[lock]) and "shortening the lock" in message
    assert row(conn, record_id) == before


@pytest.mark.parametrize("case", sorted(SHORTENINGS))
def test_shortening_the_lock_with_grant_in_same_transaction_is_allowed(conn, ids, case):
    lock, assignment = SHORTENINGS[case]
    record_id = ids["records"][lock]
    before = row(conn, record_id)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (datetime('now'))")
    conn.execute(f"UPDATE memory_record SET {assignment} WHERE id = ?", (record_id,))
    conn.execute("DELETE FROM retention_lockrecomputegrant")
    conn.execute("COMMIT")
    assert row(conn, record_id) != before


def test_extending_the_lock_is_always_allowed(conn, ids):
    r = ids["records"]
    conn.execute("UPDATE memory_record SET retained_until = '2999-01-01 00:00:00' WHERE id = ?", (r["retention"],))
    conn.execute("UPDATE memory_record SET held = 1, lock_protects_content = 1 WHERE id = ?", (r["retention"],))
    conn.execute("UPDATE memory_record SET retained_until = '2999-01-01 00:00:00' WHERE id = ?", (r["none"],))


def test_another_connections_grant_is_invisible(conn, db_path, ids):
    record_id = ids["records"]["hold"]
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (datetime('now'))")
        # the other connection does not see the uncommitted grant, and cannot write while it is held
        assert other.execute("SELECT count(*) FROM retention_lockrecomputegrant").fetchone() == (0,)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("UPDATE memory_record SET held = 0 WHERE id = ?", (record_id,))
        conn.execute("DELETE FROM retention_lockrecomputegrant")
        conn.execute("COMMIT")
        # and once the grant's transaction is over, the lock holds for everyone
        assert refused(other, "UPDATE memory_record SET held = 0 WHERE id = ?", (record_id,)).startswith("legal_hold:")
    finally:
        other.close()


# --- forget events are permanent (migration 0007) -------------------------------------------------

def test_forget_events_cannot_be_deleted_or_rewritten_on_sqlite(conn, ids):
    conn.execute("INSERT INTO memory_forgetevent (tenant_id, public_id, actor, path, target, mode, reason, status, "
                 "outcomes, artifacts, created_at) VALUES (:tenant, 'f00d', 'test', 'api', '{}', 'soft', '', "
                 "'forgotten', '{}', '{}', '2026-01-01 00:00:00')", {"tenant": ids["other_tenant"]})
    (event_id,) = conn.execute("SELECT max(id) FROM memory_forgetevent").fetchone()
    assert "forget_event_permanent" in refused(conn, "DELETE FROM memory_forgetevent WHERE id = ?", (event_id,))
    assert "forget_event_permanent" in refused(conn, "UPDATE memory_forgetevent SET status = 'refused' WHERE id = ?",
                                               (event_id,))
    conn.execute("UPDATE memory_forgetevent SET confirmed_at = '2026-01-02 00:00:00' WHERE id = ?", (event_id,))
    assert "forget_event_permanent" in refused(conn, "UPDATE memory_forgetevent SET confirmed_at = NULL WHERE id = ?",
                                               (event_id,))


def test_a_redaction_under_an_existence_only_lock_empties_the_salt_with_the_content(conn, ids):
    record_id = ids["records"]["retention"]
    conn.execute("UPDATE memory_record SET content = '', salt = '', redacted_at = datetime('now'), "
                 "forgotten_at = datetime('now') WHERE id = ?", (record_id,))
    stored = row(conn, record_id)
    assert (stored["content"], stored["salt"], stored["commitment"]) == ("", "", "a" * 64)


@pytest.mark.parametrize("lock", ["retention", "hold"])
def test_the_salt_of_a_locked_record_is_never_emptied_while_its_content_stays(conn, ids, lock):
    record_id = ids["records"][lock]
    message = refused(conn, "UPDATE memory_record SET salt = '' WHERE id = ?", (record_id,))
    assert message.startswith(LOCK_PREFIX[lock]) and "salt" in message
    assert row(conn, record_id)["salt"] == "b" * 32
