"""The service on its embedded default (SQLite) in the tests that run it there: the service's own code in
`manage.py` subprocesses with the ordinary settings (the test process keeps its PostgreSQL connection), and raw
SQL through Python's `sqlite3`, bypassing Django.

`manage.py migrate` from scratch takes ~6 s (Django's SQLite schema editor re-creates a table for many ALTERs,
dropping its triggers, which the migrations put back: the tests on this database check that they did). The
`sqlite_template` fixture (tests/conftest.py) migrates once per test process; `sqlite_copy` gives a test its own
copy of that file.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATABASE_FILE = "ledger.sqlite3"


def sqlite_env(path: Path, **extra: str) -> dict[str, str]:
    """The environment of a `manage.py` run on the SQLite file `path`, whose folder is the var dir: no
    PostgreSQL, no Redis broker or cache, the ordinary settings; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    env.update(DATABASE_URL=f"sqlite:///{path}", LEDGER_VAR_DIR=str(path.parent),
               DJANGO_SETTINGS_MODULE="config.settings", **extra)
    return env


def manage(*args: str, env: dict) -> str:
    """`manage.py *args` in a subprocess; its standard output. Fails the test with both outputs if it fails."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def manage_script(script: str, *, env: dict):
    """Run `script` in `manage.py shell`; the JSON it prints on its last line."""
    return json.loads(manage("shell", "-c", script, env=env).strip().splitlines()[-1])


def sqlite_migrate(path: Path) -> Path:
    """Migrate the SQLite file `path` (created if need be) from scratch to the latest migration."""
    manage("migrate", "--noinput", "--skip-checks", env=sqlite_env(path))
    return path


def sqlite_copy(template: Path, var_dir: Path) -> Path:
    """A copy of the migrated database `template` as `var_dir`'s database file."""
    var_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(template, var_dir / DATABASE_FILE))
