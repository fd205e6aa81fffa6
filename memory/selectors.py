"""The read paths. Each one generates candidates its own way and then materializes them through
`_visible_records` / `_live_artifacts`, which filter forgotten and redacted rows at the final step:
whatever a candidate source returns (an index, a lineage walk), forgotten content never leaves here.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_

import numpy as np
from django.db import connection
from django.db.models import Q, QuerySet

from memory import errors
from memory.embedding import embedder, vectors_from_bytes
from memory.lookups import array_literal, batches
from memory.models import ArtifactKind, DeletedRecord, DerivedArtifact, Lineage, Record, Tenant
from memory.services.scopes import scope_descendant_ids, scope_get

MAX_PAGE = 500
# Ids are 64-bit; a larger number in a URL names nothing (and must not reach the database).
MAX_ID = 2**63 - 1
MAX_QUERY_CHARS = 1000
# (record, query) pairs per statement of the `_each` forms: a keyword query is up to ten LIKE conditions, so a
# few thousand of them keep a statement to some hundred kilobytes.
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


def _keyword_words(q: str) -> list[str]:
    """The words the keyword search looks for: the first ten of `q` (already valid)."""
    return q.split()[:10]


def _keyword_match(q: str) -> Q:
    """The keyword search's test of a record: its content contains each of the first ten words of `q`,
    case-insensitive (`q` already valid)."""
    return reduce(lambda match, word: match & Q(content__icontains=word), _keyword_words(q), Q())


def records_search(*, tenant: Tenant, q: str, limit: int = 20, within_ids: list[int] | None = None) -> list[Record]:
    """Keyword search: records whose content contains the words of `q` (case-insensitive).

    `within_ids` restricts the candidates to those records: how confirm-erasure probes this path for
    the records it checks without scanning the whole store.
    """
    q, limit = _query_valid(q), _limit_valid(limit)
    candidates = Record.objects.filter(tenant=tenant, forgotten_at__isnull=True, redacted_at__isnull=True)
    if within_ids is not None:
        candidates = candidates.filter(pk__in=within_ids)
    ids = list(candidates.filter(_keyword_match(q)).order_by("-pk").values_list("pk", flat=True)[:limit])
    return list(_visible_records(tenant, ids).order_by("-pk")[:limit])


def records_search_each(*, tenant: Tenant, queries: dict[int, str]) -> set[int]:
    """Keyword search for many records at once, each for its own `q` (record id -> q): the records that
    `records_search(tenant=tenant, q=q, within_ids=[record id])` returns, with the same match and the same
    final step, in one statement per EACH_BATCH records instead of one search each (how confirm-erasure
    probes this path for a group of forgets)."""
    found: set[int] = set()
    for batch in batches(sorted((pk, _query_valid(q)) for pk, q in queries.items()), EACH_BATCH):
        if connection.vendor == "postgresql":
            candidates = _keyword_candidates_each(tenant, batch)
            if not candidates:
                continue  # nothing for the final step to let through
        else:
            candidates = (Record.objects.filter(tenant=tenant, forgotten_at__isnull=True, redacted_at__isnull=True,
                                                pk__in=[pk for pk, _ in batch])
                          .filter(reduce(or_, (Q(pk=pk) & _keyword_match(q) for pk, q in batch)))
                          .values("pk"))
        found.update(_visible_records(tenant, candidates).values_list("pk", flat=True))
    return found


# `_keyword_match` for many (record, q) pairs in one statement, on PostgreSQL: each record's patterns (its words,
# as Django spells `icontains`: `UPPER(content::text) LIKE UPPER('%word%')`, LIKE's metacharacters escaped) bound
# as parallel arrays and tested with `LIKE ALL`. The ORM's form (an OR of one AND of LIKEs per record) cost
# ~0.3 ms of CPU a request to build and quote for a group's probe (bench_workflow.py).
_KEYWORD_EACH_SQL = f"""
    SELECT r.id FROM {Record._meta.db_table} r
    JOIN (SELECT id, array_agg(UPPER(pattern)) AS patterns FROM unnest(%s::bigint[], %s::text[]) AS q(id, pattern)
          GROUP BY id) q ON r.id = q.id
    WHERE r.tenant_id = %s AND r.forgotten_at IS NULL AND r.redacted_at IS NULL
      AND UPPER(r.content::text) LIKE ALL (q.patterns)
"""


def _keyword_candidates_each(tenant: Tenant, queries: Sequence[tuple[int, str]]) -> list[int]:
    """The keyword search's candidates for each (record id, valid q): the record itself when its content holds
    every word of its q."""
    pairs = [(pk, f"%{connection.ops.prep_for_like_query(word)}%") for pk, q in queries for word in _keyword_words(q)]
    with connection.cursor() as cursor:
        cursor.execute(_KEYWORD_EACH_SQL, [array_literal(pk for pk, _ in pairs), [p for _, p in pairs], tenant.pk])
        return [pk for (pk,) in cursor.fetchall()]


@dataclass(frozen=True)
class SimilarHit:
    record: Record
    score: float


def _embedding_index(tenant: Tenant) -> QuerySet:
    """The similarity index: the `DerivedArtifact(kind=embedding)` rows themselves, so a forgotten embedding
    leaves it with its row."""
    return DerivedArtifact.objects.filter(tenant=tenant, kind=ArtifactKind.EMBEDDING, vector__isnull=False,
                                          forgotten_at__isnull=True)


def _nearest(rows: list[tuple[int, bytes]], text: str, k: int) -> dict[int, float]:
    """Of these (artifact id, vector) rows, the 2k nearest to `text` that share something with it: {artifact id:
    cosine}. Brute force with NumPy."""
    model = embedder()
    matrix = vectors_from_bytes([v for _, v in rows], model.dim)
    scores = matrix @ model.embed([text])[0]
    top = np.argsort(-scores)[: k * 2]
    # A cosine of zero or less shares nothing with the query: not a hit, however short the list.
    return {rows[i][0]: float(scores[i]) for i in top if scores[i] > 0}


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
    """The similarity index: (record id, cosine) of the nearest embeddings, before the final step."""
    index = _embedding_index(tenant)
    if within_ids is not None:
        index = index.filter(lineage__source_id__in=within_ids)
    rows = list(index.order_by("pk").values_list("pk", "vector"))
    if not rows:
        return []
    artifact_ids = _nearest(rows, text, k)
    best: dict[int, float] = {}
    for artifact_id, source_ids in _sources_of(artifact_ids).items():
        for source_id in source_ids:
            best[source_id] = max(best.get(source_id, -1.0), artifact_ids[artifact_id])
    return sorted(best.items(), key=lambda item: -item[1])


def records_similar(*, tenant: Tenant, q: str, limit: int = 10,
                    within_ids: list[int] | None = None) -> list[SimilarHit]:
    q, limit = _query_valid(q), _limit_valid(limit)
    candidates = similarity_candidates(tenant=tenant, text=q, k=limit, within_ids=within_ids)
    visible = {r.pk: r for r in _visible_records(tenant, [pk for pk, _ in candidates])}
    return [SimilarHit(visible[pk], score) for pk, score in candidates if pk in visible][:limit]


def records_similar_each(*, tenant: Tenant, queries: dict[int, str]) -> set[int]:
    """Similarity search for many records at once, each for its own `q` (record id -> q): the records for which
    `records_similar(tenant=tenant, q=q, limit=1, within_ids=[record id])` returns a hit (which may be another
    source of the same embedding), with the same index, scores and final step, in three queries for all of
    them instead of up to three each (how confirm-erasure probes this path for a group of forgets). Each text
    is embedded on its own, as the single search does (a batching model could score a batch differently)."""
    texts = {pk: _query_valid(q) for pk, q in queries.items()}
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
