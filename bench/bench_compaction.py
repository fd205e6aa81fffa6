"""Compaction of hidden records (the sweep, through the one guarded forget) against a raw SQL DELETE of the
same rows, in the same run; and the coverage audit's time over the whole store.

    .venv/bin/python bench/bench_compaction.py            # builds the store, measures, prints the ratio
    .venv/bin/python bench/bench_compaction.py --reuse    # keeps the store of an earlier run (skips ~4 min)
    .venv/bin/python bench/bench_compaction.py --profile  # also: where the sweep's time goes
    .venv/bin/python bench/bench_compaction.py --reuse --workers 2   # also two sweep processes at once, apart

The store (PostgreSQL; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_sweeps, a
database this script drops and re-creates: its name must contain "bench") is bench_forget.py's: one tenant,
100,000 subjects, 1,000,000 records of ~300 bytes, 10% of them (class "trade-ledger") under a 7-year
write-once rule, the rest "chat" with no rule. On top of it: 100,000 chat records (every 9th, spread across
the table) are hidden as a soft forget leaves them (forgotten_at a day ago, erasure_pending, the forget event),
each with 2 derived artifacts (an embedding and a summary, hidden with it, linked by lineage), and 10,000
locked trade records are hidden too: compaction must leave those (the guard decides; both sides skip them).
Both sides start from the same state: after each, the 100,000 rows, their 200,000 artifacts and 200,000
lineage rows are put back from copies (with session_replication_role = replica, which needs a superuser),
the DeletedRecord rows the sweep wrote are removed, the tables VACUUMed and a CHECKPOINT taken.

Each round, in alternating order:
  sweep: `sweep_run_sync(kind="compaction")`: the whole run in this process, batch after batch as a worker
         does them (memory/sweeps/runs.py): per batch of LEDGER_SWEEP_BATCH rows (5,000) one transaction that
         claims them (SELECT ... ORDER BY id LIMIT 5000 FOR UPDATE SKIP LOCKED over the partial index
         record_forgotten_id_idx; it reads what the guard needs of each row), then `records_forget(mode="hard",
         locked=...)`, which decides every row as the claim read it under lock, finds the derived artifacts
         (one lineage query, the ids bound as one array),
         writes the forget event, signs the tombstone (statement with every record and artifact, salts, log
         append), then runs two destructive statements: `DELETE FROM memory_derivedartifact WHERE id IN
         (SELECT unnest(%s))` (lineage by ON DELETE CASCADE) and `WITH gone AS (DELETE FROM memory_record USING
         unnest(ids, event ids) WHERE id = v.id AND <lock ended> RETURNING ...) INSERT INTO memory_deletedrecord ... FROM gone` (tags and
         lineage by cascade; the DeletedRecord rows, the 410 answers, are exactly the rows deleted; its row
         count is checked), then the run's bookkeeping;
  raw:   in one transaction, `DELETE FROM memory_derivedartifact WHERE id IN (SELECT artifact_id FROM
         memory_lineage JOIN memory_record ... WHERE <hidden and unlocked>)` then `DELETE FROM memory_record
         WHERE <hidden and unlocked>` (lineage and tags go by ON DELETE CASCADE).
  sweep xN (with --workers N): N processes, forked once Django is set up, each running `sweep_run_sync` at
         once over the same rows (the design's scale-out: they share the work through SKIP LOCKED); timed from
         when all are ready to when the last is done. Reported apart: the goal's figure is one worker's.
Rows per second count records (the 100,000), medians over the rounds; the ratio is sweep / raw (goal 0.5). Each
reset flips where the 100,000 rows sit: re-inserted at the table's end (~7,500 heap pages) or, after the next
purge and VACUUM, into the free space spread over the table (~64,000 pages, where each side first writes ~450 MB
of full-page images after the CHECKPOINT: both sides by 30-50% slower). Every round's first side meets one layout
and its second side the other, so the rounds must be even (4 by default) for each side to meet each layout as
often; the script also prints the ratio among first runs and among second runs (one layout each).
Each sweep line also gives the CPU time of the process(es) running it: steadier than wall time under load.
Latest figures, the profile and what stands between them and the goal: bench/README.md.

The audit: `retention.audit.coverage_audit()` over the store (1,000,000 ledgered records, every class and
finding counted), timed before the rounds, after them (when it first indexes the 300,000 deletions their
tombstones list) and once more (nothing new to index).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_forget  # noqa: E402  (the shared 1M-record store and the database helpers)
from bench_forget import _database_ensure, _fetch, _sql, _store_build, _store_shape  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_sweeps"
GOAL = 0.5
ELIGIBLE = "forgotten_at IS NOT NULL AND NOT held AND (retained_until IS NULL OR retained_until <= now())"
RAW = [
    f"DELETE FROM memory_derivedartifact WHERE id IN (SELECT l.artifact_id FROM memory_lineage l "
    f"JOIN memory_record r ON r.id = l.source_id WHERE {ELIGIBLE.replace('forgotten_at', 'r.forgotten_at')})",
    f"DELETE FROM memory_record WHERE {ELIGIBLE}",
]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--per-subject", type=int, default=10)
    parser.add_argument("--eligible", type=int, default=100_000, help="hidden unlocked records to purge per round")
    parser.add_argument("--rounds", type=int, default=4,
                        help="an even number: each side runs first in half of the rounds (see the docstring)")
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    parser.add_argument("--profile", action="store_true", help="one more sweep round, timed per step and profiled")
    parser.add_argument("--no-audit", action="store_true", help="skip the audit's timing")
    parser.add_argument("--workers", type=int, default=1,
                        help="also run, in each round, the sweep as this many concurrent processes sharing the work "
                             "through SKIP LOCKED (reported apart: the goal's figure is one worker's)")
    return parser.parse_args()


# --- the store ------------------------------------------------------------------------------------------

def _hidden_build(eligible: int) -> None:
    """Hide `eligible` chat records (every 9th) with 2 artifacts each, and 10,000 locked trades; keep copies."""
    from django.db import connection, transaction
    from django.utils import timezone

    from memory.models import ForgetEvent, ForgetMode, ForgetStatus, Tenant
    import uuid

    started = time.perf_counter()
    tenant = Tenant.objects.get(name=bench_forget.TENANT)
    chat = _fetch("SELECT id FROM retention_contentclass WHERE tenant_id = %s AND name = 'chat'", [tenant.pk])[0][0]
    event = ForgetEvent.objects.create(tenant=tenant, public_id=uuid.uuid4(), actor="bench", path="bench",
                                       target={"bench": "hidden"}, mode=ForgetMode.SOFT,
                                       status=ForgetStatus.FORGOTTEN, outcomes={"hidden": []},
                                       created_at=timezone.now())
    with transaction.atomic():
        _sql("SET LOCAL session_replication_role = replica")
        _sql("CREATE TABLE bench_eligible AS SELECT id FROM memory_record WHERE content_class_id = %s AND id %% 9 = 4 "
             "ORDER BY id LIMIT %s", [chat, eligible])
        _sql("UPDATE memory_record SET forgotten_at = now() - interval '1 day', erasure_pending = true, "
             "forget_event_id = %s WHERE id IN (SELECT id FROM bench_eligible)", [event.pk])
        # Locked and hidden: compaction must leave them (the guard decides on both sides).
        _sql("UPDATE memory_record SET forgotten_at = now() - interval '1 day', erasure_pending = true, "
             "forget_event_id = %s WHERE id IN (SELECT id FROM memory_record WHERE retained_until > now() "
             "AND id %% 10 = 3)", [event.pk])
        for kind in ("embedding", "summary"):
            _sql(f"""
                WITH a AS (
                    INSERT INTO memory_derivedartifact (tenant_id, scope_id, kind, content, holder, created_at,
                                                        forgotten_at, forget_event_id)
                    SELECT r.tenant_id, r.scope_id, '{kind}', '{kind} of ' || r.id, '', r.created_at,
                           r.forgotten_at, %s
                    FROM memory_record r JOIN bench_eligible e ON e.id = r.id ORDER BY r.id
                    RETURNING id, split_part(content, ' of ', 2)::bigint AS source)
                INSERT INTO memory_lineage (artifact_id, source_id) SELECT id, source FROM a""", [event.pk])
        _sql("CREATE TABLE bench_record_copy AS SELECT r.* FROM memory_record r JOIN bench_eligible e ON e.id = r.id")
        _sql("CREATE TABLE bench_lineage_copy AS SELECT l.* FROM memory_lineage l "
             "JOIN bench_eligible e ON e.id = l.source_id")
        _sql("CREATE TABLE bench_artifact_copy AS SELECT a.* FROM memory_derivedartifact a "
             "WHERE a.id IN (SELECT artifact_id FROM bench_lineage_copy)")
    with connection.cursor() as cursor:
        for table in ("memory_record", "memory_derivedartifact", "memory_lineage"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(f"hid {eligible:,} records with {2 * eligible:,} artifacts (and 10,000 locked ones) in "
          f"{time.perf_counter() - started:.1f} s")


def _hidden_shape(eligible: int) -> bool:
    exists = _fetch("SELECT to_regclass('bench_record_copy') IS NOT NULL")[0][0]
    return bool(exists) and _fetch("SELECT count(*) FROM bench_record_copy")[0][0] == eligible and \
        _fetch(f"SELECT count(*) FROM memory_record WHERE {ELIGIBLE}")[0][0] == eligible


def _reset() -> None:
    """Put the purged rows back as they were, and forget what the sweep wrote about them."""
    from django.db import connection, transaction

    with transaction.atomic():
        _sql("SET LOCAL session_replication_role = replica")
        # Bench-only surgery: the rows come back as they were, so the write ledger (which fires even under
        # replica) must not see them written a second time.
        _sql("ALTER TABLE memory_record DISABLE TRIGGER memory_record_write_ledger")
        _sql("DELETE FROM memory_deletedrecord WHERE record_id IN (SELECT id FROM bench_record_copy)")
        _sql("INSERT INTO memory_record SELECT * FROM bench_record_copy")
        _sql("INSERT INTO memory_derivedartifact SELECT * FROM bench_artifact_copy")
        _sql("INSERT INTO memory_lineage SELECT * FROM bench_lineage_copy")
        _sql("ALTER TABLE memory_record ENABLE ALWAYS TRIGGER memory_record_write_ledger")
    with connection.cursor() as cursor:
        for table in ("memory_record", "memory_derivedartifact", "memory_lineage", "memory_deletedrecord"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("CHECKPOINT")


def _eligible_now() -> int:
    return _fetch(f"SELECT count(*) FROM memory_record WHERE {ELIGIBLE}")[0][0]


# --- the two sides -------------------------------------------------------------------------------------

def _run_sweep() -> tuple[float, int, int]:
    from memory.sweeps import sweep_run_sync

    global _last_cpu
    started, cpu = time.perf_counter(), time.process_time()
    run = sweep_run_sync(kind="compaction", actor="bench")
    seconds = time.perf_counter() - started
    _last_cpu = time.process_time() - cpu
    return seconds, run.counts.get("deleted", 0), run.counts.get("derived_deleted", 0)


# The sweep's CPU time in this process (its Python), beside its wall time: steadier than the wall time when
# the shared machine's load moves, so the fairer way to compare two versions of the sweep's own code.
_last_cpu = 0.0


def _sweep_worker(number: int, barrier, results) -> None:
    """One sweep process of `--workers N` (forked after Django's setup; its own database connection)."""
    from django.db import connections

    from memory.sweeps import sweep_run_sync

    try:
        barrier.wait()
        cpu = time.process_time()
        run = sweep_run_sync(kind="compaction", actor=f"bench:worker-{number}")
        results.put((number, run.counts.get("deleted", 0), run.counts.get("derived_deleted", 0), run.batches,
                     time.process_time() - cpu, None))
    except BaseException as exc:  # reported by the parent, which then stops
        results.put((number, 0, 0, 0, 0.0, f"{type(exc).__name__}: {exc}"))
    finally:
        connections.close_all()


def _run_sweep_workers(workers: int) -> tuple[float, int, int]:
    """The design's scale-out: `workers` sweep processes at once, each running its own compaction run
    (`sweep_run_sync`) over the same rows; they share the work through SKIP LOCKED. The clock starts when all
    of them are ready (Django set up, forked) and stops when the last one is done."""
    import multiprocessing

    from django.db import connections

    global _last_cpu, _last_split
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(workers + 1), context.Queue()
    connections.close_all()  # a forked child must not share this process's connection
    processes = [context.Process(target=_sweep_worker, args=(number, barrier, results))
                 for number in range(1, workers + 1)]
    for process in processes:
        process.start()
    barrier.wait()
    started = time.perf_counter()
    reports = [results.get() for _ in processes]
    seconds = time.perf_counter() - started
    for process in processes:
        process.join()
    errors = [r[5] for r in reports if r[5]]
    if errors:
        sys.exit(f"bench_compaction: a sweep worker failed: {errors}")
    _last_cpu = sum(r[4] for r in reports)
    _last_split = ", ".join(f"worker {r[0]}: {r[1]:,} in {r[3]} batches" for r in sorted(reports))
    return seconds, sum(r[1] for r in reports), sum(r[2] for r in reports)


_last_split = ""


def _run_raw() -> tuple[float, int, int]:
    from django.db import transaction

    started = time.perf_counter()
    with transaction.atomic():
        artifacts = _sql(RAW[0])
        records = _sql(RAW[1])
    return time.perf_counter() - started, records, artifacts


def _audit(when: str) -> None:
    from retention.audit import coverage_audit
    from retention.models import TombstonedDeletion

    _sql("CHECKPOINT")
    indexed = TombstonedDeletion.objects.count()
    report = coverage_audit(actor="bench")
    t = report.totals
    print(f"coverage audit {when}: {t['ledgered']:,} ledgered records ({t['at_rest']:,} at rest, "
          f"{TombstonedDeletion.objects.count() - indexed:,} tombstoned deletions newly indexed) in "
          f"{report.seconds:.2f} s = {t['ledgered'] / report.seconds:,.0f} records/s; {report.status}")


# --- where the sweep's time goes -----------------------------------------------------------------------

def _phases():
    """bench_forget's per-step timing of records_forget (wall, database and psycopg time per step), plus
    the sweep's own steps."""
    from memory.sweeps import compaction, runs

    phases = bench_forget.Phases()
    original_installed = phases.installed

    from contextlib import contextmanager

    @contextmanager
    def installed():
        phases.wrap(compaction, "claim_rows", "0 sweep: claim (SELECT ... FOR UPDATE SKIP LOCKED)")
        phases.wrap(compaction, "closes_of", "0 sweep: references to the first forgets")
        phases.wrap(runs, "_finish", "9 sweep: run summary (what waits)")
        phases.wrap(type(runs.SweepBatch.objects), "create", "9 sweep: batch row")
        with original_installed():
            yield phases

    return phases, installed


# --- main ----------------------------------------------------------------------------------------------

def order_of(number: int) -> list[str]:
    """The one-worker sweep and the raw side in round `number` (from 1): they take turns at going first."""
    return ["sweep", "raw"] if number % 2 else ["raw", "sweep"]


def main() -> None:
    args = _args()
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
    os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only-signing-passphrase")
    _database_ensure(url, fresh=not args.reuse)

    import django

    django.setup()
    import logging

    logging.getLogger("memory.sweeps").setLevel(logging.WARNING)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    if not (args.reuse and _hidden_shape(args.eligible)):
        if args.reuse:
            sys.exit("bench_compaction: --reuse, but the database does not hold a store of this shape; run without "
                     "--reuse.")
        if not _store_shape(args.subjects, args.per_subject):
            _store_build(args.subjects, args.per_subject)
        _hidden_build(args.eligible)
    records = _fetch("SELECT count(*) FROM memory_record")[0][0]
    version = _fetch("SHOW server_version")[0][0]
    print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {records:,} records, "
          f"{args.eligible:,} hidden and unlocked (2 artifacts each); {args.rounds} rounds")

    if not args.no_audit:
        _audit("before the rounds")

    many = f"sweep x{args.workers}"
    rates: dict[str, list[float]] = {"sweep": [], "raw": [], many: []}
    for number in range(1, args.rounds + 1):
        order = order_of(number)
        if args.workers > 1:
            order = order + [many] if number % 2 else [many] + order
        for side in order:
            assert _eligible_now() == args.eligible
            _sql("CHECKPOINT")
            seconds, purged, artifacts = (_run_sweep() if side == "sweep" else _run_raw() if side == "raw"
                                          else _run_sweep_workers(args.workers))
            assert purged == args.eligible and artifacts == 2 * args.eligible, (side, purged, artifacts)
            assert _eligible_now() == 0
            rates[side].append(purged / seconds)
            cpu = f", this process's CPU {_last_cpu:5.2f} s" if side == "sweep" else ""
            if side == many:
                cpu = f", the workers' CPU {_last_cpu:5.2f} s; {_last_split}"
            print(f"  round {number} {side:<9}: {purged:,} records + {artifacts:,} artifacts in {seconds:6.2f} s "
                  f"= {purged / seconds:>8,.0f} records/s (load {os.getloadavg()[0]:.1f}{cpu})")
            _reset()

    sweep, raw = statistics.median(rates["sweep"]), statistics.median(rates["raw"])
    ratio = sweep / raw
    # The first and the second side of every round meet the store's two layouts (see the docstring; measured: the
    # raw DELETEs 2.0 s on one, 3.2 s on the other), so the medians compare like with like only when each side ran
    # first as often as second: with an odd number of rounds the sweep meets one layout once more than the raw side.
    if args.rounds % 2:
        print(f"\nnote: {args.rounds} rounds is odd: the sweep ran first once more than the raw side, and the side "
              "that runs first in a round meets another layout of the store than the second; use an even --rounds for the "
              "goal's figure")
    for position, label in ((0, "first"), (1, "second")):
        sides = {side: [rate for number, rate in enumerate(rates[side], 1)
                        if (order_of(number).index(side) == position)] for side in ("sweep", "raw")}
        if sides["sweep"] and sides["raw"]:
            print(f"  runs where the side went {label:<6}: sweep {statistics.median(sides['sweep']):>8,.0f}, raw "
                  f"{statistics.median(sides['raw']):>8,.0f} records/s, ratio "
                  f"{statistics.median(sides['sweep']) / statistics.median(sides['raw']):.2f}")
    print(f"\ncompaction of {args.eligible:,} hidden records (2 artifacts each) in {records:,}, median of "
          f"{args.rounds}:")
    print(f"  sweep (records_forget, batches of 5,000): {sweep:>8,.0f} records/s")
    print(f"  raw SQL (two DELETEs, one transaction):    {raw:>8,.0f} records/s")
    print(f"  ratio sweep/raw:                           {ratio:.2f}  (goal {GOAL}, one worker: "
          f"{'met' if ratio >= GOAL else 'NOT met'})")
    if args.workers > 1:
        spread = statistics.median(rates[many])
        print(f"  separately, {args.workers} sweep workers at once (scale-out through SKIP LOCKED; not the goal's "
              f"figure): {spread:,.0f} records/s, {spread / raw:.2f} x raw, {spread / sweep:.2f} x one worker")

    if not args.no_audit:
        # The rounds left tombstones listing 3 x 100,000 deletions: the first audit indexes them (each statement
        # is parsed once), the next one finds nothing new to index.
        _audit("after the rounds, indexing their tombstones")
        _audit("again, nothing new to index")

    if args.profile:
        phases, installed = _phases()
        _sql("CHECKPOINT")
        with installed():
            seconds, _, _ = _run_sweep()
        print(f"\nwhere the sweep's time goes (one more round, {args.eligible:,} records, timed per step):")
        print(phases.report(seconds))
        _reset()
        _sql("CHECKPOINT")
        profiler = cProfile.Profile()
        profiler.enable()
        seconds, _, _ = _run_sweep()
        profiler.disable()
        _reset()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
        print(f"\ncProfile of the same round ({seconds:.2f} s under the profiler), by own time:")
        print("\n".join(out.getvalue().splitlines()[:50]))
    connection.close()


if __name__ == "__main__":
    main()
