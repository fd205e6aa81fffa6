"""The read paths at a million records: fetch by id and keyword search, through the selectors and through the
HTTP API with a token, against the same statement in raw SQL, in the same run; and the write path.

    .venv/bin/python bench/bench_search.py            # builds the store (~3 min on 2 cores), measures
    .venv/bin/python bench/bench_search.py --reuse    # keeps the store of an earlier run

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_search, a database
this script drops and re-creates: its name must contain "bench"): one tenant ("bench") with 1,000,000 records
and 10 noise tenants with 20,000 records each, written set-based (INSERT ... SELECT generate_series; the keyword
index is built after the rows, as CREATE INDEX does it faster than row by row). A record's content is "note N:"
and 24 words drawn from a vocabulary of 32,768 made-up three-syllable words with a Zipf-like law (a word's
rank is exp(uniform(0, ln 32768)): the commonest word is in ~80% of the records, most words in a handful), so
queries meet every selectivity (the word of rank k is in ~24 / (k ln 32768) of the records: rank 1 in 80%,
rank 100 in 2.3%, rank 10,000 in 0.02%). Records are of the class "chat" (no rule), in 100 scopes per tenant.

Measured, each over --queries queries after a warm-up pass on other queries (p50 / p99, in ms):
  fetch by id:     `record_read` (selector); GET /api/v1/memory/records/<id> (Django's test Client, in process,
                   with an agent token: the whole stack but the socket); raw `SELECT * FROM memory_record WHERE
                   id = %s`;
  keyword search:  `records_search(limit=10)`; GET /api/v1/memory/search?q=...; raw: the selector's ranked
                   statement alone (`content_search @@ tsquery`, the same SQL, its tsquery made beforehand), on
                   its own psycopg connection as psql would send it. Queries, each from a random record: its
                   rarest word (30%: a specific term, as one recalls a memory by), any of its words (20%:
                   drawn by frequency, so mostly common words that match 1-80% of the records), two of its
                   words (25%), the first four letters of one of them (a prefix, 15%), and a word that is in
                   no record (10%);
  write path:      --writes records through POST /api/v1/memory/records, one at a time (records/s); then
                   deleted again, so that --reuse finds the store as it was built.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_search"
TENANT = "bench"
SCOPES = 100
WORDS_PER_RECORD = 24
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "be", "da", "fe", "gu", "ho", "ji", "ku", "la",
             "mo", "nu", "pa", "ri", "se", "to", "zu", "va", "we", "xo", "yu", "ze", "an", "el", "or", "is"]
VOCABULARY = len(SYLLABLES) ** 3
GOALS = {"p50": 20.0, "p99": 100.0, "api_overhead": 5.0}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of the measured tenant")
    parser.add_argument("--noise-tenants", type=int, default=10)
    parser.add_argument("--noise-records", type=int, default=20_000, help="records of each noise tenant")
    parser.add_argument("--queries", type=int, default=300, help="queries per measured path (at least 200)")
    parser.add_argument("--writes", type=int, default=1_000, help="records written through the API")
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    parser.add_argument("--ranked", type=int, default=None,
                        help="matches ranked per query (default: memory.selectors.KEYWORD_RANKED)")
    parser.add_argument("--build-only", action="store_true", help="build the store and stop")
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
    connection = psycopg.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
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


def _shape(args) -> dict:
    return {"records": args.records, "noise_tenants": args.noise_tenants, "noise_records": args.noise_records,
            "seed": args.seed}


def _store_built(args) -> bool:
    found = _fetch("SELECT to_regclass('bench_search_meta') IS NOT NULL")[0][0]
    if not found:
        return False
    rows = _fetch("SELECT records, noise_tenants, noise_records, seed FROM bench_search_meta")
    return bool(rows) and dict(zip(["records", "noise_tenants", "noise_records", "seed"], rows[0])) == _shape(args)


def _records_insert(tenant_id: int, class_id: int, records: int) -> None:
    """`records` rows for a tenant, spread over its SCOPES scopes, content drawn from the vocabulary."""
    syllables = "ARRAY[" + ", ".join(f"'{s}'" for s in SYLLABLES) + "]"
    n = len(SYLLABLES)
    _sql(f"""
        WITH v AS (SELECT array_agg(s[1 + i %% {n}] || s[1 + (i / {n}) %% {n}] || s[1 + (i / {n * n}) %% {n}]
                                    ORDER BY i) AS words
                   FROM generate_series(0, {VOCABULARY - 1}) i, (SELECT {syllables} AS s) x),
             p AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_scope WHERE tenant_id = %(tenant)s)
        INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                   tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                   retained_until, held, lock_protects_content)
        SELECT %(tenant)s, p.ids[1 + g %% {SCOPES}], NULL, %(class)s,
               'note ' || g || ': ' || (SELECT string_agg(v.words[floor(exp(random() * ln({VOCABULARY})))::int + 0 * w.k], ' ')
                                       FROM generate_series(1, {WORDS_PER_RECORD} + 0 * g) w(k)),
               md5(g || 'c') || md5(g || 'k'), md5(g || 's'), 'hot', now() - (g %% 720) * interval '1 hour',
               NULL, NULL, false, NULL, NULL, false, false
        FROM generate_series(1, %(records)s) g, v, p
    """, {"tenant": tenant_id, "class": class_id, "records": records})


def _store_build(args) -> None:
    from django.db import connection, transaction

    from memory.services.tokens import tenant_get_or_create
    from retention.services import content_class_create

    started = time.perf_counter()
    names = [TENANT] + [f"noise-{i}" for i in range(1, args.noise_tenants + 1)]
    _sql("SELECT setseed(%s)", [args.seed / 1000])
    index_sql = _fetch("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_record_content_search_idx'")[0][0]
    _sql("DROP INDEX memory_record_content_search_idx")
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
            _records_insert(tenant.pk, chat.pk, args.records if name == TENANT else args.noise_records)
        print(f"  {name}: written at {time.perf_counter() - started:.0f} s", flush=True)
    _sql("SET maintenance_work_mem = '512MB'")
    _sql(index_sql)
    print(f"  keyword index built at {time.perf_counter() - started:.0f} s", flush=True)
    with connection.cursor() as cursor:  # autocommit: VACUUM cannot run in a transaction
        for table in ("memory_record", "memory_scope", "memory_scopeclosure"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    seconds = time.perf_counter() - started
    _sql("CREATE TABLE bench_search_meta (records bigint, noise_tenants int, noise_records bigint, seed int, "
         "built_seconds float, built_at timestamptz DEFAULT now())")
    _sql("INSERT INTO bench_search_meta VALUES (%s, %s, %s, %s, %s)",
         [args.records, args.noise_tenants, args.noise_records, args.seed, seconds])
    total = args.records + args.noise_tenants * args.noise_records
    print(f"built the store: {total:,} records ({args.records:,} in {TENANT!r}) in {seconds:.0f} s", flush=True)


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


def _queries(rng: random.Random, tenant_id: int, count: int) -> list[tuple[str, str]]:
    """(kind, q) pairs drawn from random records of the tenant (see the module docstring)."""
    low, high = _fetch("SELECT min(id), max(id) FROM memory_record WHERE tenant_id = %s", [tenant_id])[0]
    ids = rng.sample(range(low, high + 1), count)
    contents = dict(_fetch("SELECT id, content FROM memory_record WHERE id = ANY(%s)", [ids]))
    queries = []
    for pk in ids:
        words = contents[pk].split(": ", 1)[1].split()
        roll = rng.random()
        if roll < 0.3:
            queries.append(("rare word", max(words, key=_rank)))
        elif roll < 0.5:
            queries.append(("any word", rng.choice(words)))
        elif roll < 0.75:
            queries.append(("two words", " ".join(rng.sample(words, 2))))
        elif roll < 0.9:
            queries.append(("prefix", rng.choice(words)[:4]))
        else:
            queries.append(("no match", f"qq{rng.randrange(10**6)}zz"))
    return queries


def main() -> None:
    args = _args()
    if args.queries < 200:
        sys.exit("bench_search: --queries must be at least 200 (a p99 needs them)")
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    os.environ["DATABASE_URL"] = url
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
    from django.db import connection
    from django.test import Client

    from memory import selectors
    from memory.models import Record, Tenant
    from memory.services.tokens import token_issue

    tenant = Tenant.objects.get(name=TENANT)
    built_max = Record.objects.order_by("-pk").values_list("pk", flat=True).first()
    version = _fetch("SHOW server_version")[0][0]
    total = _fetch("SELECT count(*) FROM memory_record")[0][0]
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{total:,} records, {args.records:,} in the measured tenant; {args.queries} queries per path; "
          f"ranking the {args.ranked or selectors.KEYWORD_RANKED:,} newest matches")

    rng = random.Random(args.seed)
    warm, queries = _queries(rng, tenant.pk, args.queries), _queries(rng, tenant.pk, args.queries)
    low, high = _fetch("SELECT min(id), max(id) FROM memory_record WHERE tenant_id = %s", [tenant.pk])[0]
    fetch_ids = [rng.randrange(low, high + 1) for _ in range(args.queries)]
    _, key = token_issue(tenant_name=TENANT, role="agent")
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    raw = _raw_connect(url)

    def fetch_selector(pk):
        selectors.record_read(tenant=tenant, record_id=pk)

    def fetch_api(pk):
        response = client.get(f"/api/v1/memory/records/{pk}")
        assert response.status_code == 200, response.content

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

    results = {}
    for name, function, items, warm_items in [
        ("fetch by id: selector", fetch_selector, fetch_ids, fetch_ids[::-1]),
        ("fetch by id: API", fetch_api, fetch_ids, fetch_ids[::-1]),
        ("fetch by id: raw SQL", fetch_raw, fetch_ids, fetch_ids[::-1]),
        ("keyword: selector", search_selector, [q for _, q in queries], [q for _, q in warm]),
        ("keyword: API", search_api, [q for _, q in queries], [q for _, q in warm]),
        ("keyword: raw SQL", search_raw, [q for _, q in queries], [q for _, q in warm]),
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
        _sql("DELETE FROM memory_record WHERE id > %s", [built_max])
    raw.close()
    connection.close()


if __name__ == "__main__":
    main()
