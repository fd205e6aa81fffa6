"""The embedder's identity on each vector, the similarity search's use of it, and `manage.py reembed`
(memory.services.reembed): after LEDGER_EMBEDDER changes, the store's live vectors are made again by the new
embedder, set-based; forgotten and redacted ones are neither read nor written, a forget that lands during a
batch is not undone, and the search passes over the vectors still to do."""
from __future__ import annotations

import json
import threading
import time
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from memory import checks, selectors
from memory.embedding import embedded_text, embedder, embedder_identity, vector_to_bytes
from memory.models import DerivedArtifact
from memory.selectors import records_similar, records_similar_each, similarity_index_entries
from memory.services import ForgetTarget, artifact_write, records_forget
from memory.services import reembed as reembed_module
from memory.services.reembed import embeddings_stale, reembed
from tests.factories import record
from tests.memory.test_embedding import SEMANTIC
from tests.memory.test_similarity_index import graph_nearest

HASHING = "memory.embedding.HashingEmbedder"
NOTES = ["the cat slept on the mat all afternoon", "the quarterly invoice for the harbour cranes is overdue",
         "my sister moved to Lisbon last spring", "our flight to Oslo leaves at dawn on Tuesday"]


@pytest.fixture(autouse=True)
def made_by_hashing(embedder_as):
    """Each test's store is written by HashingEmbedder, as a store from before WordLlamaEmbedder became the default,
    and most then move to the semantic one."""
    embedder_as(HASHING)


def embedding_of(record_pk: int) -> DerivedArtifact:
    return DerivedArtifact.objects.get(kind="embedding", lineage__source_id=record_pk, content="")


def written(tenant, chat) -> list:
    return [record(tenant, chat, content=note, subject=f"s{i}") for i, note in enumerate(NOTES)]


def found(tenant, q: str, limit: int = 4) -> list[int]:
    return [hit.record.pk for hit in records_similar(tenant=tenant, q=q, limit=limit)]


@pytest.mark.django_db
def test_an_embedding_records_the_embedder_that_made_it_and_other_artifacts_none(tenant, chat):
    note = record(tenant, chat, content=NOTES[0])
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[note.pk], content="a cat")
    assert embedding_of(note.pk).embedder == "hashing-256-v1" == embedder_identity()
    summary.refresh_from_db()
    assert summary.embedder == "" and summary.vector is None


@pytest.mark.django_db
def test_the_search_passes_over_another_embedders_vectors_and_the_index_probe_does_not(tenant, chat):
    notes = written(tenant, chat)
    DerivedArtifact.objects.filter(pk=embedding_of(notes[0].pk).pk).update(embedder="someone-else")

    assert notes[0].pk not in found(tenant, NOTES[0])
    assert notes[1].pk in found(tenant, NOTES[1])
    assert records_similar_each(tenant=tenant, queries={n.pk: NOTES[i] for i, n in enumerate(notes)}) == {
        n.pk for n in notes[1:]}
    assert records_similar(tenant=tenant, q=NOTES[0], limit=1, within_ids=[notes[0].pk]) == []
    # confirm-erasure's probe of the index itself still sees the vector: it is a copy whoever made it.
    if selectors._hnsw_index():
        assert (embedding_of(notes[0].pk).pk, notes[0].pk) in similarity_index_entries(record_ids=[notes[0].pk])


@pytest.mark.django_db
def test_reembed_makes_every_live_vector_again_as_the_write_path_would(tenant, chat, embedder_as):
    notes = written(tenant, chat)
    texts = {embedding_of(n.pk).pk: n.content for n in notes}
    both = artifact_write(tenant=tenant, kind="embedding", source_ids=[notes[3].pk, notes[2].pk])
    own = artifact_write(tenant=tenant, kind="embedding", source_ids=[notes[1].pk], content="cranes and invoices")
    hashed = {a.pk: bytes(a.vector) for a in DerivedArtifact.objects.filter(kind="embedding")}

    embedder_as(SEMANTIC)
    assert found(tenant, "a kitten dozing on a rug") == []  # nothing of the new embedder's yet
    assert embeddings_stale().count() == len(hashed) == 6

    result = reembed(batch_size=4)

    assert (result.embedder, result.made, result.skipped, result.left) == ("wordllama-l2_supercat-256", 6, 0, 0)
    model = embedder()
    texts[both.pk] = embedded_text("", [notes[2].content, notes[3].content])  # the sources in record id order
    texts[own.pk] = "cranes and invoices"
    for artifact in DerivedArtifact.objects.filter(kind="embedding"):
        assert artifact.embedder == result.embedder
        assert bytes(artifact.vector) == vector_to_bytes(model.embed([texts[artifact.pk]])[0]) != hashed[artifact.pk]
    assert found(tenant, "a kitten dozing on a rug", limit=1) == [notes[0].pk]
    assert reembed().made == 0  # nothing left to do: a second run writes nothing


@pytest.mark.django_db
def test_forgotten_and_redacted_embeddings_are_neither_read_nor_written(tenant, chat, embedder_as):
    notes = written(tenant, chat)
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(notes[0].pk,)), mode="soft", actor="test")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(notes[1].pk,)), mode="redact", actor="test")
    before = {a.pk: (a.vector and bytes(a.vector), a.embedder, a.forgotten_at, a.redacted_at)
              for a in DerivedArtifact.objects.filter(lineage__source__in=notes[:2])}
    assert before[embedding_of(notes[1].pk).pk][0] is None  # the redaction emptied it

    embedder_as(SEMANTIC)
    result = reembed()

    assert (result.made, result.left) == (2, 0)
    assert {a.pk: (a.vector and bytes(a.vector), a.embedder, a.forgotten_at, a.redacted_at)
            for a in DerivedArtifact.objects.filter(lineage__source__in=notes[:2])} == before
    assert notes[0].pk not in found(tenant, NOTES[0])


@pytest.mark.django_db(transaction=True)
def test_a_forget_that_lands_while_its_batch_is_embedded_is_not_undone(tenant, chat, embedder_as, as_app_role,
                                                                       monkeypatch):
    """The forget locks the rows and commits while the re-embed's UPDATE waits for them: PostgreSQL re-checks the
    UPDATE's WHERE on the forget's version, and the vector stays cleared. Both as the application role."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks and the application role are PostgreSQL's")
    notes = written(tenant, chat)
    embedder_as(SEMANTIC)
    model, read, outcome = embedder(), threading.Event(), {}

    class Paused:
        dim, identity = model.dim, model.identity

        def embed(self, texts):
            read.set()  # the batch is read: the forget goes now
            return model.embed(texts)

    monkeypatch.setattr(reembed_module, "embedder", Paused)

    def run():
        try:
            outcome["result"] = reembed()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            outcome["error"] = error
        finally:
            connection.close()

    victim = embedding_of(notes[2].pk).pk
    with transaction.atomic():
        thread = threading.Thread(target=run)
        # The forget's transaction holds the row before the re-embed reads: its UPDATE must wait for it.
        records_forget(tenant=tenant, target=ForgetTarget(record_ids=(notes[2].pk,)), mode="redact", actor="test")
        thread.start()
        assert read.wait(30)
        deadline = time.monotonic() + 30
        while not _waiting_for_a_lock():
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.05)
    thread.join(timeout=60)

    assert "error" not in outcome, outcome
    result = outcome["result"]
    assert (result.made, result.skipped, result.left) == (3, 1, 0)
    artifact = DerivedArtifact.objects.get(pk=victim)
    assert artifact.vector is None and artifact.redacted_at is not None and artifact.embedder == "hashing-256-v1"
    assert notes[2].pk not in found(tenant, NOTES[2])


def _waiting_for_a_lock() -> bool:
    """Whether another session of this database waits for a row lock (the re-embed's UPDATE)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction sees the activity of its start
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = "
                       "'Lock' AND query LIKE 'UPDATE%%memory_derivedartifact%%'")
        return cursor.fetchone() is not None


@pytest.mark.django_db
def test_the_database_check_tells_of_vectors_another_embedder_made(tenant, chat, embedder_as):
    written(tenant, chat)
    assert checks.embeddings_check(databases=["default"]) == []
    embedder_as(SEMANTIC)
    [warning] = checks.embeddings_check(databases=["default"])
    assert warning.id == "memory.W002" and warning.msg.startswith("4 live embeddings") and "reembed" in warning.hint
    assert checks.embeddings_check() == []  # only where the database is checked
    reembed()
    assert checks.embeddings_check(databases=["default"]) == []


@pytest.mark.django_db
def test_the_command_counts_with_dry_run_then_makes_them(tenant, chat, embedder_as):
    written(tenant, chat)
    embedder_as(SEMANTIC)
    out = StringIO()
    call_command("reembed", "--dry-run", stdout=out)
    assert json.loads(out.getvalue()) == {"embedder": "wordllama-l2_supercat-256", "to_make": 4}
    assert embeddings_stale().count() == 4  # the dry run changed nothing

    out = StringIO()
    call_command("reembed", "--batch-size", "3", stdout=out)
    assert json.loads(out.getvalue()) == {"embedder": "wordllama-l2_supercat-256", "made": 4, "skipped": 0,
                                          "left": 0, "index_rebuilt": False}


@pytest.mark.parametrize("size", ["0", "5001", "-3"])
def test_the_command_refuses_a_batch_size_out_of_range_and_changes_nothing(size, db):
    with pytest.raises(CommandError, match="batch-size"):
        call_command("reembed", "--batch-size", size)


@pytest.mark.parametrize("size", [0, 5001, True, 2.5, "10"])
def test_the_service_refuses_a_batch_size_out_of_range(size):
    with pytest.raises(ValueError, match="batch_size"):
        reembed(batch_size=size)


def test_embedders_make_the_same_vectors_one_text_at_a_time_as_in_a_batch(embedder_as):
    """What lets a re-embed make a batch's vectors in one call and still write the write path's vectors."""
    for dotted in (HASHING, SEMANTIC):
        embedder_as(dotted)
        model = embedder()
        assert np.array_equal(model.embed(NOTES), np.vstack([model.embed([note]) for note in NOTES]))


@pytest.mark.django_db(transaction=True)
def test_rebuild_index_drops_the_similarity_index_and_builds_it_again_at_the_end(tenant, chat, embedder_as):
    if not selectors._hnsw_index():
        pytest.skip("the HNSW index is pgvector's, on PostgreSQL")
    index = reembed_module.similarity_index()
    notes = written(tenant, chat)
    embedder_as(SEMANTIC)
    seen = []
    result = reembed(rebuild_index=True, on_batch=lambda made, skipped: seen.append(index.index_valid(connection)))

    assert seen == [None]  # no index while the batches were written
    assert (result.made, result.index_rebuilt) == (4, True) and index.index_valid(connection) is True
    mine = embedding_of(notes[0].pk)
    assert graph_nearest(bytes(mine.vector))[0] == mine.pk  # the new vectors are in the graph built again
    assert reembed(rebuild_index=True).index_rebuilt is False  # nothing to do: the index is left as it is

    # A run cut short after the drop: the next run builds the index, even with nothing left to make again.
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {index.INDEX}")
    assert [w.id for w in checks.embeddings_check(databases=["default"])] == ["memory.W003"]
    assert reembed(rebuild_index=True).index_rebuilt is True and index.index_valid(connection) is True
    assert checks.embeddings_check(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
def test_rebuild_index_as_the_application_role_is_refused_before_anything_changes(tenant, chat, embedder_as,
                                                                                   as_app_role):
    if not selectors._hnsw_index():
        pytest.skip("the HNSW index is pgvector's, on PostgreSQL")
    notes = written(tenant, chat)
    before = bytes(embedding_of(notes[0].pk).vector)
    embedder_as(SEMANTIC)

    with pytest.raises(CommandError, match="owns the tables"):
        call_command("reembed", "--rebuild-index")

    assert reembed_module.similarity_index().index_valid(connection) is True
    assert bytes(embedding_of(notes[0].pk).vector) == before and embeddings_stale().count() == 4
    assert reembed().made == 4  # without the index's rebuild, the application role may
