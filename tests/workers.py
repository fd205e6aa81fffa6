"""Real Celery workers for the integration tests: separate processes on the real Redis broker, reading
the test database. Nothing here is mocked or eager."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from config.testdb import url_of
from tests.conftest import XDIST_WORKER

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


class Worker:
    def __init__(self, name: str, **env: str):
        db = connection.settings_dict
        url = url_of(db)
        ARTIFACTS.mkdir(exist_ok=True)
        # Two pytest-xdist processes may start a worker of the same name at once: each has its own log.
        name = f"{name}-{XDIST_WORKER}" if XDIST_WORKER else name
        self.log_path = ARTIFACTS / f"worker-{name}.log"
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork", "--concurrency=1",
             "--without-gossip", "--without-mingle", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "-n", f"{name}@%h",
             "--loglevel=info"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": url, **env}, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 30) -> "Worker":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if b"ready." in self.log_path.read_bytes():
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children): no cleanup, no acknowledgement."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def queue_purge() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}")
