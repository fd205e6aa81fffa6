"""The similarity search's HNSW index (memory 0016, pgvector) on PostgreSQL: the planner uses it, filtered searches
still return k, and forgetting reaches the index itself, below the selector's final step (an exact-match query
vector, straight at the graph, no longer finds a forgotten record's vector). SQLite scans with NumPy (README)."""
import threading

import numpy as np
import pytest
from django.db import connection, transaction

from memory import selectors
from memory.embedding import embedder, embedder_identity, vector_to_bytes
from memory.models import DerivedArtifact, Lineage
from memory.selectors import records_similar, records_similar_each
from memory.services import ForgetTarget, erasure_confirm, records_forget
from tests.factories import ContentClassFactory, record

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def hnsw_only():
    if connection.vendor != "postgresql" or not selectors._hnsw_index():
        pytest.skip("the HNSW index is pgvector's, on PostgreSQL")


def sql(statement: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def embedding_of(record_id: int) -> DerivedArtifact:
    return DerivedArtifact.objects.get(lineage__source_id=record_id, kind="embedding")


def graph_nearest(vector_bytes: bytes, limit: int = 10) -> list[int]:
    """The graph's own answer, below every filter of the selector: the artifact ids nearest to this vector, by an
    index scan (sequential scans off, so that an empty answer cannot come from a scan of the table)."""
    q = selectors._vector_text(np.frombuffer(vector_bytes, dtype="<f4"))
    with transaction.atomic():
        sql("SET LOCAL enable_seqscan = off")
        sql("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = "\n".join(r[0] for r in sql("EXPLAIN SELECT id FROM memory_derivedartifact "
                                           "ORDER BY embedding <=> %s::vector LIMIT %s", [q, limit]))
        assert "memory_artifact_embedding_hnsw_idx" in plan, plan
        return [pk for (pk,) in sql("SELECT id FROM memory_derivedartifact ORDER BY embedding <=> %s::vector "
                                    "LIMIT %s", [q, limit])]


def test_the_index_column_is_the_artifacts_vector_exactly(tenant, chat):
    written = record(tenant, chat, content="the launch code is tangerine falcon", subject="a")
    artifact = embedding_of(written.pk)
    stored = sql("SELECT embedding::real[] FROM memory_derivedartifact WHERE id = %s", [artifact.pk])[0][0]
    assert np.array(stored, dtype="<f4").tobytes() == bytes(artifact.vector)


def test_similarity_query_uses_the_hnsw_index(tenant, chat):
    """On a small table (the bench measures it: bench/bench_search.py)."""
    target = record(tenant, chat, content="the launch code is zebrafish", subject="z")
    source = embedding_of(target.pk)
    rng = np.random.default_rng(7)
    noise = rng.standard_normal((2000, embedder().dim)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    DerivedArtifact.objects.bulk_create([
        DerivedArtifact(tenant=tenant, scope=source.scope, kind="embedding", vector=vector_to_bytes(v),
                        embedder=embedder_identity(),
                        created_at=source.created_at) for v in noise])
    sql("ANALYZE memory_derivedartifact")
    q = selectors._vector_text(embedder().embed(["zebrafish launch code"])[0])

    with transaction.atomic():
        sql(selectors.hnsw_settings_sql())
        # Off on a table this small, where reading the tenant's 2,000 rows and sorting them costs less (and is
        # exact: the plan PostgreSQL keeps for a small tenant); at 200,000 embeddings the HNSW scan is the plan by
        # itself (bench/bench_search.py prints it).
        sql("SET LOCAL enable_seqscan = off")
        sql("SET LOCAL enable_sort = off")
        plan = "\n".join(r[0] for r in sql("EXPLAIN " + selectors._HNSW_SQL, {
            "q": q, "tenant": tenant.pk, "embedder": embedder_identity(), "limit": 20}))
    assert "Index Scan using memory_artifact_embedding_hnsw_idx" in plan, plan
    assert [h.record.pk for h in records_similar(tenant=tenant, q="zebrafish launch code", limit=3)] == [target.pk]


@pytest.mark.parametrize("mode", ["soft", "redact", "hard"])
def test_a_forgotten_records_vector_leaves_the_index_itself(tenant, chat, mode):
    gone = record(tenant, chat, content="the launch code is tangerine falcon", subject="a")
    kept = record(tenant, chat, content="tangerine falcon notes", subject="b")
    gone_vector, gone_artifact = bytes(embedding_of(gone.pk).vector), embedding_of(gone.pk).pk
    assert graph_nearest(gone_vector)[0] == gone_artifact

    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(gone.pk,)), mode=mode, actor="test")

    # The exact-match query vector, straight at the graph: the forgotten vector is not there.
    assert gone_artifact not in graph_nearest(gone_vector)
    assert graph_nearest(gone_vector)[0] == embedding_of(kept.pk).pk
    assert sql("SELECT count(*) FROM memory_derivedartifact WHERE id = %s AND embedding IS NOT NULL",
               [gone_artifact]) == [(0,)]
    assert selectors.similarity_index_entries(record_ids=[gone.pk]) == []
    assert [h.record.pk for h in records_similar(tenant=tenant, q="the launch code is tangerine falcon")] == [kept.pk]
    assert records_similar_each(tenant=tenant, queries={gone.pk: "tangerine falcon", kept.pk: "tangerine"}) == {
        kept.pk}


def test_a_hidden_artifact_by_any_update_leaves_the_index_and_comes_back_when_restored(tenant, chat):
    """Not only the forget service: any UPDATE that forgets an embedding takes it out of the graph with it."""
    hidden = record(tenant, chat, content="zebrafish in the pond", subject="a")
    artifact = embedding_of(hidden.pk)
    DerivedArtifact.objects.filter(pk=artifact.pk).update(forgotten_at=artifact.created_at)
    assert artifact.pk not in graph_nearest(bytes(artifact.vector))

    DerivedArtifact.objects.filter(pk=artifact.pk).update(forgotten_at=None)
    assert graph_nearest(bytes(artifact.vector))[0] == artifact.pk


def test_the_index_column_takes_no_value(tenant, chat):
    written = record(tenant, chat, content="zebrafish", subject="a")
    with pytest.raises(Exception, match="generated|DEFAULT"), transaction.atomic():
        sql("UPDATE memory_derivedartifact SET embedding = array_fill(0.5, ARRAY[256])::vector WHERE id = %s",
            [embedding_of(written.pk).pk])


@pytest.mark.parametrize("made_by", ["hashing-256-v1", "another-embedder"])
def test_a_vector_still_in_the_index_is_a_gap_confirm_erasure_names(tenant, chat, made_by):
    """A record hidden behind the service's back (its embedding left live): the index probe finds the vector,
    whichever embedder made it (the search passes over another embedder's; the probe of the index does not)."""
    leaked = record(tenant, chat, content="my address is 12 Tangerine Lane", subject="u42")
    event = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(leaked.pk,)), mode="soft", actor="test")
    artifact = embedding_of(leaked.pk)
    DerivedArtifact.objects.filter(pk=artifact.pk).update(forgotten_at=None, embedder=made_by)  # a bypass

    result = erasure_confirm(tenant=tenant, handle={"sequence": event.event.pk})

    assert {"record_id": leaked.pk, "artifact_id": artifact.pk, "path": "similarity_index",
            "gap": "in_index"} in result.gaps


def test_a_filtered_search_still_returns_k_when_the_nearest_belong_to_another_tenant(tenant, chat, other_tenant):
    """2,000 of another tenant's vectors are nearer to the query than any of this tenant's: more than ef_search
    (the default embedder's, 800) keeps, so without pgvector's iterative scan the tenant's
    filter would leave nothing."""
    mine = [record(tenant, chat, content=f"falcon notes {word}", subject=f"s{i}")
            for i, word in enumerate("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split())]
    theirs = record(other_tenant, ContentClassFactory(tenant=other_tenant, name="chat"), content="falcon",
                    subject="x")
    source = embedding_of(theirs.pk)
    query = embedder().embed(["falcon"])[0]
    rng = np.random.default_rng(11)
    near = query + 0.02 * rng.standard_normal((2000, query.size)).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    created = DerivedArtifact.objects.bulk_create([
        DerivedArtifact(tenant=other_tenant, scope=source.scope, kind="embedding", vector=vector_to_bytes(v),
                        embedder=embedder_identity(),
                        created_at=source.created_at) for v in near])
    Lineage.objects.bulk_create([Lineage(artifact=a, source=theirs) for a in created])
    sql("ANALYZE memory_derivedartifact")

    hits = records_similar(tenant=tenant, q="falcon", limit=10)

    assert len(hits) == 10 and {h.record.pk for h in hits} <= {r.pk for r in mine}
    assert all(h.record.tenant_id == tenant.pk for h in hits)


@pytest.mark.django_db(transaction=True)
def test_a_search_racing_a_forget_never_returns_the_record_after_the_forget_commits(tenant, chat):
    """Real threads, each with its own connection: once the forget has committed, no search finds the record."""
    gone = record(tenant, chat, content="the launch code is tangerine falcon", subject="a")
    record(tenant, chat, content="tangerine falcon notes", subject="b")
    committed = threading.Event()
    stop = threading.Event()
    late: list[int] = []
    errors: list[BaseException] = []

    def search() -> None:
        try:
            while not stop.is_set():
                after = committed.is_set()
                found = [h.record.pk for h in records_similar(tenant=tenant, q="the launch code is tangerine falcon")]
                if after and gone.pk in found:
                    late.append(gone.pk)
        except BaseException as error:  # noqa: BLE001 (reported by the main thread)
            errors.append(error)
        finally:
            connection.close()

    searchers = [threading.Thread(target=search) for _ in range(2)]
    for t in searchers:
        t.start()
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(gone.pk,)), mode="hard", actor="test")
    committed.set()
    threading.Event().wait(0.5)
    stop.set()
    for t in searchers:
        t.join(10)

    assert not errors and not late


def test_the_search_keeps_as_many_candidates_as_the_setting_says(tenant, chat, settings):
    """LEDGER_HNSW_EF_SEARCH (README, "Settings") is the `hnsw.ef_search` of each search, in its transaction."""
    from django.db import connection as default
    from django.test.utils import CaptureQueriesContext

    target = record(tenant, chat, content="zebrafish launch code", subject="a")
    settings.LEDGER_HNSW_EF_SEARCH = 37
    with CaptureQueriesContext(default) as queries:
        hits = records_similar(tenant=tenant, q="zebrafish launch code", limit=3)
    assert [h.record.pk for h in hits] == [target.pk]
    assert any("SET LOCAL hnsw.ef_search = 37;" in q["sql"] for q in queries.captured_queries), queries


@pytest.mark.parametrize(("dotted", "ef_search"), [("memory.embedding.HashingEmbedder", 800),
                                                   ("memory.embedding.WordLlamaEmbedder", 100)])
def test_unset_the_search_keeps_as_many_candidates_as_its_embedder_needs(tenant, chat, settings, embedder_as, dotted,
                                                                         ef_search):
    """Each embedder's vectors need their own ef_search for the same recall (memory.embedding; bench/README.md)."""
    from django.db import connection as default
    from django.test.utils import CaptureQueriesContext

    settings.LEDGER_HNSW_EF_SEARCH = None
    embedder_as(dotted)
    target = record(tenant, chat, content="zebrafish launch code", subject="a")
    with CaptureQueriesContext(default) as queries:
        hits = records_similar(tenant=tenant, q="zebrafish launch code", limit=3)
    assert [h.record.pk for h in hits] == [target.pk]
    assert any(f"SET LOCAL hnsw.ef_search = {ef_search};" in q["sql"] for q in queries.captured_queries), queries
