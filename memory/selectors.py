"""The read paths. Each one generates candidates its own way and then materializes them through
`_visible_records` / `_live_artifacts`, which filter forgotten and redacted rows at the final step:
whatever a candidate source returns (an index, a lineage walk), forgotten content never leaves here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from memory import errors
from memory.embedding import embedder, embedder_identity, vectors_from_bytes
from memory.lookups import array_literal, batches
from memory.models import ArtifactKind, DeletedRecord, DerivedArtifact, Lineage, Record, Tenant
from memory.services.scopes import scope_descendant_ids, scope_get

MAX_PAGE = 500
# Ids are 64-bit; a larger number in a URL names nothing (and must not reach the database).
MAX_ID = 2**63 - 1
MAX_QUERY_CHARS = 1000
# (record, query) pairs per statement of the keyword `_each` form: up to 1,000 characters of query each, so a
# statement stays under a megabyte.
EACH_BATCH = 500
# Ids per `IN` list elsewhere in the `_each` forms.
IDS_BATCH = 5_000


def _visible_records(tenant: Tenant, ids) -> QuerySet:
    """The final step of every record read path. `ids`: a subquery, or ids (bound as one array on PostgreSQL,
    `any_of`: `__in` spelled and quoted one placeholder per id, ~10 µs of CPU each, 5 ms for a group's
    confirmation probe of 500 records)."""
    membership = {"pk__in": ids} if isinstance(ids, QuerySet) else {"pk__any_of": ids}
    return (Record.objects.filter(tenant=tenant, **membership, forgotten_at__isnull=True, redacted_at__isnull=True)
            .select_related("scope", "subject", "content_class"))


def _live_artifacts(tenant: Tenant, ids) -> QuerySet:
    """The final step of every artifact read path: the artifact and all of its sources must be live."""
    return (DerivedArtifact.objects.filter(tenant=tenant, pk__in=ids, forgotten_at__isnull=True,
                                           redacted_at__isnull=True)
            .exclude(lineage__source__forgotten_at__isnull=False)
            .exclude(lineage__source__redacted_at__isnull=False))


def record_read(*, tenant: Tenant, record_id: int) -> Record:
    """A record by id: 410 `forgotten` with its verification handle when forgotten (to its own tenant
    only), 404 when it does not exist or belongs to another tenant."""
    record = _visible_records(tenant, [record_id]).first()
    if record is not None:
        return record
    event = None
    forgotten = Record.objects.filter(tenant=tenant, pk=record_id).select_related("forget_event").first()
    if forgotten is not None:
        event = forgotten.forget_event
    else:
        deleted = DeletedRecord.objects.filter(tenant=tenant, record_id=record_id).select_related("forget_event").first()
        event = deleted.forget_event if deleted else None
    if event is None:
        raise errors.not_found()
    raise errors.gone("This record was forgotten.", record_id=record_id,
                      handle={"sequence": event.pk, "tombstone_id": str(event.public_id)})


def _page(queryset: QuerySet, *, limit: int, after: int | None) -> list:
    if after is not None:
        queryset = queryset.filter(pk__gt=after)
    return list(queryset.order_by("pk")[:limit])


def _limit_valid(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_PAGE:
        raise errors.invalid("invalid_limit", f"limit must be an integer from 1 to {MAX_PAGE}.")
    return limit


def records_in_scope(*, tenant: Tenant, scope_path: str, limit: int = 100, after: int | None = None) -> list[Record]:
    """The records of a scope and of every scope below it, by id, a page at a time."""
    limit = _limit_valid(limit)
    scope = scope_get(tenant=tenant, path=scope_path)
    candidates = Record.objects.filter(tenant=tenant, scope_id__in=scope_descendant_ids(scope)).values("pk")
    return _page(_visible_records(tenant, candidates), limit=limit, after=after)


def _query_valid(q: object) -> str:
    if not isinstance(q, str) or not q.strip() or len(q) > MAX_QUERY_CHARS:
        raise errors.invalid("invalid_query", f"q must be 1 to {MAX_QUERY_CHARS} characters.")
    return q.strip()


def _keyword_words(q: str) -> str:
    """The text the keyword search looks for: the first ten words of `q` (already valid), a NUL read as a space
    (PostgreSQL's text holds none)."""
    return " ".join(q.replace("\x00", " ").split()[:10])


# --- keyword search ------------------------------------------------------------------------------------------
# Semantics, the same on both databases and in the confirmation probes: the query's words are cut into tokens
# by the index's own parser (PostgreSQL's `simple` text search configuration; SQLite FTS5's `unicode61`),
# lower-cased, not stemmed; a record matches when its content holds, for every token, a word that starts with
# it ("falc" finds "Falcon"; "alcon", the inside of a word, does not). No stemming, because memory content is in
# any language: an English stemmer would mangle the others' words. Matches are ranked (`ts_rank`, `bm25`);
# the ranking reads each candidate's row (its tsvector), so only the KEYWORD_RANKED newest matches (by id, i.e.
# write order) are ranked: a query that matches more ranks the newest of them, as an agent's recent memory is
# the likelier answer. 1,000 rather than 10,000: at 1,000,000 records the raw statement's p99 was 85 ms against
# 131 ms (queries of common words and short prefixes, bench/README.md, "bench_search.py").
KEYWORD_RANKED = 1_000

# The tsquery of a text: each lexeme PostgreSQL's `simple` parser finds in it, as a prefix (`'lexeme':*`), all
# of them required; NULL (matches nothing) when the text has no word. Built by the same parser that builds
# the index (memory 0014), so a query token is always spelled as the content's; quotes and backslashes doubled
# as tsquery's syntax wants.
_TSQUERY_OF = r"""(SELECT string_agg('''' || replace(replace(t.lexeme, '\', '\\'), '''', '''''') || ''':*', ' & ')
          FROM unnest(to_tsvector('simple'::regconfig, {text})) AS t)"""
_READABLE = "r.forgotten_at IS NULL AND r.redacted_at IS NULL"

# The candidates of one search: the KEYWORD_RANKED newest matches, ranked. The tsquery is bound as a constant
# (client-side binding), so the planner sees the words: the GIN index for rare ones, the primary key backwards
# for common ones.
# Each candidate's rank is computed where its row is read, so that only (id, rank) pairs are sorted: sorting
# the tsvectors themselves spilled to disk at 10,000 candidates (3x slower at 1,000,000 records, bench_search.py).
_KEYWORD_SQL = f"""
    SELECT id FROM (
        SELECT r.id, ts_rank(r.content_search, %(query)s::tsquery) AS rank FROM {Record._meta.db_table} r
        WHERE r.tenant_id = %(tenant)s AND {_READABLE} AND r.content_search @@ %(query)s::tsquery {{within}}
        ORDER BY r.id DESC LIMIT {{ranked}}
    ) c
    ORDER BY c.rank DESC, c.id DESC
    LIMIT %(limit)s
"""

# Many (record, text) pairs at once: each record is a candidate when its own index entry matches its text.
_KEYWORD_EACH_SQL = f"""
    SELECT r.id FROM {Record._meta.db_table} r
    JOIN (SELECT q.id, {_TSQUERY_OF.format(text="q.text")}::tsquery AS query
          FROM unnest(%s::bigint[], %s::text[]) AS q(id, text)) q ON r.id = q.id
    WHERE r.tenant_id = %s AND {_READABLE} AND r.content_search @@ q.query
"""

FTS = "memory_record_search"
# SQLite: FTS5's unicode61 tokens are runs of letters and digits (everything else separates them).
_FTS_TOKEN = re.compile(r"[^\W_]+")
_FTS_SQL = f"""
    SELECT id FROM (
        SELECT s.rowid AS id, bm25({FTS}) AS score FROM {FTS} s JOIN {Record._meta.db_table} r ON r.id = s.rowid
        WHERE {FTS} MATCH %s AND r.tenant_id = %s AND {_READABLE} {{within}}
        ORDER BY s.rowid DESC LIMIT {{ranked}}
    ) ORDER BY score, id DESC LIMIT %s
"""


def _fts_query(text: str) -> str | None:
    """The FTS5 query of a text: every token, as a prefix, all required (None: no token, nothing matches)."""
    tokens = _FTS_TOKEN.findall(text)
    return " AND ".join(f'"{token}"*' for token in tokens) if tokens else None


def _tsquery(text: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_TSQUERY_OF.format(text='%s')}", [text])
        return cursor.fetchone()[0]


def _ids_valid(ids) -> list[int]:
    """Ids that can name a record (a larger number names nothing and must not reach the database)."""
    return [int(pk) for pk in ids if 0 < int(pk) <= MAX_ID]


def keyword_candidates(*, tenant: Tenant, text: str, limit: int, within_ids: list[int] | None = None) -> list[int]:
    """The keyword index's best `limit` matches of `text` (words already cut to the first ten), before the final
    step: record ids, best first."""
    if within_ids is not None:
        within_ids = _ids_valid(within_ids)
        if not within_ids:
            return []
    if connection.vendor == "postgresql":
        query = _tsquery(text)
        if query is None:
            return []
        params = {"tenant": tenant.pk, "query": query, "limit": limit}
        within = ""
        if within_ids is not None:
            within, params["within"] = "AND r.id = ANY(%(within)s::bigint[])", array_literal(within_ids)
        sql = _KEYWORD_SQL.format(within=within, ranked=int(KEYWORD_RANKED))
    else:
        query = _fts_query(text)
        if query is None:
            return []
        within = f"AND r.id IN ({', '.join(map(str, within_ids))})" if within_ids is not None else ""
        sql, params = _FTS_SQL.format(within=within, ranked=int(KEYWORD_RANKED)), [query, tenant.pk, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [pk for (pk,) in cursor.fetchall()]


def records_search(*, tenant: Tenant, q: str, limit: int = 20, within_ids: list[int] | None = None) -> list[Record]:
    """Keyword search: records whose content has, for each word of `q`, a word starting with it (case-insensitive;
    see KEYWORD_RANKED above), best ranked first.

    `within_ids` restricts the candidates to those records: how confirm-erasure probes this path for
    the records it checks without scanning the whole store.
    """
    q, limit = _query_valid(q), _limit_valid(limit)
    ids = keyword_candidates(tenant=tenant, text=_keyword_words(q), limit=limit, within_ids=within_ids)
    if not ids:
        return []
    found = {r.pk: r for r in _visible_records(tenant, ids)}
    return [found[pk] for pk in ids if pk in found]


def records_search_each(*, tenant: Tenant, queries: dict[int, str]) -> set[int]:
    """Keyword search for many records at once, each for its own `q` (record id -> q): the records that
    `records_search(tenant=tenant, q=q, within_ids=[record id])` returns, with the same index, match and final
    step, in one statement per EACH_BATCH records instead of one search each (how confirm-erasure probes this
    path for a group of forgets)."""
    found: set[int] = set()
    pairs = sorted((pk, _keyword_words(_query_valid(q))) for pk, q in queries.items() if 0 < pk <= MAX_ID)
    for batch in batches(pairs, EACH_BATCH):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_KEYWORD_EACH_SQL, [array_literal(pk for pk, _ in batch), [t for _, t in batch],
                                                   tenant.pk])
                candidates = [pk for (pk,) in cursor.fetchall()]
        else:
            # The embedded default: one index lookup per record (FTS5 seeks the rowid), as the single search.
            candidates = [pk for pk, text in batch
                          if keyword_candidates(tenant=tenant, text=text, limit=1, within_ids=[pk])]
        if candidates:  # else nothing for the final step to let through
            found.update(_visible_records(tenant, candidates).values_list("pk", flat=True))
    return found


@dataclass(frozen=True)
class SimilarHit:
    record: Record
    score: float


def _embedding_index(tenant: Tenant) -> QuerySet:
    """The exact scan's rows (where no HNSW index answers, see `_hnsw_index`): the `DerivedArtifact(kind=embedding)`
    rows themselves, so a forgotten embedding leaves it with its row."""
    return DerivedArtifact.objects.filter(tenant=tenant, kind=ArtifactKind.EMBEDDING, vector__isnull=False,
                                          forgotten_at__isnull=True, embedder=embedder_identity())


# The HNSW index (memory 0016): `memory_derivedartifact.embedding`, the live embeddings' vectors, NULL for every
# other row (forgotten, redacted, deleted rows are not in it), on PostgreSQL with pgvector.
HNSW_DIM = 256
DEFAULT_HNSW_EF_SEARCH = 800  # for an embedder that does not say (HashingEmbedder's)
# Candidates the graph search keeps: settings.LEDGER_HNSW_EF_SEARCH, or else the embedder's `hnsw_ef_search`
# (800 for HashingEmbedder, 100 for WordLlamaEmbedder; pgvector's own default is 40): with m=32 and
# ef_construction=128, recall@10 against the exact scan at 1,000,000 embeddings is 0.91 for HashingEmbedder
# on the bench's generated words, 0.97 for WordLlamaEmbedder on real prose (bench/README.md). The iterative
# scan (pgvector 0.8) goes on past them while the tenant's filter has thrown too many away, up to
# `hnsw.max_scan_tuples` (20,000 by default) index tuples: a tenant whose rows are fewer than 1 in 2,000 of the
# nearest can come back with fewer than k.
def hnsw_ef_search() -> int:
    """The `hnsw.ef_search` of a search: LEDGER_HNSW_EF_SEARCH if set, else the embedder's own."""
    return settings.LEDGER_HNSW_EF_SEARCH or getattr(embedder(), "hnsw_ef_search", DEFAULT_HNSW_EF_SEARCH)


def hnsw_settings_sql(ef_search: int | None = None) -> str:
    """The `SET LOCAL`s of one HNSW search (in its transaction): `ef_search`, by default the setting's, or else
    the embedder's."""
    ef_search = int(ef_search or hnsw_ef_search())
    return f"SET LOCAL hnsw.ef_search = {ef_search}; SET LOCAL hnsw.iterative_scan = relaxed_order"


_ARTIFACTS = DerivedArtifact._meta.db_table
_LINEAGE = Lineage._meta.db_table
# The index's search: the graph walk orders by cosine distance (`<=>`) and the tenant's filter applies as it goes;
# relaxed order, so the caller sorts the few rows it gets. Each with its source records (lineage), in the same
# statement. Only vectors of the query's embedder compare (`embedder`: memory.embedding; the others, until
# `manage.py reembed` makes them again, are passed over as another tenant's are).
_OURS = "a.tenant_id = %(tenant)s AND a.embedder = %(embedder)s AND a.embedding IS NOT NULL"
_HNSW_SQL = ("SELECT n.id, n.distance, l.source_id FROM ("
             f"SELECT a.id, a.embedding <=> %(q)s::vector AS distance FROM {_ARTIFACTS} a WHERE {_OURS} "
             f"ORDER BY a.embedding <=> %(q)s::vector LIMIT %(limit)s) n JOIN {_LINEAGE} l ON l.artifact_id = n.id")
# The same distance over the few embeddings of given records (confirm-erasure's probes), computed for each of
# them: `OFFSET 0` keeps the ORDER BY off the graph, whose walk, filtered down to these rows, could miss them.
_WITHIN_SQL = ("SELECT n.id, n.distance, l.source_id FROM (SELECT id, distance FROM ("
               f"SELECT a.id, a.embedding <=> %(q)s::vector AS distance FROM {_ARTIFACTS} a "
               f"WHERE a.id IN (SELECT artifact_id FROM {_LINEAGE} WHERE source_id = ANY(%(within)s::bigint[])) "
               f"AND {_OURS} OFFSET 0) d "
               f"ORDER BY distance, id LIMIT %(limit)s) n JOIN {_LINEAGE} l ON l.artifact_id = n.id")
# ... for many records at once, each with its own query vector: the best two of each one's embeddings.
_WITHIN_EACH_SQL = ("SELECT v.id, best.id, best.distance "
                    "FROM unnest(%(ids)s::bigint[], %(vectors)s::text[]::vector[]) AS v(id, q) CROSS JOIN LATERAL ("
                    "SELECT id, distance FROM ("
                    f"SELECT a.id, a.embedding <=> v.q AS distance FROM {_ARTIFACTS} a "
                    f"WHERE a.id IN (SELECT artifact_id FROM {_LINEAGE} WHERE source_id = v.id) "
                    f"AND {_OURS} OFFSET 0) d "
                    "ORDER BY distance, id LIMIT 2) best")
_HNSW_PRESENT: dict[int, bool] = {}


def _hnsw_index() -> bool:
    """Whether the similarity search runs on the HNSW index here: PostgreSQL, with memory 0016's column (absent
    where pgvector is not installed), and an embedder of its dimension. Else the exact NumPy scan (SQLite, the
    embedded default: README). Looked up once per database connection."""
    if connection.vendor != "postgresql" or embedder().dim != HNSW_DIM:
        return False
    connection.ensure_connection()
    key = id(connection.connection)
    if key not in _HNSW_PRESENT:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding' "
                           "AND NOT attisdropped", [_ARTIFACTS])
            _HNSW_PRESENT[key] = cursor.fetchone() is not None
    return _HNSW_PRESENT[key]


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a float32 vector (each value's shortest repr reads back to the same float32)."""
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def _nearest(rows: list[tuple[int, bytes]], text: str, k: int) -> dict[int, float]:
    """Of these (artifact id, vector) rows, the 2k nearest to `text` that share something with it: {artifact id:
    cosine}. Brute force with NumPy."""
    model = embedder()
    matrix = vectors_from_bytes([v for _, v in rows], model.dim)
    scores = matrix @ model.embed([text])[0]
    top = np.argsort(-scores)[: k * 2]
    # A cosine of zero or less shares nothing with the query: not a hit, however short the list.
    return {rows[i][0]: float(scores[i]) for i in top if scores[i] > 0}


def _nearest_indexed(tenant: Tenant, text: str, k: int, within_ids: list[int] | None) -> dict[int, float]:
    """`_nearest` on the HNSW index, with each one's sources: the 2k nearest live embeddings of the tenant (of
    `within_ids`' records, by the same distance without the graph) that share something with `text`, as {source
    record id: its best cosine}."""
    vector = embedder().embed([text])[0]
    if not vector.any():  # a text with no feature shares nothing with anything (and pgvector's cosine is NaN)
        return {}
    params = {"q": _vector_text(vector), "tenant": tenant.pk, "embedder": embedder_identity(), "limit": k * 2}
    with transaction.atomic(), connection.cursor() as cursor:
        if within_ids is None:
            cursor.execute(hnsw_settings_sql())
            cursor.execute(_HNSW_SQL, params)
        else:
            cursor.execute(_WITHIN_SQL, {**params, "within": array_literal(within_ids)})
        rows = cursor.fetchall()
    # Cosine = 1 - distance; zero or less shares nothing with the query (as `_nearest`).
    best: dict[int, float] = {}
    for _, distance, source_id in rows:
        if distance < 1.0:
            best[source_id] = max(best.get(source_id, -1.0), 1.0 - distance)
    return best


def _sources_of(artifact_ids) -> dict[int, set[int]]:
    """{artifact id: its source record ids}, one query per IDS_BATCH artifacts."""
    sources: dict[int, set[int]] = {}
    for batch in batches(sorted(artifact_ids), IDS_BATCH):
        for artifact_id, source_id in Lineage.objects.filter(artifact_id__any_of=batch).values_list(
                "artifact_id", "source_id"):
            sources.setdefault(artifact_id, set()).add(source_id)
    return sources


def similarity_candidates(*, tenant: Tenant, text: str, k: int,
                          within_ids: list[int] | None = None) -> list[tuple[int, float]]:
    """The similarity index: (record id, cosine) of the nearest embeddings, before the final step. On the HNSW
    index where there is one (`_hnsw_index`), else an exact scan of the tenant's embeddings."""
    if within_ids is not None:
        within_ids = _ids_valid(within_ids)
        if not within_ids:
            return []
    if _hnsw_index():
        best = _nearest_indexed(tenant, text, k, within_ids)
    else:
        index = _embedding_index(tenant)
        if within_ids is not None:
            index = index.filter(lineage__source_id__in=within_ids)
        rows = list(index.order_by("pk").values_list("pk", "vector"))
        if not rows:
            return []
        artifact_ids = _nearest(rows, text, k)
        best = {}
        for artifact_id, source_ids in _sources_of(artifact_ids).items():
            for source_id in source_ids:
                best[source_id] = max(best.get(source_id, -1.0), artifact_ids[artifact_id])
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))


def similarity_index_entries(*, record_ids: list[int]) -> list[tuple[int, int]]:
    """(artifact id, source record id) of the vectors derived from these records that the HNSW index holds (none
    where there is no such index): what confirm-erasure probes below the search, in the index itself."""
    if not _hnsw_index():
        return []
    found: list[tuple[int, int]] = []
    for batch in batches(_ids_valid(record_ids), IDS_BATCH):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT l.artifact_id, l.source_id FROM {_LINEAGE} l JOIN {_ARTIFACTS} a "
                           "ON a.id = l.artifact_id WHERE l.source_id = ANY(%s::bigint[]) AND a.embedding IS NOT NULL",
                           [array_literal(batch)])
            found += cursor.fetchall()
    return found


def records_similar(*, tenant: Tenant, q: str, limit: int = 10,
                    within_ids: list[int] | None = None) -> list[SimilarHit]:
    q, limit = _query_valid(q), _limit_valid(limit)
    candidates = similarity_candidates(tenant=tenant, text=q, k=limit, within_ids=within_ids)
    visible = {r.pk: r for r in _visible_records(tenant, [pk for pk, _ in candidates])}
    return [SimilarHit(visible[pk], score) for pk, score in candidates if pk in visible][:limit]


def records_similar_each(*, tenant: Tenant, queries: dict[int, str]) -> set[int]:
    """Similarity search for many records at once, each for its own `q` (record id -> q): the records for which
    `records_similar(tenant=tenant, q=q, limit=1, within_ids=[record id])` returns a hit (which may be another
    source of the same embedding), with the same index, scores and final step, in a few queries for all of
    them instead of up to three each (how confirm-erasure probes this path for a group of forgets). Each text
    is embedded on its own, as the single search does (a batching model could score a batch differently)."""
    texts = {pk: _query_valid(q) for pk, q in queries.items() if 0 < pk <= MAX_ID}
    nearest: dict[int, dict[int, float]] = {}
    if _hnsw_index():
        model = embedder()
        for batch in batches(sorted(texts), EACH_BATCH):
            vectors = [_vector_text(model.embed([texts[pk]])[0]) for pk in batch]
            with connection.cursor() as cursor:
                cursor.execute(_WITHIN_EACH_SQL, {"ids": array_literal(batch), "vectors": vectors,
                                                  "tenant": tenant.pk, "embedder": embedder_identity()})
                for pk, artifact_id, distance in cursor.fetchall():
                    if distance < 1.0:
                        nearest.setdefault(pk, {})[artifact_id] = 1.0 - distance
    else:
        rows: dict[int, list[tuple[int, bytes]]] = {}
        for batch in batches(sorted(texts), IDS_BATCH):
            for source_id, artifact_id, vector in (_embedding_index(tenant).filter(lineage__source_id__any_of=batch)
                                                   .order_by("pk").values_list("lineage__source_id", "pk", "vector")):
                rows.setdefault(source_id, []).append((artifact_id, vector))
        nearest = {pk: _nearest(found, texts[pk], 1) for pk, found in rows.items()}
    sources = _sources_of({a for scores in nearest.values() for a in scores})
    candidates = {pk: {s for a in scores for s in sources.get(a, ())} for pk, scores in nearest.items()}
    wanted = sorted(set().union(*candidates.values())) if candidates else []
    visible = set(_visible_records(tenant, wanted).values_list("pk", flat=True)) if wanted else set()
    return {pk for pk, found in candidates.items() if found & visible}


def artifacts_for_source(*, tenant: Tenant, record_id: int) -> list[DerivedArtifact]:
    """The live artifacts derived from a record (410 when the record itself is forgotten)."""
    record_read(tenant=tenant, record_id=record_id)
    ids = Lineage.objects.filter(source_id=record_id).values("artifact_id")
    return list(_live_artifacts(tenant, ids).order_by("pk"))
