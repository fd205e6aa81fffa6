"""Erase 1,000 subjects through the erasure workflow on one real Celery worker, against doing the same
deletes with raw SQL, in the same run.

    .venv/bin/python bench/bench_workflow.py                 # builds the store, measures, prints the ratio
    .venv/bin/python bench/bench_workflow.py --reuse         # keeps the store of an earlier run
    .venv/bin/python bench/bench_workflow.py --reuse --subjects 100 --profile 30   # a quick run, and a profile
    .venv/bin/python bench/bench_workflow.py --reuse --pool threads --concurrency 2   # another pool (not the goal's)

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_workflow, a
database this script drops and re-creates; `--reuse` vacuums and analyzes it first): bench_forget.py's
1,000,000 records over 100,000 subjects (10 each; each subject's first record is a trade under a 7-year write-once compliance rule), plus, for the
subjects measured here, 10 derived artifacts each (one summary per record, with lineage). A run erases
the subjects it measures; `--reuse` takes untouched ones, and builds a new store when too few are left.

Workflow side: 1,000 verified GDPR erasure requests; one worker (`--pool=solo`: one process, one task at a
time; Redis broker, a database connection kept from task to task) runs every step of every request: plan
and evaluate (one transaction), execute (the one guarded forget, one per decision: a signed tombstone each,
derivatives erased), confirm (every read path probed), notify (the outcome mail, with the
receipts, to Django's locmem mail backend). The steps that are due run in the same task (dsr/tasks.py),
each in its own transaction, for a group of up to LEDGER_WORKFLOW_GROUP_SIZE started requests due at the
same step (dsr/services/workflow.py); a round's requests are started together, as an operator's selection in
the admin is (`workflows_start`: the marks, the history rows, one message per group of requests). Timed from
that start to the last notice.

Raw side: for each of 1,000 other subjects, one transaction doing the same deletes: the derived
artifacts (their lineage cascades), the nine unlocked records, a hide of the locked one, and one audit
row; no tombstone, no confirmation, no notice. The two sides alternate in rounds (`--rounds`, 10: a tenth
of the raw side, then a tenth of the requests, started at once), so that both sample the same moments of
a load that moves (other benchmarks share the two cores). Subjects per second on each side, the ratio
(goal 0.3) and the median of the rounds' ratios, with the load average.

The goal's figure is the solo pool's: one process doing the work one request group at a time, as the raw side
does with one connection. `--pool threads|prefork --concurrency N` runs the same worker with that pool instead
(Celery's default for a worker is prefork with one child per core), so that what a deployment's concurrency
adds can be measured beside it; the figures it prints say which pool ran, and are not the goal's.

`--profile N` then runs N more requests in this process, step by step, and prints per step its time, its
queries and the part of it spent in cursor.execute, and the same for the parts other apps own
(records_forget and its parts, receipts_build and its checkpoint, the confirmation probes) and for the
COMMITs. The requests are started together, so the first request's steps run for a group and the others'
find their work done: the figures per request are the group's cost shared out.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_workflow"
GOAL = 0.3
QUEUE = "ledger-bench-workflow"
# How often the timed side looks whether a round's requests are all done (see `_Worker.run`).
POLL_SECONDS = 0.005


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=1000, help="subjects erased on each side")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--rounds", type=int, default=10, help="rounds alternating the raw side and the workflow")
    parser.add_argument("--pool", choices=("solo", "threads", "prefork"), default="solo",
                        help="the worker's pool (the goal is measured with solo)")
    parser.add_argument("--concurrency", type=int, default=1, help="the pool's size, for threads and prefork")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="then run N more subjects' requests in this process, step by step, and print where "
                             "a request's time and queries go")
    return parser.parse_args()


def _store_reusable(needed: int) -> bool:
    """A store an earlier run built (its 100,000 subjects), with `needed` subjects still untouched: a run
    erases the subjects it measures, so bench_forget's own check (no record forgotten) no longer holds."""
    from bench_forget import TENANT, _fetch

    from memory.models import Subject, Tenant

    tenant = Tenant.objects.filter(name=TENANT).first()
    if tenant is None or Subject.objects.filter(tenant=tenant).count() != 100_000:
        return False
    untouched = _fetch("SELECT count(*) FROM (SELECT subject_id FROM memory_record WHERE tenant_id = %s "
                       "GROUP BY subject_id HAVING bool_and(forgotten_at IS NULL) AND count(*) = 10) s", [tenant.pk])
    return untouched[0][0] >= needed


def _setup(url: str, reuse: bool, needed: int) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = QUEUE
    os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only-passphrase")
    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
    import bench_forget

    bench_forget._database_ensure(url, fresh=not reuse)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if reuse and not _store_reusable(needed):
        from django.db import connection

        print("the store cannot be reused (not built, or too few subjects left untouched): building a new one")
        connection.close()
        bench_forget._database_ensure(url, fresh=True)
        call_command("migrate", verbosity=0)
        reuse = False
    if not reuse:
        bench_forget._store_build(100_000, 10)
    else:
        # A reused store holds the dead rows of the runs before it, and nothing may have vacuumed them (this
        # workplace's PostgreSQL runs with autovacuum off): measured on one store, run after run without this,
        # the worker's PostgreSQL backend spent 2.01 ms of CPU a request, 1.71 right after a VACUUM ANALYZE.
        # Each run starts from the state autovacuum would keep, on both sides alike (~2 s, not timed).
        bench_forget._sql("VACUUM ANALYZE")
    # The signing keys, as a deployment has them from its first day: in a new store the first forget would
    # otherwise create them (key generation and scrypt, ~0.4 s measured in the first round), once per
    # deployment, not a cost of erasing subjects; and the worker opens at its start only keys that exist.
    from tombstones.services import keys_ensure

    keys_ensure()


def subjects_untouched(tenant, count: int) -> list[int]:
    """The first `count` subjects whose ten records are all still there (a run erases the ones it measures)."""
    from bench_forget import _fetch

    return [row[0] for row in _fetch(
        "SELECT subject_id FROM memory_record WHERE tenant_id = %s GROUP BY subject_id "
        "HAVING bool_and(forgotten_at IS NULL) AND count(*) = 10 ORDER BY subject_id LIMIT %s", [tenant.pk, count])]


def _derived_add(subject_ids: list[int]) -> None:
    """One summary per record of these subjects, with lineage: 10 derived artifacts per subject."""
    from bench_forget import _sql

    _sql("""
        WITH src AS (SELECT id, tenant_id, scope_id FROM memory_record WHERE subject_id = ANY(%s)),
             made AS (
                INSERT INTO memory_derivedartifact (tenant_id, scope_id, kind, content, vector, holder, created_at,
                                                    forgotten_at, redacted_at, forget_event_id)
                SELECT tenant_id, scope_id, 'summary', 'summary of ' || id, NULL, '', now(), NULL, NULL, NULL
                FROM src ORDER BY id RETURNING id, content)
        INSERT INTO memory_lineage (artifact_id, source_id)
        SELECT made.id, split_part(made.content, ' ', 3)::bigint FROM made
    """, [subject_ids])
    # Statistics, as autovacuum would gather them within a minute of such an insert: without them the planner
    # takes these tables (empty when last seen) for tiny and scans them whole for every lookup, on both sides
    # (measured: ~1 ms of each request's time went to sequential scans of the lineage).
    _sql("ANALYZE memory_derivedartifact, memory_lineage")


def _requests_create(tenant, subject_ids: list[int], *, started: bool = False) -> list[int]:
    """Verified erasure requests; `started`: with their workflow started (`workflow_start`'s mark), which
    is what lets a step's group claim them. The timed run starts each round's requests just before it
    enqueues them (`_Worker.run`): started earlier, the first round's groups would take later rounds' work."""
    from django.utils import timezone

    from dsr.models import RequestStatus, SubjectRequest

    now = timezone.now()
    made = SubjectRequest.objects.bulk_create([
        SubjectRequest(tenant=tenant, subject_id=sid, type="erasure", regulation="gdpr", received_at=now,
                       due_date=now.date(), contact_email="subject@example.org", status=RequestStatus.VERIFIED,
                       identity_verified_by="bench", identity_method="bench", identity_verified_at=now,
                       workflow_started_at=now if started else None)
        for sid in subject_ids])
    return [r.pk for r in made]


def _worker_url(url: str) -> str:
    """The worker keeps its database connection from task to task, as a deployed worker should
    (DATABASE_URL `?conn_max_age=600&conn_health_checks=true`; the raw side, too, uses one connection for
    all its subjects). With Django's default (CONN_MAX_AGE = 0) Celery closes it after every task, and
    each request then pays a new PostgreSQL backend and its cold catalog caches: ~0.25 s per request on
    these machines under load, more than the workflow's own work. A DATABASE_URL that says otherwise wins."""
    if "conn_max_age" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}conn_max_age=600&conn_health_checks=true"


class _Worker:
    """One Celery worker on the bench's queue, for the whole run: `--pool=solo` unless told otherwise."""

    def __init__(self, pool: str = "solo", concurrency: int = 1):
        self.pool = [f"--pool={pool}"] + ([f"--concurrency={concurrency}"] if pool != "solo" else [])

    def __enter__(self):
        from config.celery import app

        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(QUEUE)
        self.log = open(ROOT / "var" / "bench-workflow-worker.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", *self.pool, "-Q", QUEUE,
             "--without-gossip", "--without-mingle", "--loglevel=warning"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": _worker_url(os.environ["DATABASE_URL"])},
            stdout=self.log, stderr=subprocess.STDOUT)
        time.sleep(3)  # the worker's own start-up is not the workflow's cost
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()

    def run(self, request_ids: list[int]) -> float:
        """Start these requests at once; seconds until the last one has notified its subject."""
        from dsr.models import SubjectRequest
        from dsr.services.workflow import workflows_start

        # As an operator starts a selection of requests in the admin: the marks, the history rows and one
        # message per group of requests (`workflows_start`), all on the clock.
        requests = list(SubjectRequest.objects.filter(pk__in=request_ids).order_by("pk"))
        # The end is seen by polling every POLL_SECONDS with one small statement (the ids bound as one array):
        # polled every 50 ms, a round was timed on average ~25 ms late (~0.25 ms a request at 100 a round), time
        # that was the poll's, not the workflow's; the poll itself runs in this process, not the worker's.
        # It is a prepared statement on a connection of its own: planned once, not at every poll (planning
        # `id = ANY` of a round's 100 ids took ~0.26 ms of the server's CPU, ~150 times a round: measured with
        # pg_stat_statements, CPU taken from the cores the worker and its backend run on).
        remaining = (f"SELECT EXISTS (SELECT 1 FROM {SubjectRequest._meta.db_table} "
                     "WHERE id = ANY(%s::bigint[]) AND notified_at IS NULL)")
        ids = "{" + ",".join(map(str, request_ids)) + "}"
        with _poll_connection() as poll:
            poll.execute(remaining, [ids], prepare=True)  # prepared and planned before the clock starts
            started = time.perf_counter()
            workflows_start(requests=requests, actor="operator:bench")
            while poll.execute(remaining, [ids], prepare=True).fetchone()[0]:
                if self.process.poll() is not None:
                    sys.exit("bench_workflow: the worker died; see var/bench-workflow-worker.log")
                time.sleep(POLL_SECONDS)
            elapsed = time.perf_counter() - started
        statuses = set(SubjectRequest.objects.filter(pk__in=request_ids).values_list("status", flat=True))
        assert statuses == {"partially_completed"}, statuses
        return elapsed


def _connection(**options):
    """A psycopg connection of its own to the bench's database (the raw side's, the poll's)."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], **options)


def _poll_connection():
    """Autocommit, and its prepared statements keep one generic plan (by default the server plans the first five
    executions anew)."""
    return _connection(autocommit=True, options="-c plan_cache_mode=force_generic_plan")


def _run_raw(subject_ids: list[int]) -> float:
    started = time.perf_counter()
    with _connection() as conn:
        for sid in subject_ids:
            with conn.transaction():
                conn.execute("DELETE FROM memory_derivedartifact WHERE id IN (SELECT artifact_id FROM memory_lineage "
                             "WHERE source_id IN (SELECT id FROM memory_record WHERE subject_id = %s))", [sid])
                conn.execute("UPDATE memory_record SET forgotten_at = now(), erasure_pending = true "
                             "WHERE subject_id = %s AND retained_until > now()", [sid])
                conn.execute("DELETE FROM memory_record WHERE subject_id = %s AND NOT held "
                             "AND (retained_until IS NULL OR retained_until <= now())", [sid])
                conn.execute("INSERT INTO dsr_requesttransition (request_id, from_status, to_status, action, actor, "
                             "note, at) SELECT min(id), '', '', 'raw_erasure', 'bench', %s, now() "
                             "FROM dsr_subjectrequest", [str(sid)])
    return time.perf_counter() - started


class Profile:
    """Where a request's time goes, in this process (no broker): per step, its wall time, its queries and
    the time spent in cursor.execute (the round trip and the server's work); and, across the steps, the
    same for the parts other apps own (wrapped, not changed: bench-only). Parts nest: a tombstone is
    issued inside records_forget."""

    # (module, name, label): the name is patched where the caller looks it up when it calls.
    PARTS = [
        ("dsr.services.workflow", "records_forget_many", "records_forget_many (memory; 1 per group)"),
        ("memory.services.forget", "_rows", "  of which: reading the targets' rows"),
        ("memory.services.forget", "_artifacts_of", "  of which: finding the derived artifacts"),
        ("memory.services.forget", "_tombstone_issue", "  of which: the signed tombstones"),
        # `_issue`: what `tombstone_issue` and `tombstones_issue_many` both call (by its module-level name)
        ("tombstones.services.issue", "_issue", "    of which: issuing them (tombstones/)"),
        ("memory.services.forget", "_execute", "  of which: the destructive statements"),
        ("tombstones.services", "receipts_build", "receipts_build (tombstones; 1 per group)"),
        ("tombstones.services.receipts", "checkpoint_sign", "  of which: a checkpoint"),
        ("dsr.services.workflow", "erasures_confirm", "confirmation probes (memory; 1 per group)"),
    ]

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.db: dict[str, float] = {}
        self.queries: dict[str, int] = {}
        self.commit = 0.0
        self._active: list[str] = []

    def _wrap(self, owner, name: str, label: str, patched: list) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            self._active.append(label)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._active.pop()
                self.wall[label] = self.wall.get(label, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed)
        patched.append((owner, name, original))

    def _execute(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - started
            for label in set(self._active):
                self.db[label] = self.db.get(label, 0.0) + elapsed
                self.queries[label] = self.queries.get(label, 0) + 1

    def run(self, request_ids: list[int]) -> float:
        import importlib

        from django.db import connection

        from dsr.services import workflow
        from dsr.tasks import STEPS

        patched: list = []
        for module, name, label in self.PARTS:
            self._wrap(importlib.import_module(module), name, label, patched)
        steps = {name: (lambda name: lambda **kw: STEPS[name](**kw))(name) for name in STEPS}
        holder = type("Steps", (), {})
        for name, call in steps.items():
            setattr(holder, name, staticmethod(call))
            self._wrap(holder, name, f"step {name}", patched)
        original_commit = connection._commit

        def commit(*args, **kwargs):  # COMMIT is not a cursor.execute: timed on its own, inside its step
            started = time.perf_counter()
            try:
                return original_commit(*args, **kwargs)
            finally:
                self.commit += time.perf_counter() - started
                self.queries["COMMIT"] = self.queries.get("COMMIT", 0) + 1

        connection._commit = commit
        started = time.perf_counter()
        try:
            with connection.execute_wrapper(self._execute):
                for request_id in request_ids:
                    step = workflow.PLAN
                    while step:  # what the worker runs for one delivery
                        step = getattr(holder, step)(request_id=request_id).next_step
        finally:
            connection._commit = original_commit
            for owner, name, original in reversed(patched):
                setattr(owner, name, original)
        return time.perf_counter() - started

    def report(self, n: int, total: float) -> str:
        lines = [f"in-process profile: {n} requests in {total:.2f} s = {1000 * total / n:.1f} ms per request",
                 f"  {'':<46} {'ms/request':>10} {'queries':>8} {'of it in execute, ms':>20}"]
        labels = [label for label in self.wall if label.startswith("step ")] + [label for *_, label in self.PARTS]
        for label in labels:
            lines.append(f"  {label:<46} {1000 * self.wall.get(label, 0.0) / n:10.1f} "
                         f"{self.queries.get(label, 0) / n:8.1f} {1000 * self.db.get(label, 0.0) / n:20.1f}")
        lines.append(f"  {'COMMIT (all transactions, in the steps)':<46} {1000 * self.commit / n:10.1f} "
                     f"{self.queries.get('COMMIT', 0) / n:8.1f}")
        return "\n".join(lines)


def _profile(tenant, subject_ids: list[int]) -> None:
    from config.celery import signing_keys_open

    # As a worker does at start (config/celery.py): else the first group's tombstones and checkpoint would
    # carry the keys' scrypt decryption (~0.1-0.2 s each) and the signing process's start.
    signing_keys_open(start_signing_process=True)
    profile = Profile()
    request_ids = _requests_create(tenant, subject_ids, started=True)
    total = profile.run(request_ids)
    print(profile.report(len(request_ids), total))


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    args = _args()
    _setup(os.environ.get("DATABASE_URL", DEFAULT_URL), args.reuse, 2 * args.subjects + args.profile)
    from bench_forget import TENANT, _fetch
    from memory.models import Tenant

    tenant = Tenant.objects.get(name=TENANT)
    untouched = subjects_untouched(tenant, 2 * args.subjects)
    workflow_side, raw_side = untouched[: args.subjects], untouched[args.subjects:]
    _derived_add(untouched)
    worker_options = _worker_url(os.environ["DATABASE_URL"]).partition("?")[2] or "default"
    print(f"start: {_load()}; worker database: {worker_options}")
    request_ids = _requests_create(tenant, workflow_side)
    # Rounds that alternate the two sides: the machine's load moves during a run of minutes (other
    # benchmarks share its two cores), and each side should sample the same moments of it.
    rounds = max(1, min(args.rounds, args.subjects))
    workflow_seconds = raw_seconds = 0.0
    ratios = []
    with _Worker(args.pool, args.concurrency) as worker:
        for n in range(rounds):
            chunk = slice(n * args.subjects // rounds, (n + 1) * args.subjects // rounds)
            raw = _run_raw(raw_side[chunk])
            flow = worker.run(request_ids[chunk])
            raw_seconds, workflow_seconds = raw_seconds + raw, workflow_seconds + flow
            ratios.append(raw / flow)
            count = len(request_ids[chunk])
            print(f"  round {n + 1}: workflow {count / flow:6.1f}/s, raw {count / raw:6.1f}/s, "
                  f"ratio {raw / flow:.3f} ({_load()})")
    left = _fetch("SELECT count(*) FROM memory_record WHERE subject_id = ANY(%s) AND forgotten_at IS NULL",
                  [workflow_side + raw_side])[0][0]
    assert left == 0, f"{left} records still visible"
    workflow_rate, raw_rate = args.subjects / workflow_seconds, args.subjects / raw_seconds
    pool = "solo" if args.pool == "solo" else f"{args.pool}, concurrency {args.concurrency}"
    print(f"workflow (1 worker, {pool}): {args.subjects} subjects in {workflow_seconds:.1f} s = "
          f"{workflow_rate:,.1f} subjects/s")
    print(f"raw SQL:             {args.subjects} subjects in {raw_seconds:.1f} s = {raw_rate:,.1f} subjects/s")
    ratio = workflow_rate / raw_rate
    # The goal is the solo pool's (the module's docstring): another pool's ratio is printed, not judged.
    verdict = f"goal {GOAL}: {'met' if ratio >= GOAL else 'NOT met'}" if args.pool == "solo" else \
        "the goal is measured with --pool solo"
    print(f"ratio workflow/raw: {ratio:.3f} ({verdict}); median of the rounds' ratios: {statistics.median(ratios):.3f}")
    print(f"end: {_load()}")
    if args.profile:
        profiled = subjects_untouched(tenant, args.profile)
        _derived_add(profiled)
        _profile(tenant, profiled)


if __name__ == "__main__":
    main()
