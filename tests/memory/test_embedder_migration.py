"""Memory migration 0018 on a store that has vectors already: it records which embedder made them by making some
again, on PostgreSQL without writing a row (the HNSW index would be written anew); it warns when that is not the
configured embedder (a store from before WordLlamaEmbedder became the default), and records vectors that no
embedder it knows makes as unknown, with a warning, until `manage.py reembed`. Then the same on SQLite."""
from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.models import DerivedArtifact
from memory.services import artifact_write
from memory.services.reembed import reembed
from tests.memory.test_embedding import SEMANTIC
from tests.memory.test_reembed import HASHING, NOTES, found, written
from tests.sqlite_service import manage, manage_script, sqlite_env

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("memory", "0017_record_duplicate_indexes_dropped")]


def back_and_forth(leaves) -> None:
    MigrationExecutor(connection).migrate(BEFORE)
    MigrationExecutor(connection).migrate(leaves)


def row_versions() -> list[tuple]:
    """Each artifact row's version (PostgreSQL's xmin and ctid): an UPDATE would change both."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, xmin::text, ctid::text FROM memory_derivedartifact ORDER BY id")
        return cursor.fetchall()


def makers() -> set[str]:
    return set(DerivedArtifact.objects.filter(kind="embedding").values_list("embedder", flat=True))


def test_the_former_default_embedders_vectors_are_recorded_as_its_without_a_row_written(tenant, chat, leaves,
                                                                                         embedder_as):
    embedder_as(HASHING)
    notes = written(tenant, chat)
    artifact_write(tenant=tenant, kind="embedding", source_ids=[notes[0].pk, notes[1].pk])
    artifact_write(tenant=tenant, kind="summary", source_ids=[notes[0].pk], content="a cat")
    versions = row_versions() if connection.vendor == "postgresql" else None

    back_and_forth(leaves)

    assert makers() == {"hashing-256-v1"}
    if versions is not None:
        assert row_versions() == versions
    assert found(tenant, NOTES[1], limit=1) == [notes[1].pk]
    # A row written afterwards by raw SQL, naming no embedder, is of none (the column's default is '').
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO memory_derivedartifact (tenant_id, scope_id, kind, content, holder, created_at) "
                       "VALUES (%s, %s, 'summary', 'raw', '', now()) RETURNING embedder",
                       [tenant.pk, notes[0].scope_id])
        assert cursor.fetchone() == ("",)


def test_a_store_of_the_former_default_under_the_new_one_is_told_to_reembed(tenant, chat, leaves, embedder_as):
    embedder_as(HASHING)
    notes = written(tenant, chat)
    embedder_as(SEMANTIC)  # the upgrade: the default is now WordLlamaEmbedder

    MigrationExecutor(connection).migrate(BEFORE)
    with pytest.warns(RuntimeWarning, match=r"made by memory\.embedding\.HashingEmbedder, not by LEDGER_EMBEDDER"):
        MigrationExecutor(connection).migrate(leaves)

    assert makers() == {"hashing-256-v1"}
    assert found(tenant, NOTES[0]) == []
    assert reembed().made == len(notes)
    assert found(tenant, "a kitten dozing on a rug", limit=1) == [notes[0].pk]


def test_the_configured_embedders_vectors_are_recorded_as_its(tenant, chat, leaves, embedder_as):
    embedder_as(SEMANTIC)
    notes = written(tenant, chat)

    back_and_forth(leaves)

    assert makers() == {"wordllama-l2_supercat-256"}
    assert found(tenant, "a kitten dozing on a rug", limit=1) == [notes[0].pk]


def test_vectors_no_known_embedder_makes_are_unknown_and_skipped_until_reembedded(tenant, chat, leaves,
                                                                                   embedder_as):
    embedder_as(SEMANTIC)
    notes = written(tenant, chat)
    embedder_as(HASHING)  # the deployment changed its embedder: its vectors are the other's

    MigrationExecutor(connection).migrate(BEFORE)
    with pytest.warns(RuntimeWarning, match="manage.py reembed"):
        MigrationExecutor(connection).migrate(leaves)

    assert makers() == {""}
    assert found(tenant, NOTES[0]) == []
    assert reembed().made == len(notes)
    assert found(tenant, NOTES[0], limit=1) == [notes[0].pk]


WRITE = r"""
import json
from memory.models import DerivedArtifact, Tenant
from memory.services import record_write
from retention.models import ContentClass
tenant = Tenant.objects.create(name="t")
ContentClass.objects.create(tenant=tenant, name="chat")
ids = [record_write(tenant=tenant, scope_path="user:1", content_class_name="chat", content=note).pk
       for note in %r]
print(json.dumps(ids))
"""

READ = r"""
import json
from memory.models import DerivedArtifact, Tenant
from memory.selectors import records_similar
tenant = Tenant.objects.get(name="t")
print(json.dumps({"makers": sorted(set(DerivedArtifact.objects.values_list("embedder", flat=True))),
                  "found": [h.record.pk for h in records_similar(tenant=tenant, q="a kitten dozing on a rug",
                                                                 limit=1)]}))
"""


def test_on_sqlite_the_migration_records_the_maker_and_reembed_makes_them_again(sqlite_migrated):
    env = sqlite_env(sqlite_migrated, LEDGER_EMBEDDER=HASHING)
    ids = manage_script(WRITE % (NOTES,), env=env)
    manage("migrate", "memory", "0017", "--skip-checks", env=env)
    manage("migrate", "--skip-checks", env=env)
    assert manage_script(READ, env=env)["makers"] == ["hashing-256-v1"]

    semantic = sqlite_env(sqlite_migrated, LEDGER_EMBEDDER=SEMANTIC)
    assert manage_script(READ, env=semantic) == {"makers": ["hashing-256-v1"], "found": []}
    assert json.loads(manage("reembed", env=semantic)) == {"embedder": "wordllama-l2_supercat-256", "made": 4,
                                                           "skipped": 0, "left": 0, "index_rebuilt": False}
    assert manage_script(READ, env=semantic) == {"makers": ["wordllama-l2_supercat-256"], "found": [ids[0]]}
