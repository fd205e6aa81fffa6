"""Soft forget of many subjects: the guarded service against one raw SQL UPDATE, in the same run.

    .venv/bin/python bench/bench_forget.py            # builds the store, measures, prints the ratio
    .venv/bin/python bench/bench_forget.py --reuse    # keeps the store of an earlier run (skips ~1 min)
    .venv/bin/python bench/bench_forget.py --profile  # also: where the service's time goes

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench, a database
this script drops and re-creates: its name must contain "bench"): one tenant, 100,000 subjects, 1,000,000
records of ~300 bytes, 10 per subject, a subject's rows spread across the table (record g belongs to
subject (g - 1) % 100,000 + 1). Written set-based with INSERT ... SELECT generate_series; commitments and
salts are md5() hex placeholders of the right shape (nothing here verifies them); no tags, no derived
artifacts (so neither side has lineage to follow). The content class "trade-ledger" has a 7-year
SEC 17a-4 rule (created through the retention service); each subject's first record (10% of the table)
is of that class and carries the lock the engine would compute (retained_until = created_at + 7 years,
lock_protects_content), the other 90% are "chat" with no rule. The forgotten subjects are drawn from
all subjects, so 1 row in 10 that the service hides is locked: `soft` stays permitted under a lock, so
the expected refusals are 0 (counted and checked), but the guard decides every row and the trigger's
WHEN clause sees the locked ones.

Each round takes a fresh set of 10,000 subjects (100,000 rows) and, in alternating order:
  service: `records_forget(target=ForgetTarget(subjects=...), mode="soft")`, 10,000 subjects per call
           (the service's limit, MAX_TARGET_ITEMS; `--subjects-per-call` to split), which reads and decides
           every row, writes the forget event and the signed tombstone (statement, salts, log append), then
           runs its batched UPDATEs, all in one transaction;
  raw:     one `UPDATE memory_record SET forgotten_at = now(), erasure_pending = true
           WHERE subject_id = ANY(%s)` in one transaction, given the subject ids;
and after each side resets the same rows (forgotten_at, erasure_pending, forget_event back to NULL/false:
the guard trigger refuses to clear forgotten_at on a locked row, so the reset runs with
session_replication_role = replica, which needs a superuser) and VACUUMs the table, so that both sides
start from the same state. Medians over the rounds; the ratio is service rows/s over raw rows/s (goal 0.5).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import statistics
import sys
import time
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench"
TENANT = "bench"
SEVEN_YEARS = 7 * 365 + 2
GOAL = 0.5

RAW_UPDATE = "UPDATE memory_record SET forgotten_at = now(), erasure_pending = true WHERE subject_id = ANY(%s)"
RESET = ("UPDATE memory_record SET forgotten_at = NULL, erasure_pending = false, forget_event_id = NULL "
         "WHERE subject_id = ANY(%s)")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=100_000, help="subjects in the store")
    parser.add_argument("--per-subject", type=int, default=10, help="records per subject")
    parser.add_argument("--forget", type=int, default=10_000, help="subjects forgotten per round")
    parser.add_argument("--subjects-per-call", type=int, default=10_000,
                        help="subjects per records_forget call (the service takes at most 10,000)")
    parser.add_argument("--rounds", type=int, default=3, help="0: no measurement (with --profile: only the profile)")
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    parser.add_argument("--profile", action="store_true",
                        help="then, on one more set of subjects: the service's time per step, and cProfile's top")
    parser.add_argument("--seed", type=int, default=17)
    return parser.parse_args()


# --- the database --------------------------------------------------------------------------------------

def _database_ensure(url: str, *, fresh: bool) -> None:
    """Create the bench database (dropping it first when `fresh`), through the server's `postgres` database."""
    import psycopg

    parts = urlsplit(url)
    name = unquote(parts.path.lstrip("/"))
    if parts.scheme not in ("postgres", "postgresql", "pgsql") or not name:
        sys.exit(f"bench_forget: DATABASE_URL must name a PostgreSQL database, not {parts.scheme}://…")
    if fresh and "bench" not in name:
        sys.exit(f"bench_forget: refusing to drop and re-create {name!r}: use a database whose name contains "
                 "'bench', or --reuse.")
    admin = psycopg.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
                            user=unquote(parts.username or "postgres"),
                            password=unquote(parts.password) if parts.password else None,
                            dbname="postgres", autocommit=True)
    with admin:
        quoted = psycopg.sql.Identifier(name)
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and fresh:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(quoted))
            exists = None
        if not exists:
            admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(quoted))


def _sql(statement: str, params=None):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def _fetch(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def _store_shape(subjects: int, per_subject: int) -> bool:
    from memory.models import Record, Subject, Tenant

    tenant = Tenant.objects.filter(name=TENANT).first()
    return (tenant is not None and Subject.objects.filter(tenant=tenant).count() == subjects
            and Record.objects.filter(tenant=tenant).count() == subjects * per_subject
            and not Record.objects.filter(tenant=tenant, forgotten_at__isnull=False).exists())


def _store_build(subjects: int, per_subject: int) -> None:
    from django.db import transaction

    from memory.services.tokens import tenant_get_or_create
    from retention.models import RuleKind, RuleMode, RuleProtects
    from retention.services import content_class_create, rule_create

    records = subjects * per_subject
    started = time.perf_counter()
    tenant = tenant_get_or_create(name=TENANT)
    chat = content_class_create(tenant=tenant, name="chat", actor="bench")
    ledger = content_class_create(tenant=tenant, name="trade-ledger", actor="bench")
    rule_create(tenant=tenant, content_class=ledger, kind=RuleKind.REGULATORY, duration_days=SEVEN_YEARS,
                authority="SEC 17a-4", mode=RuleMode.COMPLIANCE, protects=RuleProtects.CONTENT, actor="bench")
    params = {"tenant": tenant.pk, "subjects": subjects, "records": records, "chat": chat.pk, "ledger": ledger.pk,
              "days": SEVEN_YEARS}
    with transaction.atomic():
        # Rows written here are consistent by construction: skip the per-row foreign-key triggers.
        _sql("SET LOCAL session_replication_role = replica")
        _sql("INSERT INTO memory_subject (tenant_id, ref, created_at) "
             "SELECT %(tenant)s, 'subject-' || g, now() FROM generate_series(1, %(subjects)s) g", params)
        _sql("INSERT INTO memory_scope (tenant_id, parent_id, path, depth, created_at) "
             "SELECT %(tenant)s, NULL, 'user:' || g, 1, now() FROM generate_series(1, %(subjects)s) g", params)
        _sql("INSERT INTO memory_scopeclosure (ancestor_id, descendant_id, depth) "
             "SELECT id, id, 0 FROM memory_scope WHERE tenant_id = %(tenant)s", params)
        # Record g: subject and scope (g - 1) % subjects + 1 (a subject's rows are `subjects` rows apart);
        # the subject's first record (g <= subjects) is a locked trade, the others are chat.
        _sql("""
            WITH s AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_subject WHERE tenant_id = %(tenant)s),
                 p AS (SELECT array_agg(id ORDER BY id) AS ids FROM memory_scope WHERE tenant_id = %(tenant)s),
                 r AS (SELECT g, (g - 1) %% %(subjects)s + 1 AS n, g <= %(subjects)s AS locked,
                              now() - (g %% 720) * interval '1 hour' AS created
                       FROM generate_series(1, %(records)s) g)
            INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                       tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                       retained_until, held, lock_protects_content)
            SELECT %(tenant)s, p.ids[r.n], s.ids[r.n], CASE WHEN r.locked THEN %(ledger)s ELSE %(chat)s END,
                   'record ' || r.g || ' of subject ' || r.n || ': ' || repeat(md5(r.g::text), 8),
                   md5(r.g || 'c') || md5(r.g || 'k'), md5(r.g || 's'), 'hot', r.created, NULL, NULL, false, NULL,
                   CASE WHEN r.locked THEN r.created + %(days)s * interval '1 day' END, false, r.locked
            FROM r, s, p ORDER BY r.g
        """, params)
    from django.db import connection

    with connection.cursor() as cursor:  # autocommit: VACUUM cannot run in a transaction
        for table in ("memory_record", "memory_subject", "memory_scope", "memory_scopeclosure"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(f"built the store: {subjects:,} subjects, {records:,} records in {time.perf_counter() - started:.1f} s")


# --- the two sides -------------------------------------------------------------------------------------

def _prepare() -> None:
    """The same starting point for each measured side: no dirty pages from the previous step."""
    _sql("CHECKPOINT")


def _reset(subject_ids: list[int]) -> None:
    from django.db import connection, transaction

    with transaction.atomic():
        # The guard refuses to clear forgotten_at on a locked row (a reset is not a path the product has).
        _sql("SET LOCAL session_replication_role = replica")
        _sql(RESET, [subject_ids])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM memory_record")


def _forgotten_rows(subject_ids: list[int]) -> int:
    return _fetch("SELECT count(*) FROM memory_record WHERE subject_id = ANY(%s) AND forgotten_at IS NOT NULL",
                  [subject_ids])[0][0]


def _run_service(tenant, refs: list[str], per_call: int) -> tuple[float, int, int]:
    from memory.services import ForgetTarget, records_forget

    hidden = refused = 0
    started = time.perf_counter()
    for start in range(0, len(refs), per_call):
        result = records_forget(tenant=tenant, target=ForgetTarget(subjects=tuple(refs[start:start + per_call])),
                                mode="soft", actor="bench", reason="bench_forget", authority="GDPR Art. 17",
                                path="bench")
        hidden += len(result.event.outcomes["hidden"])
        refused += len(result.event.outcomes["refused"])
    return time.perf_counter() - started, hidden, refused


def _run_raw(subject_ids: list[int]) -> tuple[float, int]:
    from django.db import transaction

    started = time.perf_counter()
    with transaction.atomic():
        changed = _sql(RAW_UPDATE, [subject_ids])
    return time.perf_counter() - started, changed


# --- where the service's time goes ---------------------------------------------------------------------

class Phases:
    """Time per step of `records_forget`, by wrapping the module functions it calls (bench-only: nothing in
    memory/ or tombstones/ changes). For each step: its wall time, and the part of it spent in
    `cursor.execute` (psycopg's client-side query conversion, the round trip and the server's work), of
    which psycopg's conversion of the query text alone."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.db: dict[str, float] = {}
        self.convert: dict[str, float] = {}
        self.queries: dict[str, int] = {}
        self._stack: list[str] = ["(elsewhere)"]
        self._patched: list[tuple[object, str, object]] = []

    def _add(self, table: dict, seconds: float) -> None:
        table[self._stack[-1]] = table.get(self._stack[-1], 0.0) + seconds

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        @wraps(original)
        def timed(*args, **kwargs):
            self._stack.append(label)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._stack.pop()
                self.wall[label] = self.wall.get(label, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed)
        self._patched.append((owner, name, original))

    def wrap_convert(self, cls) -> None:
        original = cls.__dict__["convert"]

        @wraps(original)
        def convert(query_self, *args, **kwargs):
            started = time.perf_counter()
            try:
                return original(query_self, *args, **kwargs)
            finally:
                self._add(self.convert, time.perf_counter() - started)

        cls.convert = convert
        self._patched.append((cls, "convert", original))

    def _execute(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self._add(self.db, time.perf_counter() - started)
            self.queries[self._stack[-1]] = self.queries.get(self._stack[-1], 0) + 1

    @contextmanager
    def installed(self):
        from django.db import connection
        from django.db.transaction import Atomic
        from psycopg import _queries

        from memory.models import ForgetEvent
        from memory.services import forget, targets
        from tombstones.services import issue

        self.wrap(forget, "_rows", "1 read the target's rows (ORM values_list)")
        self.wrap(forget, "_decide", "2 decide, per row")
        self.wrap(forget, "_refusal_reasons", "2 refusal reasons")
        self.wrap(forget, "_artifacts_of", "3 find derived artifacts (lineage)")
        self.wrap(targets.ForgetTarget, "describe", "4 forget event: target.describe")
        self.wrap(forget, "_outcomes_by_kind", "4 forget event: outcomes JSON")
        self.wrap(type(ForgetEvent.objects), "bulk_create", "4 forget event: INSERT")
        self.wrap(forget, "_copies_track", "5 track copies (archives, fleet)")
        self.wrap(forget, "_tombstone_issue", "6 tombstone, all of it")
        self.wrap(issue, "statement_payload", "6a tombstone: validate and canonicalize (RFC 8785), one pass")
        self.wrap(issue, "salts_check", "6c tombstone: check the salts")
        if hasattr(issue, "log_lock"):
            self.wrap(issue, "log_lock", "6d tombstone: lock the log head")
        self.wrap(issue, "log_append", "6d tombstone: log append")
        self.wrap(issue.RowWrites, "send", "6e tombstone: write tombstone, salts, nodes, head")
        self.wrap(forget, "_execute", "7 the UPDATE batches")
        self.wrap(Atomic, "__exit__", "8 transaction exit (COMMIT)")
        # Nested inside whatever step runs a query. Django's default cursor binds on the client: psycopg
        # splits the SQL text at its placeholders and merges the quoted parameters into it.
        for cls in (_queries.PostgresQuery, _queries.PostgresClientQuery):
            self.wrap_convert(cls)
        try:
            with connection.execute_wrapper(self._execute):
                yield self
        finally:
            for owner, name, original in reversed(self._patched):
                setattr(owner, name, original)

    def report(self, total: float) -> str:
        lines = [f"  {'step (wall time includes its sub-steps)':<46} {'wall s':>7} {'share':>6} {'queries':>7} "
                 f"{'execute s':>9} {'psycopg s':>9}"]
        for label in sorted(set(self.wall) | set(self.db)):
            wall = self.wall.get(label)
            lines.append(f"  {label:<46} {wall if wall is not None else float('nan'):7.3f} "
                         f"{(wall or 0) / total:6.1%} {self.queries.get(label, 0):7d} {self.db.get(label, 0):9.3f} "
                         f"{self.convert.get(label, 0):9.3f}")
        lines.append(f"  {'(records_forget, total)':<46} {total:7.3f}")
        lines.append("  execute s: time in cursor.execute directly under that step (psycopg's conversion of the "
                     "query text,\n  the round trip, the server's work); psycopg s: of which the conversion alone.")
        return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------------

def main() -> None:
    args = _args()
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
    # The bench database is throwaway: its signing keys need no passphrase of the machine's.
    os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only-signing-passphrase")
    _database_ensure(url, fresh=not args.reuse)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from memory.models import Tenant

    call_command("migrate", verbosity=0)
    if not (args.reuse and _store_shape(args.subjects, args.per_subject)):
        if args.reuse:
            sys.exit("bench_forget: --reuse, but the database does not hold an untouched store of this shape; "
                     "run without --reuse.")
        _store_build(args.subjects, args.per_subject)
    tenant = Tenant.objects.get(name=TENANT)
    ids_by_ref = dict(_fetch("SELECT ref, id FROM memory_subject WHERE tenant_id = %s", [tenant.pk]))
    rows_per_round = args.forget * args.per_subject
    version = _fetch("SHOW server_version")[0][0]
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds of {args.forget:,} subjects ({rows_per_round:,} rows, 10% of them locked), "
          f"{-(-args.forget // args.subjects_per_call)} records_forget call(s) per round")

    rng = random.Random(args.seed)
    extra = 1 if args.profile else 0
    drawn = rng.sample(range(1, args.subjects + 1), args.forget * (args.rounds + extra))
    rounds = [drawn[i * args.forget:(i + 1) * args.forget] for i in range(args.rounds + extra)]
    service_rates, raw_rates = [], []
    for number, ordinals in enumerate(rounds[:args.rounds], start=1):
        refs = [f"subject-{n}" for n in ordinals]
        subject_ids = [ids_by_ref[ref] for ref in refs]
        order = ("service", "raw") if number % 2 else ("raw", "service")
        for side in order:
            _prepare()
            if side == "service":
                seconds, hidden, refused = _run_service(tenant, refs, args.subjects_per_call)
                assert refused == 0, f"soft forget refused {refused} rows"
                rows = hidden
                service_rates.append(rows / seconds)
            else:
                seconds, rows = _run_raw(subject_ids)
                raw_rates.append(rows / seconds)
            assert rows == rows_per_round == _forgotten_rows(subject_ids), (side, rows, rows_per_round)
            print(f"  round {number} {side:<7}: {rows:,} rows in {seconds:6.3f} s = {rows / seconds:>9,.0f} rows/s")
            _reset(subject_ids)

    if service_rates:
        _summary(args, service_rates, raw_rates)
    if args.profile:
        _profile(tenant, ids_by_ref, rounds[-1], args, rows_per_round)
    connection.close()


def _summary(args, service_rates: list[float], raw_rates: list[float]) -> None:
    rows_per_round = args.forget * args.per_subject
    service, raw = statistics.median(service_rates), statistics.median(raw_rates)
    ratio = service / raw
    # Each round's two sides run back to back: their ratio is less exposed to the machine's other load.
    paired = statistics.median(s / r for s, r in zip(service_rates, raw_rates))
    print(f"\nsoft forget of {args.forget:,} subjects ({rows_per_round:,} rows) in {args.subjects * args.per_subject:,}"
          f" records, median of {args.rounds}:")
    print(f"  service (records_forget): {service:>9,.0f} rows/s")
    print(f"  raw SQL (one UPDATE):     {raw:>9,.0f} rows/s")
    print(f"  ratio service/raw:        {ratio:.2f}  (goal {GOAL}: {'met' if ratio >= GOAL else 'NOT met'}); "
          f"median of the rounds' own ratios: {paired:.2f}")


def _profile(tenant, ids_by_ref: dict[str, int], ordinals: list[int], args, rows_per_round: int) -> None:
    """One more set of subjects: the service timed per step, the raw UPDATE on the same rows for scale,
    then the service again under cProfile."""
    refs = [f"subject-{n}" for n in ordinals]
    subject_ids = [ids_by_ref[r] for r in refs]
    _prepare()
    phases = Phases()
    with phases.installed():
        seconds, _, _ = _run_service(tenant, refs, args.subjects_per_call)
    _reset(subject_ids)
    _prepare()
    raw_seconds, _ = _run_raw(subject_ids)
    _reset(subject_ids)
    print(f"\nwhere the service's time goes (one more set of {args.forget:,} subjects, {rows_per_round:,} rows; "
          f"the raw UPDATE took {raw_seconds:.3f} s on the same rows just after):")
    print(phases.report(seconds))
    _prepare()
    profiler = cProfile.Profile()
    profiler.enable()
    seconds, _, _ = _run_service(tenant, refs, args.subjects_per_call)
    profiler.disable()
    _reset(subject_ids)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
    print(f"\ncProfile of the same round ({seconds:.2f} s under the profiler), by cumulative time:")
    print("\n".join(out.getvalue().splitlines()[:60]))

if __name__ == "__main__":
    main()
