"""Memory migration 0014 on a store that has records already: the GIN index is built CONCURRENTLY, so records
are written while it builds (only the column's table rewrite locks them out), the store's records are in the
finished index, and a build cut short (an invalid index left behind) is built again when the migration runs
again. PostgreSQL (SQLite's FTS5 table is filled in the migration's one transaction: test_keyword_index_sqlite)."""
from __future__ import annotations

import importlib

import psycopg
import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from memory.selectors import records_search
from tests.conftest import other_connection
from tests.factories import record
from tests.memory.concurrent_build import build_behind, build_cancel
from tests.memory.test_keyword_index import sql

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = importlib.import_module("memory.migrations.0014_keyword_search_index")
BEFORE = [("memory", "0012_tsprivacy_salt_with_content_fleet_ack")]


@pytest.fixture(autouse=True)
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("the tsvector index is PostgreSQL's")


def indexed(word: str) -> set[int]:
    """The readable records that hold a word starting with `word`, found through the GIN index itself."""
    statement = ("SELECT id FROM memory_record WHERE content_search @@ to_tsquery('simple', %s) "
                 "AND forgotten_at IS NULL AND redacted_at IS NULL")
    with transaction.atomic():
        sql("SET LOCAL enable_seqscan = off")
        plan = "\n".join(row[0] for row in sql("EXPLAIN " + statement, [f"{word}:*"]))
        assert MIGRATION.INDEX in plan, plan
        return {pk for (pk,) in sql(statement, [f"{word}:*"])}


def record_insert(conn: psycopg.Connection, like, content: str) -> int:
    """A record written by raw SQL on its own connection (as another process of the service writes one), beside
    `like`."""
    return conn.execute(
        "INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt, "
        "tier, created_at, erasure_pending) SELECT tenant_id, scope_id, subject_id, content_class_id, %s, "
        "commitment, salt, tier, now(), false FROM memory_record WHERE id = %s RETURNING id",
        [content, like.pk]).fetchone()[0]


def test_an_existing_stores_records_are_in_the_index_the_migration_builds(tenant, chat, leaves):
    written = {record(tenant, chat, content=f"note {i}: harbour crane{i} invoice").pk for i in range(30)}
    hidden = record(tenant, chat, content="harbour crane invoice, hidden")
    hidden.forgotten_at = hidden.created_at
    hidden.save(update_fields=["forgotten_at"])

    MigrationExecutor(connection).migrate(BEFORE)
    assert MIGRATION.index_valid(connection) is None and not sql(
        "SELECT 1 FROM pg_attribute WHERE attrelid = 'memory_record'::regclass AND attname = 'content_search'")
    MigrationExecutor(connection).migrate(leaves)

    assert MIGRATION.index_valid(connection) is True
    assert indexed("harbour") == written
    assert {r.pk for r in records_search(tenant=tenant, q="crane7")} == {min(written) + 7}


def test_records_are_written_while_the_index_builds(tenant, chat, leaves):
    like = record(tenant, chat, content="harbour crane invoice")
    sql(f"DROP INDEX {MIGRATION.INDEX}")
    with other_connection() as earlier, other_connection() as later:
        earlier.execute("SET lock_timeout = '10s'")
        before = record_insert(earlier, like, "tangerine before")  # left open: the build waits for it
        thread, errors = build_behind(earlier, MIGRATION.index_build)
        try:
            later.execute("SET lock_timeout = '3s'")  # a plain CREATE INDEX would hold this write until it ends
            during = record_insert(later, like, "tangerine during")
            later.commit()
        finally:
            earlier.commit()
            thread.join(timeout=120)
    assert not thread.is_alive() and not errors

    assert MIGRATION.index_valid(connection) is True
    assert indexed("tangerine") == {before, during}


def test_a_build_cut_short_is_built_again_when_the_migration_runs_again(tenant, chat, leaves):
    like = record(tenant, chat, content="harbour crane invoice")
    MigrationExecutor(connection).migrate(BEFORE)
    sql(MIGRATION.PG_COLUMN)  # the migration's first step went through...
    with other_connection() as writer:
        record_insert(writer, like, "tangerine while cut short")
        thread, errors = build_behind(writer, MIGRATION.index_build)
        build_cancel()
        thread.join(timeout=30)
        writer.commit()
    assert errors and isinstance(errors[0].__cause__, psycopg.errors.QueryCanceled)  # ...and its build did not
    assert MIGRATION.index_valid(connection) is False

    MigrationExecutor(connection).migrate(leaves)

    assert MIGRATION.index_valid(connection) is True
    assert len(indexed("tangerine")) == 1 and indexed("harbour") == {like.pk}
    assert sql("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [MIGRATION.INDEX]) == [(1,)]
