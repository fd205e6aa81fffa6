"""Stream the subject-requests audit export of 100,000 requests through the real HTTP view, in bounded memory,
beside PostgreSQL's own `COPY (SELECT ...) TO STDOUT` of the same rows.

    .venv/bin/python bench/bench_audit_export.py             # builds the store (~1 min), measures, prints
    .venv/bin/python bench/bench_audit_export.py --reuse     # keeps the store of an earlier run
    .venv/bin/python bench/bench_audit_export.py --requests 20000

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_audit_export, a
database this script drops and re-creates: its name must contain "bench"): one tenant with `--requests`
subjects and requests, each request with 5 history rows and 3 plan items (one deleted with a tombstone id, one
hidden, one redacted), and another tenant with 1,000 requests that the export must leave out. Written
set-based (INSERT ... SELECT generate_series, triggers off: the rows are consistent by construction).

Measured: `GET /api/v1/audit/exports/requests.csv` and `.json` with an auditor token, through Django's test
Client (authentication, permission, the view, the StreamingHttpResponse), reading the streamed body piece by
piece and keeping only its length, as a server writing to a socket would. For each: the wall time, the peak
RSS of this process during the stream above what it was before (sampled at every piece), and, in a second run
under tracemalloc, the peak of Python's allocations. The raw side: `COPY (SELECT ...) TO STDOUT (FORMAT csv)`
of the same columns (counts, last change and outcomes aggregated by SQL), read by psycopg in the same process.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_audit_export"
TENANT = "bench-audit"
OTHER = "bench-other"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    return parser.parse_args()


def _sql(statement: str, params=None) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _one(statement: str, params=None):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0]


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _tenant_fill(name: str, n: int) -> None:
    """`n` subjects and requests of tenant `name`, with history and items, set-based."""
    from django.db import transaction

    with transaction.atomic():
        _sql("SET LOCAL session_replication_role = replica")
        tenant_id = _one("INSERT INTO memory_tenant (name, created_at) VALUES (%s, now()) RETURNING id", [name])
        _sql("""INSERT INTO memory_subject (tenant_id, ref, created_at)
                SELECT %s, %s || '-subject-' || g, now() FROM generate_series(1, %s) g""", [tenant_id, name, n])
        first_subject = _one("SELECT min(id) FROM memory_subject WHERE tenant_id = %s", [tenant_id])
        _sql("""
            INSERT INTO dsr_subjectrequest (tenant_id, subject_id, type, regulation, channel, contact_email,
                received_at, due_date, extended_due_date, extension_reason, status, identity_verified_by,
                identity_method, closing_reason, gaps, created_at)
            SELECT %(t)s, %(s)s + g - 1, (ARRAY['erasure','access','restriction'])[1 + g %% 3],
                (ARRAY['gdpr','ccpa','other'])[1 + g %% 3], 'api', 'subject' || g || '@example.org',
                now() - make_interval(days => g %% 730), (now() - make_interval(days => g %% 730))::date + 30,
                CASE WHEN g %% 10 = 0 THEN (now() - make_interval(days => g %% 730))::date + 90 END, '',
                (ARRAY['completed','partially_completed','closed','received','executing'])[1 + g %% 5],
                'operator', 'account', '', '[]'::jsonb, now()
            FROM generate_series(1, %(n)s) g""", {"t": tenant_id, "s": first_subject, "n": n})
        _sql("""
            INSERT INTO dsr_requesttransition (request_id, from_status, to_status, action, actor, note, at)
            SELECT r.id, '', (ARRAY['received','verified','planned','executing','completed'])[k],
                (ARRAY['received','verify_identity','plan','execute','confirm'])[k], 'admin:operator-' || k,
                'step ' || k, r.received_at + make_interval(hours => k)
            FROM dsr_subjectrequest r CROSS JOIN generate_series(1, 5) k WHERE r.tenant_id = %s""", [tenant_id])
        _sql("""
            INSERT INTO dsr_requestitem (request_id, kind, object_id, artifact_kind, decision, outcome, reason,
                tombstone_id)
            SELECT r.id, 'record', r.id * 10 + k, '', (ARRAY['erase','hide','redact'])[k],
                (ARRAY['deleted','hidden','redacted'])[k],
                CASE WHEN k = 2 THEN '{"code": "retention_lock"}'::jsonb END,
                CASE WHEN k = 1 THEN gen_random_uuid() END
            FROM dsr_subjectrequest r CROSS JOIN generate_series(1, 3) k WHERE r.tenant_id = %s""", [tenant_id])


def _store_build(n: int) -> None:
    started = time.perf_counter()
    _tenant_fill(TENANT, n)
    _tenant_fill(OTHER, 1000)
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("memory_subject", "dsr_subjectrequest", "dsr_requesttransition", "dsr_requestitem"):
            cursor.execute(f"ANALYZE {table}")
    print(f"store built in {time.perf_counter() - started:.1f} s")


def _store_shape(n: int) -> bool:
    return _one("SELECT count(*) FROM dsr_subjectrequest r JOIN memory_tenant t ON t.id = r.tenant_id "
                "WHERE t.name = %s", [TENANT]) == n


def _stream(client, url: str, *, traced: bool) -> dict:
    """GET `url`, read the body piece by piece keeping only its length; time, RSS and tracemalloc peaks."""
    import gc

    gc.collect()
    rss_before = peak_rss = _rss_kb()
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    size = pieces = 0
    for piece in response.streaming_content:
        size += len(piece)
        pieces += 1
        if pieces % 16 == 0:
            peak_rss = max(peak_rss, _rss_kb())
    response.close()
    seconds = time.perf_counter() - started
    traced_peak = tracemalloc.get_traced_memory()[1] if traced else None
    if traced:
        tracemalloc.stop()
    return {"seconds": seconds, "bytes": size, "rss_growth_kb": max(peak_rss, _rss_kb()) - rss_before,
            "rss_kb": peak_rss, "traced_peak": traced_peak}


RAW = """
COPY (
  SELECT r.id, t.name, r.subject_id, r.type, r.regulation, r.channel, r.received_at, r.due_date,
         r.extended_due_date IS NOT NULL, r.extended_due_date, r.effective_due_date, r.extension_notified_at, r.status,
         r.identity_verified_at, r.workflow_started_at, r.confirmed_at, r.notified_at,
         h.n, h.last_action, h.last_actor, h.last_at, i.n,
         (SELECT string_agg(o.outcome || '=' || o.c, ' ' ORDER BY o.outcome)
            FROM (SELECT outcome, count(*) c FROM dsr_requestitem WHERE request_id = r.id GROUP BY outcome) o),
         i.tombstones
  FROM dsr_subjectrequest r JOIN memory_tenant t ON t.id = r.tenant_id
  LEFT JOIN LATERAL (SELECT count(*) n, (array_agg(action ORDER BY at DESC, id DESC))[1] last_action,
                            (array_agg(actor ORDER BY at DESC, id DESC))[1] last_actor, max(at) last_at
                     FROM dsr_requesttransition WHERE request_id = r.id) h ON true
  LEFT JOIN LATERAL (SELECT count(*) n, string_agg(DISTINCT tombstone_id::text, ' ') tombstones
                     FROM dsr_requestitem WHERE request_id = r.id) i ON true
  WHERE r.tenant_id = {tenant_id}
  ORDER BY r.id
) TO STDOUT (FORMAT csv, HEADER)
"""


def _raw(tenant_id: int) -> dict:
    from django.db import connection

    rss_before = peak_rss = _rss_kb()
    started = time.perf_counter()
    size = pieces = 0
    with connection.cursor() as cursor:
        with cursor.cursor.copy(RAW.format(tenant_id=int(tenant_id))) as copy:
            for data in copy:
                size += len(data)
                pieces += 1
                if pieces % 256 == 0:
                    peak_rss = max(peak_rss, _rss_kb())
    return {"seconds": time.perf_counter() - started, "bytes": size, "rss_growth_kb": peak_rss - rss_before,
            "rss_kb": peak_rss, "traced_peak": None}


def main() -> None:
    args = _args()
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
    from bench_forget import _database_ensure  # the same create-or-recreate of a bench database

    _database_ensure(url, fresh=not args.reuse)

    import django

    django.setup()
    import logging
    import warnings

    warnings.filterwarnings("ignore", category=RuntimeWarning, message=".*LEDGER_SIGNING_PASSPHRASE.*")
    logging.getLogger("audit_exports").setLevel(logging.WARNING)
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from memory.services.tokens import token_issue

    call_command("migrate", verbosity=0)
    if not (args.reuse and _store_shape(args.requests)):
        if args.reuse:
            sys.exit("bench_audit_export: --reuse, but the store does not have this shape; run without --reuse.")
        _store_build(args.requests)
    token, key = token_issue(tenant_name=TENANT, role="auditor")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    # One small export first: the first request through the URLconf imports every app's views (the MCP SDK
    # among them: seconds and tens of MB), which is not the export's cost.
    warm = client.get("/api/v1/audit/exports/sweep-runs.csv")
    b"".join(warm.streaming_content)
    version = _one("SHOW server_version")
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{args.requests:,} requests of the tenant exported (5 history rows, 3 items each), "
          f"{1000:,} of another tenant left out; RSS before: {_rss_kb() / 1024:.0f} MB\n")
    print(f"  {'export':<44} {'seconds':>8} {'requests/s':>11} {'MB out':>8} {'RSS +MB':>8} "
          f"{'tracemalloc peak MB':>20}")

    def line(name: str, result: dict, traced_peak) -> None:
        peak = f"{traced_peak / 2**20:.1f}" if traced_peak is not None else "-"
        print(f"  {name:<44} {result['seconds']:>8.2f} {args.requests / result['seconds']:>11,.0f} "
              f"{result['bytes'] / 2**20:>8.1f} {result['rss_growth_kb'] / 1024:>8.1f} {peak:>20}", flush=True)

    raw = _raw(token.tenant_id)
    line("raw SQL: COPY (SELECT ...) TO STDOUT csv", raw, None)
    results = {}
    for fmt in ("csv", "json"):
        path = f"/api/v1/audit/exports/requests.{fmt}"
        timed = _stream(client, path, traced=False)
        traced = _stream(client, path, traced=True)
        results[fmt] = timed
        line(f"GET {path}", timed, traced["traced_peak"])
    print(f"\n  ratio raw/view (CSV): {raw['seconds'] / results['csv']['seconds']:.2f} "
          f"(the view takes {results['csv']['seconds'] / raw['seconds']:.1f}x the time of COPY)")
    print("  RSS +MB: growth of this process's resident memory during the stream (peak, sampled every 16 pieces);"
          "\n  tracemalloc peak: Python allocations at their highest during a second, traced run (slower).")


if __name__ == "__main__":
    main()
