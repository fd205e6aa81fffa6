"""Signing and appending tombstones through the service against bare Ed25519 signing, in the same run;
then an inclusion proof and an append when the log holds 1,000,000 entries.

    .venv/bin/python bench/bench_tombstones.py
    .venv/bin/python bench/bench_tombstones.py --count 2000 --log-size 200000   # a quicker run
    .venv/bin/python bench/bench_tombstones.py --profile                        # and the batch path per step

PostgreSQL only (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/ledger_bench_tombstones); the
script works in a throwaway database named after it with a `test_` prefix (Django's test database:
created, migrated, dropped at the end), because tombstones are permanent: the triggers refuse to delete them.

1. The same N statements (3 records, 1 derivative, 1 deferred item: 932 bytes canonical), three ways, chunk
   by chunk (1,000 statements a chunk, the three ways one after the other in each chunk):
   bare:    `Ed25519PrivateKey.sign()` over the DSSE PAE of the canonical bytes, computed beforehand;
   service: `tombstone_issue()` once per statement, each in its own transaction (what one forget does):
            validate, canonicalize (RFC 8785), sign, store the tombstone and the salts, append to the log;
   batch:   `tombstones_issue_many()` over chunks of 1,000 statements, one transaction each (a sweep).
   Rates in tombstones/s and each service path's ratio to bare signing (goal 0.5 for the batch path), the
   median of the chunks' own ratios, the load average before and after, and the same ratio in this
   process's CPU time (`time.process_time`): the ceiling of the wall-clock ratio if the database's work
   and the waits cost nothing, and much less moved by other processes than wall time is. A batch of 64 or
   more is signed by the signing process (tombstones/signing_process.py) on the other core: its CPU time
   (/proc/<pid>/schedstat) is printed too, with the ratio of both processes' CPU time together (what the
   batch would cost on one core).
   `--profile` adds wall and CPU time per step of `tombstones_issue_many` (wrappers around the functions it
   calls, about a microsecond per call).
2. The log grown to 1,000,000 entries (past the real ones, minimal tombstone rows with tiny distinct payloads,
   and the log nodes over their leaves, stored as `log_append` stores them), written with COPY, then the timings of: an inclusion proof
   (`inclusion_proof_get`, and `GET /api/v1/log/inclusion`), a consistency proof, and an append
   (`tombstone_issue`, one transaction each), at that size and, for comparison, at the size part 1 left
   (2 × N entries): medians and 95th percentiles.

Figures, and where the batch path's time goes: bench/README.md.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")  # DATABASE_URL is set
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ledger_bench_tombstones")
os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only passphrase")
os.environ.setdefault("LEDGER_PUBLIC_API_RATE_LIMIT", "1000000")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from memory.models import Tenant  # noqa: E402
from tombstones import merkle  # noqa: E402
from tombstones.canonical import canonical_json  # noqa: E402
from tombstones.dsse import PAYLOAD_TYPE, pae  # noqa: E402
from tombstones.models import KeyPurpose, LogHead  # noqa: E402
from tombstones.selectors import consistency_proof_get, inclusion_proof_get  # noqa: E402
from tombstones.services import TombstoneRequest, key_current, tombstone_issue, tombstones_issue_many  # noqa: E402
from tombstones.services.keys import key_private  # noqa: E402
from tombstones.services.log import frontier_split  # noqa: E402
from tombstones.services.statement import statement_complete  # noqa: E402
from tombstones.verification import commitment_of  # noqa: E402

GOAL = 0.5
BATCH = 1000  # statements per tombstones_issue_many call: one transaction, a few set-based inserts
COPY_ROWS = 200_000  # rows per COPY chunk while growing the log


def statement_make(n: int) -> tuple[dict, dict]:
    salts = {str(n * 10 + i): os.urandom(16).hex() for i in range(3)}
    records = [{"record_id": rid, "commitment": commitment_of(f"content {rid}", salt), "tier": "hot",
                "outcome": "deleted"} for rid, salt in salts.items()]
    statement = {
        "request": {"actor": "token:1", "authority": "GDPR Art. 17", "path": "api"},
        "scope": {"target": {"subject_ids": [str(n)]}},
        "execution": {"mode": "hard", "records": records, "path": "api"},
        "propagation": {"derivatives": [{"artifact_id": str(n), "kind": "embedding", "outcome": "deleted"}],
                        "deferred": [{"item": f"fleet_copy:{n + 1}", "action": "acknowledge",
                                      "deadline": "2026-03-01T00:00:00Z"}]},
        "time": "2025-12-02T10:00:00Z",
    }
    return statement, salts


def part_signing(tenant: Tenant, count: int, profile: bool = False) -> None:
    """Chunk by chunk, in the same minute: bare signing, then the service, so that the machine's load
    (other processes come and go) weighs on both sides alike. Sums over the chunks; the ratio is of sums,
    and the median of the chunks' own ratios is printed beside it. Wall time, and this process's CPU time
    (`time.process_time`: what the service costs here, without the server's part and the waits)."""
    from django.conf import settings

    key = key_current(purpose=KeyPurpose.TOMBSTONE)
    private = key_private(key)
    names = ["bare", "prepare", "single", "batch"]
    wall, cpu = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    chunk_ratios: list[float] = []
    steps = StepTimer() if profile else None
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    signing_cpu = dict.fromkeys(names, 0.0)

    def timed_side(name, function):
        wall_start, cpu_start, signing_start = time.perf_counter(), time.process_time(), _signing_process_cpu()
        function()
        wall[name] += time.perf_counter() - wall_start
        cpu[name] += time.process_time() - cpu_start
        signing_cpu[name] += _signing_process_cpu() - signing_start

    for offset in range(0, count, BATCH):
        size = min(BATCH, count - offset)
        items = [(uuid.uuid4(), *statement_make(offset + n)) for n in range(size)]
        signed = []
        timed_side("prepare", lambda: signed.extend(pae(PAYLOAD_TYPE, canonical_json(statement_complete(
            tombstone_id=tid, statement=st, log_origin=settings.LEDGER_LOG_ORIGIN)[0])) for tid, st, _ in items))
        bare_before, batch_before = wall["bare"], wall["batch"]
        timed_side("bare", lambda: [private.sign(message) for message in signed])

        def single():
            for tid, statement, salts in items:
                with transaction.atomic():
                    tombstone_issue(tombstone_id=tid, tenant_id=tenant.pk, statement=statement, subject_salts=salts)

        timed_side("single", single)
        requests = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.pk, statement=st,
                                     subject_salts=salts) for _, st, salts in items]

        def batch():
            with transaction.atomic():
                tombstones_issue_many(requests=requests)

        if steps:
            steps.install()
        try:
            timed_side("batch", batch)
        finally:
            if steps:
                steps.uninstall()
        chunk_ratios.append((wall["bare"] - bare_before) / (wall["batch"] - batch_before))
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"statement: {len(signed[0]) - len(PAYLOAD_TYPE) - 14} bytes canonical; {count:,} tombstones each way")
    bare, single, batch = (count / wall[name] for name in ("bare", "single", "batch"))
    print(f"  bare Ed25519 sign of the canonical PAE bytes: {bare:10,.0f} /s")
    print(f"  tombstone_issue, one transaction each:        {single:10,.0f} /s   ratio {single / bare:.3f}")
    print(f"  tombstones_issue_many, {BATCH:,} per transaction: {batch:10,.0f} /s   ratio {batch / bare:.2f}"
          f"   (goal {GOAL}; median of the {len(chunk_ratios)} chunks' ratios "
          f"{statistics.median(chunk_ratios):.2f})")
    print(f"  this process's CPU time only: bare {count / cpu['bare']:,.0f} /s, tombstones_issue_many "
          f"{count / cpu['batch']:,.0f} /s, ratio {cpu['bare'] / cpu['batch']:.2f} (the ceiling if the server's "
          f"work{' and the signing process' if signing_cpu['batch'] else ''} cost no time)")
    if signing_cpu["batch"]:
        both = cpu["batch"] + signing_cpu["batch"]
        print(f"  with the signing process's CPU time (tombstones/signing_process.py: "
              f"{1e6 * signing_cpu['batch'] / count:.0f} µs a tombstone): {count / both:,.0f} /s, ratio "
              f"{cpu['bare'] / both:.2f} (the same work on one core)")
    per = {name: 1e6 * seconds / count for name, seconds in wall.items()}
    print(f"  a batched tombstone's {per['batch']:.0f} µs: signing {per['bare']:.0f}, validating and canonicalizing "
          f"{per['prepare']:.0f}, the rest ({per['batch'] - per['bare'] - per['prepare']:.0f}) storing and appending")
    if steps:
        steps.report(count, bare_cpu=cpu["bare"])


def _signing_process_cpu() -> float:
    """CPU seconds used so far by this process's tombstone signing process (0 before it starts): the
    first field of its /proc/<pid>/schedstat, in nanoseconds."""
    from tombstones.services import issue

    if issue._signing is None:
        return 0.0
    try:
        return int(Path(f"/proc/{issue._signing.process.pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class StepTimer:
    """`--profile`: wall and CPU time per step of `tombstones_issue_many`, by wrapping the functions it calls
    (each wrapper adds about a microsecond per call, counted in its step)."""

    STEPS = [("statement_payload", "validate and canonicalize, RFC 8785 (statement_payload)"),
             ("salts_check", "check the salts"),
             ("log_lock", "lock the head; key current? tenants exist? (1 query)"),
             ("log_append", "Merkle nodes, queued with the head update"),
             ("send", "write: COPY nodes, salts, tombstones, signing as they stream; head"),
             ("commit", "COMMIT (the WAL flush; no deferred checks since migration 0005)")]

    def __init__(self):
        from tombstones.services import issue, rows

        self.owners = {"send": rows.RowWrites, "commit": connection}
        self.owners.update({name: issue for name, _ in self.STEPS if name not in self.owners})
        self.wall = dict.fromkeys(self.owners, 0.0)
        self.cpu = dict.fromkeys(self.owners, 0.0)
        self.originals = {}

    def install(self):
        for name, owner in self.owners.items():
            original = getattr(owner, name)
            self.originals[name] = original

            def timed(*args, _original=original, _name=name, **kwargs):
                wall_start, cpu_start = time.perf_counter(), time.process_time()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.wall[_name] += time.perf_counter() - wall_start
                    self.cpu[_name] += time.process_time() - cpu_start

            setattr(owner, name, timed)

    def uninstall(self):
        for name, original in self.originals.items():
            if self.owners[name] is connection:  # an instance attribute over the class's method
                delattr(connection, name)
            else:
                setattr(self.owners[name], name, original)

    def report(self, count: int, *, bare_cpu: float):
        print(f"  --profile: per batched tombstone, µs (CPU time as a share of the bare signature's "
              f"{1e6 * bare_cpu / count:.1f} µs)")
        for name, label in self.STEPS:
            print(f"    {label:66} wall {1e6 * self.wall[name] / count:7.1f}   CPU {1e6 * self.cpu[name] / count:7.1f}"
                  f"   {self.cpu[name] / bare_cpu:5.2f}")


def log_grow(tenant: Tenant, size: int) -> None:
    """Append random leaves until the log holds `size` entries: the same append algorithm, COPY instead of INSERT."""
    head = LogHead.objects.get(pk=1)
    start_size, frontier = head.size, frontier_split(bytes(head.frontier))
    key_id = key_current(purpose=KeyPurpose.TOMBSTONE).pk
    now = timezone.now()
    started = time.perf_counter()
    raw = connection.connection
    with transaction.atomic():
        for chunk_start in range(start_size, size, COPY_ROWS):
            nodes, tombstones = [], []
            payloads = [b'{"n":%d}' % index for index in range(chunk_start, min(size, chunk_start + COPY_ROWS))]
            created, frontier = merkle.append_many(  # as log_append stores them: no level-0 nodes
                chunk_start, frontier, [merkle.leaf_hash(pae(PAYLOAD_TYPE, payload)) for payload in payloads],
                with_leaves=False)
            nodes.extend(created)
            for index, payload in enumerate(payloads, chunk_start):
                tombstones.append((uuid.uuid4(), tenant.pk, PAYLOAD_TYPE, payload, b"\0" * 64, key_id, index, now))
            with raw.cursor() as cursor:
                with cursor.copy("COPY tombstones_lognode (level, node_index, hash) FROM STDIN") as copy:
                    for row in nodes:
                        copy.write_row(row)
                with cursor.copy("COPY tombstones_tombstone (id, tenant_id, payload_type, payload, signature, key_id, "
                                 "leaf_index, created_at) FROM STDIN") as copy:
                    for row in tombstones:
                        copy.write_row(row)
        LogHead.objects.filter(pk=1).update(size=size, frontier=b"".join(frontier), root=merkle.fold(frontier))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tombstones_lognode")
        cursor.execute("ANALYZE tombstones_tombstone")
    print(f"log grown from {start_size:,} to {size:,} entries in {time.perf_counter() - started:.1f} s (COPY)")


def timed(function, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def part_large_log(tenant: Tenant, size: int, runs: int) -> None:
    small = LogHead.objects.get(pk=1).size
    before = log_timings(tenant, small, runs)
    log_grow(tenant, size)
    after = log_timings(tenant, size, runs)
    print(f"{runs} runs each; median / p95, in ms:{'':14}at {small:,} entries{'':6}at {size:,} entries")
    for name in before:
        print(f"  {name:45} {before[name][0]:6.2f} / {before[name][1]:6.2f}{'':8}{after[name][0]:6.2f} / "
              f"{after[name][1]:6.2f}")


def log_timings(tenant: Tenant, size: int, runs: int) -> dict[str, tuple[float, float]]:
    client = Client()
    rng = random.Random(7)

    def inclusion():
        inclusion_proof_get(leaf_index=rng.randrange(size), tree_size=size)

    def inclusion_http():
        response = client.get("/api/v1/log/inclusion", {"leaf_index": rng.randrange(size), "tree_size": size})
        assert response.status_code == 200, response.content

    def consistency():
        consistency_proof_get(first=rng.randrange(1, size), second=size)

    def append():
        statement, salts = statement_make(rng.randrange(10**9))
        with transaction.atomic():
            tombstone_issue(tombstone_id=uuid.uuid4(), tenant_id=tenant.pk, statement=statement, subject_salts=salts)

    timings = {name: timed(function, runs) for name, function in [
        ("inclusion proof (selector)", inclusion), ("inclusion proof (GET /api/v1/log/inclusion)", inclusion_http),
        ("consistency proof (selector)", consistency), ("append: tombstone_issue, own transaction", append)]}
    head = LogHead.objects.get(pk=1)
    assert merkle.fold(frontier_split(bytes(head.frontier))) == bytes(head.root)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="tombstones per way of issuing (default 10,000)")
    parser.add_argument("--log-size", type=int, default=1_000_000, help="entries for part 2 (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=200, help="timed runs per operation in part 2")
    parser.add_argument("--profile", action="store_true", help="also time each step of tombstones_issue_many")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("this benchmark needs PostgreSQL (DATABASE_URL)")
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        tenant = Tenant.objects.create(name="bench")
        part_signing(tenant, args.count, args.profile)
        part_large_log(tenant, args.log_size, args.runs)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
