"""The admin's busy pages over a big store: queries and render time, against the raw SQL they need.

    .venv/bin/python bench/bench_admin.py            # builds the store (~1-2 min), measures, prints the ratios
    .venv/bin/python bench/bench_admin.py --reuse    # keeps the store of an earlier run
    .venv/bin/python bench/bench_admin.py --slowest  # also: each page's slowest queries, with their plans

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_admin, a
database this script drops and re-creates: its name must contain "bench"): 10 tenants, 100,000 subjects
(one scope each), 1,000,000 records of ~300 bytes (10 per subject, a subject's rows spread across the
table), and 100,000 subject requests (one per subject) received over two years: those of the last 45
days are open in every state (about 6,000, a third of them overdue), older ones are completed, closed
or refused; each request past verification has 10 plan items (about 940,000), 5 history rows (500,000);
one in 20 has a retention conflict (about 4,700, the open requests' ones open), one in 10 keeps a record
hidden with a deferred erasure date. Written set-based with INSERT ... SELECT generate_series, with
session_replication_role = replica (the rows are consistent by construction; the triggers that guard
and ledger records are not what is measured here), then VACUUM ANALYZE.

Each page is fetched through Django's test Client, logged in as an operator (the operator group the
migration makes), as the admin serves it: session, permissions, the coverage audit's banner, the
template. One fetch counts the queries; then `--runs` timed fetches (median). The raw side is the SQL
the page needs to show its data, written by hand and run through the same connection, timed the same
way: the queue's count and its page of rows (one indexed range scan of the open requests), the request
page's request, progress counts, page of items, conflicts, history and notices, the dashboard's eight
aggregates. The ratio page/raw is what the admin adds (sessions, permissions, ORM, templates) on top of
the database's work. Goal: each page under a second.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_admin"
TENANTS = 10
GOAL_MS = 1000.0
# Written out, as the partial index's predicate is, so that the planner sees it implied.
OPEN = "NOT status IN ('completed', 'refused', 'closed')"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=100_000, help="subjects, and requests (one each)")
    parser.add_argument("--per-subject", type=int, default=10, help="records per subject")
    parser.add_argument("--runs", type=int, default=7, help="timed fetches per page (median)")
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    parser.add_argument("--slowest", action="store_true", help="print each page's slowest queries and their plans")
    return parser.parse_args()


def _sql(statement: str, params=None) -> int:
    """Run a statement; `%%` stands for `%` whether or not it has parameters."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params if params is not None else ())
        return cursor.rowcount


def _fetch(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params if params is not None else ())
        return cursor.fetchall()


# --- the store -------------------------------------------------------------------------------------------

def _store_shape(subjects: int, per_subject: int) -> bool:
    from dsr.models import SubjectRequest
    from memory.models import Record

    return (SubjectRequest.objects.count() == subjects and Record.objects.count() == subjects * per_subject)


def _store_build(subjects: int, per_subject: int) -> None:
    from django.db import connection, transaction

    from memory.services.tokens import tenant_get_or_create
    from retention.services import content_class_create, rule_create

    started = time.perf_counter()
    for i in range(1, TENANTS + 1):
        tenant = tenant_get_or_create(name=f"bench-{i}")
        content_class_create(tenant=tenant, name="chat", actor="bench")
        ledger = content_class_create(tenant=tenant, name="trade-ledger", actor="bench")
        rule_create(tenant=tenant, content_class=ledger, kind="regulatory", duration_days=7 * 365 + 2,
                    authority="SEC 17a-4", mode="compliance", protects="content", actor="bench")
    p = {"subjects": subjects, "records": subjects * per_subject, "tenants": TENANTS}
    arrays = """
        t AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_tenant WHERE name LIKE 'bench-%%'),
        c AS (SELECT array_agg(id ORDER BY tenant_id) AS ids FROM retention_contentclass WHERE name = 'chat')"""
    with transaction.atomic():
        # Rows written here are consistent by construction: skip the per-row triggers.
        _sql("SET LOCAL session_replication_role = replica")
        _sql(f"""WITH {arrays}
            INSERT INTO memory_subject (tenant_id, ref, created_at)
            SELECT t.ids[(g - 1) %% %(tenants)s + 1], 'subject-' || g, now() FROM generate_series(1, %(subjects)s) g, t""", p)
        _sql(f"""WITH {arrays}
            INSERT INTO memory_scope (tenant_id, parent_id, path, depth, created_at)
            SELECT t.ids[(g - 1) %% %(tenants)s + 1], NULL, 'user:' || g, 1, now() FROM generate_series(1, %(subjects)s) g, t""", p)
        _sql("INSERT INTO memory_scopeclosure (ancestor_id, descendant_id, depth) SELECT id, id, 0 FROM memory_scope")
        # Record g belongs to subject n = (g - 1) % subjects + 1: a subject's rows are `subjects` rows apart.
        _sql(f"""WITH {arrays},
                 s AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_subject),
                 p AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_scope),
                 r AS (SELECT g, (g - 1) %% %(subjects)s + 1 AS n FROM generate_series(1, %(records)s) g)
            INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                       tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                       retained_until, held, lock_protects_content)
            SELECT t.ids[(r.n - 1) %% %(tenants)s + 1], p.ids[r.n], s.ids[r.n], c.ids[(r.n - 1) %% %(tenants)s + 1],
                   'record ' || r.g || ' of subject ' || r.n || ': ' || repeat(md5(r.g::text), 8),
                   md5(r.g || 'c') || md5(r.g || 'k'), md5(r.g || 's'), 'hot', now() - (r.g %% 720) * interval '1 hour',
                   NULL, NULL, false, NULL, NULL, false, false
            FROM r, s, p, t, c ORDER BY r.g""", p)
        # Request g: subject g, received over two years; the last 45 days' are open in every state.
        _sql(f"""WITH {arrays},
                 s AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_subject),
                 q AS (SELECT g, now() - ((g * 7919) %% 730) * interval '1 day' - (g %% 24) * interval '1 hour' AS rec
                       FROM generate_series(1, %(subjects)s) g)
            INSERT INTO dsr_subjectrequest (tenant_id, subject_id, type, regulation, channel, contact_email, received_at,
                                            due_date, extension_reason, status, identity_verified_by, identity_method,
                                            closing_reason, gaps, created_at, confirmed_at, notified_at)
            SELECT t.ids[(q.g - 1) %% %(tenants)s + 1], s.ids[q.g],
                   (ARRAY['erasure', 'erasure', 'access', 'restriction'])[q.g %% 4 + 1],
                   (ARRAY['gdpr', 'ccpa', 'other'])[q.g %% 3 + 1], 'api', 'subject' || q.g || '@example.org', q.rec,
                   (q.rec + interval '30 days')::date, '',
                   CASE WHEN q.rec > now() - interval '45 days'
                        THEN (ARRAY['received', 'verified', 'planned', 'executing', 'awaiting_legal',
                                    'partially_completed'])[q.g %% 6 + 1]
                        ELSE (ARRAY['completed', 'completed', 'completed', 'completed', 'completed', 'completed',
                                    'completed', 'completed', 'completed', 'completed', 'completed', 'completed',
                                    'completed', 'completed', 'completed', 'closed', 'closed', 'closed', 'closed',
                                    'refused'])[q.g %% 20 + 1] END,
                   '', '', '', '[]'::jsonb, now(),
                   CASE WHEN q.rec <= now() - interval '45 days' OR q.g %% 6 = 5
                        THEN q.rec + (q.g %% 20) * interval '1 day' END,
                   CASE WHEN q.rec <= now() - interval '45 days' THEN q.rec + (q.g %% 20) * interval '1 day' END
            FROM q, t, s ORDER BY q.g""", p)
        # Plans: 10 items per request past verification; one request in 10 keeps a record hidden.
        _sql("""
            INSERT INTO dsr_requestitem (request_id, kind, object_id, artifact_kind, decision, outcome, reason,
                                         deferred_until, forget_event_id, tombstone_id)
            SELECT r.id, 'record', r.id + k * %(subjects)s, '',
                   CASE WHEN k = 0 AND r.id %% 10 = 0 THEN 'hide' ELSE 'erase' END,
                   CASE WHEN r.status IN ('planned', 'executing') THEN 'pending'
                        WHEN k = 0 AND r.id %% 10 = 0 THEN 'hidden' ELSE 'deleted' END,
                   CASE WHEN k = 0 AND r.id %% 10 = 0
                        THEN '{"code": "retention_lock", "authority": "SEC 17a-4"}'::jsonb END,
                   CASE WHEN k = 0 AND r.id %% 10 = 0 THEN now() + ((r.id %% 800) - 30) * interval '1 day' END,
                   NULL, NULL
            FROM dsr_subjectrequest r, generate_series(0, 9) k
            WHERE r.status NOT IN ('received', 'verified')""", p)
        _sql("""
            INSERT INTO dsr_requesttransition (request_id, from_status, to_status, action, actor, note, at)
            SELECT r.id, '', '', a.action, 'bench', '', r.received_at + a.n * interval '1 hour'
            FROM dsr_subjectrequest r,
                 (VALUES (0, 'received'), (1, 'verify_identity'), (2, 'plan'), (3, 'evaluate'), (4, 'confirm')) a(n, action)""")
        _sql("""
            INSERT INTO dsr_retentionconflict (request_id, tenant_id, record_id, code, authority, blocking, locked_until,
                                               status, opened_at, decided_by, justification)
            SELECT r.id, r.tenant_id, r.id, 'retention_lock', 'SEC 17a-4',
                   '[{"type": "rule", "rule_id": 0, "authority": "SEC 17a-4", "mode": "compliance", "until": null}]'::jsonb,
                   r.received_at + interval '7 years',
                   CASE WHEN r.status IN ('completed', 'closed', 'refused') THEN 'upheld' ELSE 'open' END,
                   r.received_at + interval '1 hour', '', ''
            FROM dsr_subjectrequest r WHERE r.id %% 20 = 0 AND r.status NOT IN ('received', 'verified')""")
    with connection.cursor() as cursor:  # autocommit: VACUUM cannot run in a transaction
        for table in ("memory_record", "memory_subject", "memory_scope", "memory_scopeclosure", "dsr_subjectrequest",
                      "dsr_requestitem", "dsr_requesttransition", "dsr_retentionconflict"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(f"built the store in {time.perf_counter() - started:.1f} s")


def _counts() -> str:
    rows = dict(_fetch("""SELECT 'records', count(*) FROM memory_record UNION ALL
                          SELECT 'requests', count(*) FROM dsr_subjectrequest UNION ALL
                          SELECT 'open requests', count(*) FROM dsr_subjectrequest
                              WHERE status NOT IN ('completed', 'refused', 'closed') UNION ALL
                          SELECT 'plan items', count(*) FROM dsr_requestitem UNION ALL
                          SELECT 'history rows', count(*) FROM dsr_requesttransition UNION ALL
                          SELECT 'conflicts', count(*) FROM dsr_retentionconflict"""))
    return ", ".join(f"{n:,} {name}" for name, n in rows.items())


# --- the raw side ----------------------------------------------------------------------------------------

def _raw_queue() -> None:
    _fetch(f"SELECT count(*) FROM dsr_subjectrequest WHERE {OPEN}")
    _fetch("""SELECT r.id, r.effective_due_date, r.status, r.type, r.regulation, t.name, s.ref, r.received_at
              FROM dsr_subjectrequest r JOIN memory_tenant t ON t.id = r.tenant_id
              JOIN memory_subject s ON s.id = r.subject_id
              WHERE NOT r.status IN ('completed', 'refused', 'closed')
              ORDER BY r.effective_due_date, r.id LIMIT 50""")


def _raw_request(request_id: int) -> None:
    _fetch("""SELECT r.*, t.name, s.ref FROM dsr_subjectrequest r JOIN memory_tenant t ON t.id = r.tenant_id
              JOIN memory_subject s ON s.id = r.subject_id WHERE r.id = %s""", [request_id])
    _fetch("""SELECT count(*), count(*) FILTER (WHERE outcome IN ('deleted', 'redacted', 'gone', 'logged')),
                     count(*) FILTER (WHERE outcome = 'hidden'),
                     count(*) FILTER (WHERE deferred_until IS NOT NULL OR outcome = 'notified'),
                     count(*) FILTER (WHERE outcome = 'pending')
              FROM dsr_requestitem WHERE request_id = %s""", [request_id])
    _fetch("SELECT DISTINCT tombstone_id FROM dsr_requestitem WHERE request_id = %s AND tombstone_id IS NOT NULL",
           [request_id])
    _fetch("SELECT * FROM dsr_requestitem WHERE request_id = %s ORDER BY kind DESC, id LIMIT 100", [request_id])
    _fetch("SELECT * FROM dsr_retentionconflict WHERE request_id = %s ORDER BY opened_at, id", [request_id])
    _fetch("SELECT * FROM dsr_requesttransition WHERE request_id = %s ORDER BY at DESC, id DESC LIMIT 501",
           [request_id])
    _fetch("SELECT id, kind, \"to\", subject_line, sent_at, created_at FROM dsr_subjectnotice WHERE request_id = %s",
           [request_id])


def _raw_dashboard() -> None:
    _fetch(f"SELECT status, count(*) FROM dsr_subjectrequest WHERE {OPEN} GROUP BY status")
    _fetch("""SELECT count(*) FILTER (WHERE status = 'open'),
                     count(*) FILTER (WHERE status = 'deferred' AND deferred_to <= current_date + 7)
              FROM dsr_retentionconflict""")
    _fetch(f"""SELECT count(*) FROM dsr_subjectrequest WHERE {OPEN}
               AND effective_due_date BETWEEN current_date AND current_date + 7""")
    _fetch(f"SELECT count(*) FROM dsr_subjectrequest WHERE {OPEN} AND effective_due_date < current_date")
    _fetch("""SELECT date_trunc('week', confirmed_at AT TIME ZONE 'UTC') AS week,
                     count(*) FILTER (WHERE status <> 'partially_completed'),
                     count(*) FILTER (WHERE status = 'partially_completed')
              FROM dsr_subjectrequest WHERE type = 'erasure' AND confirmed_at >= date_trunc('week', now()) - interval '11 weeks'
              GROUP BY 1""")
    deferred = """FROM dsr_requestitem i JOIN dsr_subjectrequest r ON r.id = i.request_id
                  WHERE i.kind = 'record' AND i.decision = 'hide' AND i.outcome = 'hidden' AND r.type = 'erasure'
                  AND i.deferred_until IS NOT NULL AND i.deferred_until <= now() + interval '30 days'"""
    _fetch(f"SELECT count(*) {deferred}")
    _fetch(f"SELECT i.*, r.type {deferred} ORDER BY i.deferred_until, i.id LIMIT 10")


# --- measuring -------------------------------------------------------------------------------------------

def _median_ms(fn, runs: int) -> float:
    fn()  # warm: plans, caches, the first render of each template
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _page(client, url: str, runs: int, slowest: bool) -> tuple[int, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    if slowest:
        for query in sorted(captured.captured_queries, key=lambda q: -float(q["time"]))[:2]:
            print(f"      {float(query['time']) * 1000:7.1f} ms  {query['sql'][:150]}")
            if float(query["time"]) > 0.005 and query["sql"].startswith("SELECT"):
                for (line,) in _fetch("EXPLAIN (ANALYZE, COSTS OFF) " + query["sql"])[:12]:
                    print(f"                 {line}")

    def fetch():
        assert client.get(url).status_code == 200

    return len(captured), _median_ms(fetch, runs)


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
    import warnings

    warnings.filterwarnings("ignore", category=RuntimeWarning, message=".*LEDGER_SIGNING_PASSPHRASE.*")
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    if not (args.reuse and _store_shape(args.subjects, args.per_subject)):
        if args.reuse:
            sys.exit("bench_admin: --reuse, but the database does not hold a store of this shape; run without --reuse.")
        _store_build(args.subjects, args.per_subject)
    user, created = User.objects.get_or_create(username="bench-operator", defaults={"is_staff": True})
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)

    # The request page of a request with a full plan, a conflict and a history.
    request_id = _fetch("""SELECT r.id FROM dsr_subjectrequest r JOIN dsr_retentionconflict c ON c.request_id = r.id
                           WHERE r.status = 'awaiting_legal' ORDER BY r.id LIMIT 1""")[0][0]
    subject_ref = _fetch("SELECT s.ref FROM dsr_subjectrequest r JOIN memory_subject s ON s.id = r.subject_id "
                         "WHERE r.id = %s", [request_id])[0][0]
    tenant_id = _fetch("SELECT min(id) FROM memory_tenant WHERE name LIKE 'bench-%%'")[0][0]
    version = _fetch("SHOW server_version")[0][0]
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {_counts()}")
    print(f"each page: queries counted on one fetch, then the median of {args.runs} fetches as an operator\n")

    pages = [
        ("queue (open, most urgent first)", "/admin/dsr/subjectrequest/", _raw_queue),
        ("request page", f"/admin/dsr/subjectrequest/{request_id}/change/", lambda: _raw_request(request_id)),
        ("dashboard (admin index)", "/admin/", _raw_dashboard),
    ]
    variants = [
        ("queue: all requests", "/admin/dsr/subjectrequest/?queue=all"),
        ("queue: overdue", "/admin/dsr/subjectrequest/?queue=overdue"),
        ("queue: status completed", "/admin/dsr/subjectrequest/?status__exact=completed"),
        ("queue: type + regulation", "/admin/dsr/subjectrequest/?type__exact=access&regulation__exact=ccpa"),
        ("queue: one tenant", f"/admin/dsr/subjectrequest/?tenant__id__exact={tenant_id}"),
        ("queue: search a subject", f"/admin/dsr/subjectrequest/?q={subject_ref}"),
        ("queue: search a request id", f"/admin/dsr/subjectrequest/?q={request_id}"),
        ("progress JSON (polled)", f"/admin/dsr/subjectrequest/{request_id}/progress/"),
        ("conflicts queue (open)", "/admin/dsr/retentionconflict/"),
        ("records list (1M rows)", "/admin/memory/record/"),
    ]
    header = f"  {'page':<34} {'queries':>7} {'page ms':>9} {'raw SQL ms':>11} {'page/raw':>9}  goal < {GOAL_MS:.0f} ms"
    print(header)
    worst = 0.0
    for name, path, raw in pages:
        queries, page_ms = _page(client, path, args.runs, args.slowest)
        raw_ms = _median_ms(raw, args.runs)
        worst = max(worst, page_ms)
        print(f"  {name:<34} {queries:>7} {page_ms:>9.1f} {raw_ms:>11.2f} {page_ms / raw_ms:>9.1f}  "
              f"{'met' if page_ms < GOAL_MS else 'NOT met'}")
    print("\n  other views of the same pages (no raw side):")
    for name, path in variants:
        queries, page_ms = _page(client, path, args.runs, args.slowest)
        worst = max(worst, page_ms)
        print(f"  {name:<34} {queries:>7} {page_ms:>9.1f}")
    print(f"\nslowest page: {worst:.1f} ms (goal: every page under {GOAL_MS:.0f} ms: "
          f"{'met' if worst < GOAL_MS else 'NOT met'})")


if __name__ == "__main__":
    main()
