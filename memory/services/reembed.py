"""Making the store's vectors again with the configured embedder (`manage.py reembed`), after LEDGER_EMBEDDER has
changed: vectors of two embedders are not comparable, and the similarity search compares a query only with the
vectors its own embedder made (`DerivedArtifact.embedder`; memory.embedding).

Set-based: per batch, one read of the embeddings (and one of their sources' contents), one `embed()` of all their
texts, one UPDATE. The UPDATE writes only rows that are still live embeddings of another embedder, in its own
WHERE: an artifact forgotten or redacted while its batch was being embedded (the forget commits between the read
and the write) is re-checked by PostgreSQL on its newest version and left as the forget left it, so a re-embed
never writes a vector back; nor does it read or write a forgotten one. A hidden (soft-forgotten) embedding that
is restored later comes back with its old embedder's vector: the next run makes it again.

A run can stop anywhere and run again: it picks up the rows still to do. The search finds each row's new vector
from its batch's commit on; the rows still to do are passed over by the search meanwhile.

On PostgreSQL each new vector goes into the HNSW graph as its row is written (a new row version), which is most of
a re-embed's time: ~15 ms a vector at 50,000 embeddings, ~4 ms at 10,000, against ~0.1 ms for the model's embed()
and ~0.3 ms for the rest of the write without the index (bench/bench_reembed.py). With `rebuild_index`, the index
is dropped first (CONCURRENTLY) and built again at the end (CONCURRENTLY, memory 0016's own build), far faster for
a whole store, while the similarity search answers exactly, without the index (slower, not wrong), until it is
ready; a run cut short leaves the store without the index until the next run with `rebuild_index` (or memory 0016
again) builds it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from django.db import connection, transaction
from django.db.models import QuerySet

from memory import selectors
from memory.embedding import embedded_text, embedder, embedder_identity, vector_to_bytes
from memory.models import ArtifactKind, DerivedArtifact, Lineage

BATCH = 500
MAX_BATCH = 5_000


@dataclass(frozen=True)
class ReembedResult:
    embedder: str  # the identity the vectors were made again with
    made: int      # vectors made again and written
    skipped: int   # forgotten or redacted between their batch's read and its write: not written
    left: int      # live embeddings of another embedder after the run (0 unless rows came meanwhile)
    index_rebuilt: bool = False  # the HNSW index was built at the end (dropped before, or missing)


def _live_embeddings() -> QuerySet:
    return DerivedArtifact.objects.filter(kind=ArtifactKind.EMBEDDING, vector__isnull=False,
                                          forgotten_at__isnull=True, redacted_at__isnull=True)


def embeddings_stale() -> QuerySet:
    """The live embeddings the configured embedder did not make: not found by the similarity search until made
    again."""
    return _live_embeddings().exclude(embedder=embedder_identity())


def _texts(rows: list[tuple[int, str]]) -> list[str]:
    """Each artifact's embedded text (memory.embedding.embedded_text), its sources read in one query."""
    sourced = [pk for pk, content in rows if not content]
    contents: dict[int, list[str]] = {}
    if sourced:
        for artifact_id, content in (Lineage.objects.filter(artifact_id__in=sourced)
                                     .order_by("artifact_id", "source_id")
                                     .values_list("artifact_id", "source__content")):
            contents.setdefault(artifact_id, []).append(content)
    return [embedded_text(content, contents.get(pk, [])) for pk, content in rows]


# One batch's new vectors in one statement, on both databases (UPDATE ... FROM: PostgreSQL; SQLite since 3.33),
# each written only while its row is still what `embeddings_stale()` selects: the WHERE is that queryset's own,
# compiled by Django, which PostgreSQL checks again on the newest version of a row a forget has changed meanwhile.
# Not `bulk_update()`: its CASE WHEN of one branch a row cost more in Python than the UPDATE in the database
# (0.3 s a batch of 500, bench/bench_reembed.py). VALUES names its columns column1, column2 on both.
_WRITE_SQL = """UPDATE {table} SET vector = v.column2, embedder = %s
FROM (VALUES {rows}) AS v
WHERE {table}.id = v.column1 AND {stale}"""


def _vectors_write(identity: str, remade: list[tuple[int, bytes]]) -> int:
    """Each (artifact id, vector) written with `identity` as its embedder, in one transaction; the count written."""
    query = embeddings_stale().query
    stale, stale_params = query.get_compiler(connection=connection).compile(query.where)
    table = connection.ops.quote_name(DerivedArtifact._meta.db_table)
    sql = _WRITE_SQL.format(table=table, rows=", ".join(["(%s, %s)"] * len(remade)), stale=stale)
    params = [identity, *(value for row in remade for value in row), *stale_params]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def similarity_index():
    """Memory 0016, the HNSW index's one definition: its statement and its CONCURRENTLY build."""
    return importlib.import_module("memory.migrations.0016_similarity_hnsw_index")


def _owner() -> bool:
    """Whether this connection's role owns the artifacts' table (only its owner may drop or build its indexes)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class WHERE oid = %s::regclass",
                       [DerivedArtifact._meta.db_table])
        return cursor.fetchone()[0]


def reembed(*, batch_size: int = BATCH, rebuild_index: bool = False,
            on_batch: Callable[[int, int], None] | None = None) -> ReembedResult:
    """Every live embedding of another embedder made again by the configured one, a batch at a time (each in its
    own transaction). `on_batch(made, skipped)` is told after each batch. `rebuild_index` (PostgreSQL with the
    HNSW index; outside any transaction): the index dropped before, built again after (see above)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be a whole number from 1 to {MAX_BATCH}")
    model, identity = embedder(), embedder_identity()
    index = similarity_index() if rebuild_index and selectors._hnsw_index() else None
    if index and not _owner():
        raise PermissionError("rebuild_index drops and builds an index: it needs the role that owns the tables (the "
                              "one `migrate` runs as), not the application role")
    if index and embeddings_stale().exists():
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.INDEX}")
    made = skipped = after = 0
    while True:
        rows = list(embeddings_stale().filter(pk__gt=after).order_by("pk").values_list("pk", "content")[:batch_size])
        if not rows:
            break
        vectors = model.embed(_texts(rows))
        written = _vectors_write(identity, [(pk, vector_to_bytes(vector)) for (pk, _), vector in zip(rows, vectors)])
        made, skipped, after = made + written, skipped + len(rows) - written, rows[-1][0]
        if on_batch:
            on_batch(written, len(rows) - written)
    rebuilt = bool(index) and index.index_valid(connection) is not True
    if rebuilt:
        with connection.schema_editor(atomic=False) as editor:
            index.index_build(editor)
    return ReembedResult(embedder=identity, made=made, skipped=skipped, left=embeddings_stale().count(),
                         index_rebuilt=rebuilt)
