"""The erasure workflow's cost in the worker, counted in CPU instructions: a figure that does not move with the
machine's load, where bench_workflow.py's wall-clock times do (the same code's request took 3.5 to 9.3 ms on
these VMs, minute to minute). For measuring a change to the worker's code side by side with the code before it;
the goal's ratio is bench_workflow.py's.

    .venv/bin/python bench/workflow_instructions.py                  # 250 requests after a warm-up group
    .venv/bin/python bench/workflow_instructions.py --requests 500

It re-runs itself under valgrind's callgrind (`valgrind` must be installed), with instrumentation off until the
worker's state is built: the store (bench_workflow.py's, `--reuse`: DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/ledger_bench_workflow), the signing keys opened, the tombstone signing
process started and the start-up objects frozen, as a worker does at start (config/celery.py), and one group of
requests run to warm the caches. Then it counts the instructions of `workflow_dispatch`'s body
(dsr/tasks.py) for the measured requests, groups of LEDGER_WORKFLOW_GROUP_SIZE started together, run in this
process as a solo worker runs them (no broker), and prints them per request. What it leaves out: PostgreSQL's
work (another process: bench_workflow.py's own figures show it, ~40% of a request's time) and the signing
process's (valgrind does not follow children). Repeated runs of the same code agree within ~0.2%.

Under callgrind the process runs ~30x slower: ~1 minute for 250 requests.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench_workflow"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=250, help="requests measured, after a warm-up group")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)  # the run under callgrind
    return parser.parse_args()


def _measured(requests: int, signals: Path) -> None:
    """Under callgrind: build the worker's state, say so, wait for the parent to turn instrumentation on, run."""
    import bench_workflow

    group = int(os.environ.get("LEDGER_WORKFLOW_GROUP_SIZE", "50"))
    bench_workflow._setup(os.environ.setdefault("DATABASE_URL", DEFAULT_URL), True, requests + group)
    from bench_forget import TENANT

    from config.celery import objects_freeze, signing_keys_open
    from dsr.tasks import workflow_dispatch
    from memory.lookups import batches
    from memory.models import Tenant

    tenant = Tenant.objects.get(name=TENANT)
    subjects = bench_workflow.subjects_untouched(tenant, requests + group)
    bench_workflow._derived_add(subjects)
    request_ids = bench_workflow._requests_create(tenant, subjects, started=True)
    warm, measured = request_ids[:group], request_ids[group:]
    signing_keys_open(start_signing_process=True)
    workflow_dispatch.run(warm)
    objects_freeze()
    (signals / "ready").write_text(str(len(measured)))
    while not (signals / "go").exists():
        time.sleep(0.1)
    for chunk in batches(measured, group):
        workflow_dispatch.run(list(chunk))


def main() -> None:
    args = _args()
    if args.child:
        _measured(args.requests, Path(args.child))
        return
    with tempfile.TemporaryDirectory() as scratch:
        signals, out = Path(scratch), Path(scratch) / "callgrind.out"
        child = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--requests", str(args.requests), "--child", scratch],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while not (signals / "ready").exists():
            if child.poll() is not None:
                sys.exit(f"workflow_instructions: the measured run ended early:\n{child.stderr.read()[-3000:]}")
            time.sleep(0.2)
        subprocess.run(["callgrind_control", "--instr=on", str(child.pid)], check=True, capture_output=True)
        (signals / "go").touch()
        _, errors = child.communicate()
        if child.returncode:
            sys.exit(f"workflow_instructions: the measured run failed:\n{errors[-3000:]}")
        measured = int((signals / "ready").read_text())
        total = int(re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE).group(1))
    print(f"workflow_dispatch in the worker: {total:,} instructions for {measured} requests = "
          f"{total / measured / 1e6:.2f} M instructions a request")


if __name__ == "__main__":
    main()
