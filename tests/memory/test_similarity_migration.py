"""Memory migration 0016 on a store that has embeddings already: the HNSW index is built CONCURRENTLY, so
artifacts are written while it builds (only the column's table rewrite locks them out), the store's vectors are
in the finished index, and a build cut short (an invalid index left behind) is built again when the migration
runs again. PostgreSQL with pgvector only (SQLite has no index: README)."""
from __future__ import annotations

import importlib
import numpy as np
import psycopg
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory import selectors
from memory.models import DerivedArtifact
from tests.conftest import other_connection
from tests.memory.concurrent_build import build_behind, build_cancel
from tests.factories import record
from tests.memory.test_similarity_index import graph_nearest, sql

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = importlib.import_module("memory.migrations.0016_similarity_hnsw_index")
BEFORE = [("memory", "0015_subject_ref_search_index")]


@pytest.fixture(autouse=True)
def hnsw_only():
    if connection.vendor != "postgresql" or not selectors._hnsw_index():
        pytest.skip("the HNSW index is pgvector's, on PostgreSQL")


def index_state() -> bool | None:
    return MIGRATION.index_valid(connection)


def artifact_insert(conn: psycopg.Connection, like: DerivedArtifact, vector: np.ndarray) -> int:
    """An embedding written by raw SQL on its own connection (as a worker writes one), beside `like`."""
    return conn.execute(
        "INSERT INTO memory_derivedartifact (tenant_id, scope_id, kind, content, vector, holder, created_at) "
        "VALUES (%s, %s, 'embedding', '', %s, '', now()) RETURNING id",
        [like.tenant_id, like.scope_id, np.asarray(vector, dtype="<f4").tobytes()]).fetchone()[0]


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(256).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_an_existing_stores_vectors_are_in_the_index_the_migration_builds(tenant, chat, leaves, embedder_as):
    # HashingEmbedder: each of these texts gets a vector of its own. WordLlama averages a text's tokens, digits
    # one by one, so "note 12: ... 12 ..." and "note 21: ... 21 ..." get the same vector, and either is the other's
    # nearest.
    embedder_as("memory.embedding.HashingEmbedder")
    written = [record(tenant, chat, content=f"note {i}: harbour crane {i} invoice") for i in range(30)]
    vectors = {a.pk: bytes(a.vector) for a in DerivedArtifact.objects.filter(kind="embedding")}
    assert len(vectors) == len(written)

    MigrationExecutor(connection).migrate(BEFORE)
    assert index_state() is None and not sql("SELECT 1 FROM pg_attribute WHERE attrelid = "
                                             "'memory_derivedartifact'::regclass AND attname = 'embedding'")
    MigrationExecutor(connection).migrate(leaves)

    assert index_state() is True
    for pk, vector in vectors.items():
        assert graph_nearest(vector)[0] == pk


def test_artifacts_are_written_while_the_index_builds(tenant, chat, leaves):
    like = DerivedArtifact.objects.get(lineage__source_id=record(tenant, chat, content="crane invoice").pk)
    sql(f"DROP INDEX {MIGRATION.INDEX}")
    with other_connection() as earlier, other_connection() as later:
        earlier.execute("SET lock_timeout = '10s'")
        before = artifact_insert(earlier, like, unit(1))  # its transaction stays open: the build waits for it
        thread, errors = build_behind(earlier, MIGRATION.index_build)
        try:
            later.execute("SET lock_timeout = '3s'")  # a plain CREATE INDEX would hold this write until it ends
            during = artifact_insert(later, like, unit(2))
            later.commit()
        finally:
            earlier.commit()
            thread.join(timeout=120)
    assert not thread.is_alive() and not errors

    assert index_state() is True
    assert graph_nearest(unit(1).tobytes())[0] == before
    assert graph_nearest(unit(2).tobytes())[0] == during


def test_a_build_cut_short_is_built_again_when_the_migration_runs_again(tenant, chat, leaves):
    like = DerivedArtifact.objects.get(lineage__source_id=record(tenant, chat, content="crane invoice").pk)
    MigrationExecutor(connection).migrate(BEFORE)
    for statement in MIGRATION.PG_COLUMN:  # the migration's first step went through...
        sql(statement)
    with other_connection() as writer:
        artifact_insert(writer, like, unit(3))
        thread, errors = build_behind(writer, MIGRATION.index_build)
        build_cancel()
        thread.join(timeout=30)
        writer.commit()
    assert errors and isinstance(errors[0].__cause__, psycopg.errors.QueryCanceled)  # ...and its build did not
    assert index_state() is False

    with pytest.warns(RuntimeWarning, match="memory 0018"):  # the random vector is no embedder's (memory 0018)
        MigrationExecutor(connection).migrate(leaves)

    assert index_state() is True
    assert graph_nearest(bytes(like.vector))[0] == like.pk
    assert sql("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [MIGRATION.INDEX]) == [(1,)]
