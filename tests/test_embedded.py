"""The README's first command: `manage.py serve_embedded` on the embedded default, as a new machine runs it.

No DATABASE_URL and no CELERY_BROKER_URL: SQLite and Kombu's filesystem broker in a fresh LEDGER_VAR_DIR,
a real Celery worker process and the web server, both children of the command.
"""
from __future__ import annotations

import email
import email.policy
import http.cookiejar
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

from tests.memory.test_embedder_migration import WRITE
from tests.sqlite_service import manage_script, sqlite_env

ROOT = Path(__file__).resolve().parents[1]
# A fresh machine migrates from scratch and starts a worker: generous, CI machines are slow.
START_TIMEOUT = 180
STOP_TIMEOUT = 60
# What a fresh machine does not set (the test settings set some of these in this process's environment).
EMBEDDED_UNSET = {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CELERY_TASK_DEFAULT_QUEUE",
                  "CACHE_URL", "LEDGER_BROKER_VISIBILITY_TIMEOUT", "LEDGER_SIGNING_PASSPHRASE", "SECRET_KEY",
                  "DJANGO_SETTINGS_MODULE"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_mail(directory: Path, timeout: float = 60.0) -> str:
    """The text of the first mail the file backend wrote into `directory`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = sorted(directory.glob("*.eml")) if directory.exists() else []
        if sent:
            message = email.message_from_bytes(sent[0].read_bytes(), policy=email.policy.default)
            return message.get_body(preferencelist=("plain",)).get_content()
        time.sleep(0.5)
    raise AssertionError(f"no mail in {directory} after {timeout:.0f}s")


class Served:
    """`manage.py serve_embedded` in its own session, its output collected line by line."""

    def __init__(self, var_dir: Path, **settings: str):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_UNSET}
        env.update(LEDGER_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1", **settings)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve_embedded", "--port", str(self.port)],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def printed(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output, re.MULTILINE)
            if match:
                return match
            assert self.proc.poll() is None, f"serve_embedded exited early:\n{self.output[-5000:]}"
            time.sleep(0.2)
        raise AssertionError(f"never printed {pattern!r}:\n{self.output[-5000:]}")

    def get(self, path: str, token: str | None = None, timeout: float = 30) -> tuple[int, dict]:
        request = urllib.request.Request(self.base + path)
        if token:
            request.add_header("Authorization", f"Token {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def post(self, path: str, body: dict, token: str, timeout: float = 30) -> tuple[int, dict]:
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Authorization": f"Token {token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def admin_login(self, username: str, password: str) -> str:
        """Log in through the admin's login form; return the URL it lands on."""
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        login = f"{self.base}/admin/login/?next=/admin/"
        with opener.open(login, timeout=30) as answer:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', answer.read().decode()).group(1)
        form = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": username, "password": password,
                                       "next": "/admin/"}).encode()
        request = urllib.request.Request(login, data=form, headers={"Referer": login})
        with opener.open(request, timeout=30) as answer:
            assert b'id="login-form"' not in answer.read(), "the login form came back: wrong username or password"
            return answer.url

    def wait_healthy(self) -> dict:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"serve_embedded exited early:\n{self.output[-5000:]}"
            try:
                status, body = self.get("/healthz", timeout=5)
            except OSError:  # not listening yet
                time.sleep(0.5)
                continue
            if status == 200:
                return body
            time.sleep(0.5)
        raise AssertionError(f"/healthz never answered 200:\n{self.output[-5000:]}")

    def child_pids(self) -> dict[str, int]:
        return {name: int(self.printed(rf"started the {name}: pid (\d+)").group(1))
                for name in ("worker", "web server")}

    def cleanup(self, pids) -> None:
        """Whatever the test's outcome, leave no process behind (each by its own pid)."""
        for pid in [self.proc.pid, *pids]:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _started_with(var_dir: Path) -> list[int]:
    """The pids of processes whose environment names this var dir: every process serve_embedded started,
    children's children too (the worker's beat scheduler is a process Celery forks)."""
    marker = f"LEDGER_VAR_DIR={var_dir}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return pids


def _none_left(var_dir: Path, timeout: float = STOP_TIMEOUT) -> list[int]:
    """Wait until no process started with `var_dir` is left; returns those still there at the timeout."""
    deadline = time.monotonic() + timeout
    while (left := _started_with(var_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _gone(pids, timeout: float = STOP_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.2)
    return False


def test_embedded_default_serves_the_api_runs_a_worker_and_stops_cleanly(tmp_path):
    # Given: serve_embedded on a fresh var dir, with no DATABASE_URL and no CELERY_BROKER_URL
    served = Served(tmp_path)
    pids: dict[str, int] = {}
    try:
        # When: it is up
        health = served.wait_healthy()
        pids = served.child_pids()
        agent_token = served.printed(r"^\s*agent token:\s+(\S+)$").group(1)
        password = served.printed(r"^\s*password:\s+(\S+)$").group(1)

        # Then: SQLite and the filesystem broker in that var dir
        assert health["database"] == {"status": "ok", "vendor": "sqlite"}
        assert health["broker"] == {"status": "ok", "transport": "filesystem"}
        assert (tmp_path / "ledger.sqlite3").exists()
        assert password and f"{served.base}/admin/" in served.output

        # and the printed agent token reads the demo data through the API
        status, body = served.get("/api/v1/memory/records?scope=user:1", token=agent_token)
        assert status == 200, body
        assert len(body["results"]) == 8
        assert {r["scope"] for r in body["results"]} == {"user:1/session:1", "user:1/session:2"}
        assert served.get("/api/v1/memory/records?scope=user:1")[0] == 401

        # and the printed admin login opens the admin
        assert served.admin_login("admin", password) == f"{served.base}/admin/"

        # and so does the printed operator login, and the operator token receives a subject request
        operator_password = served.printed(r"^\s*operator password:\s+(\S+)$").group(1)
        operator_token = served.printed(r"^\s*operator token:\s+(\S+)$").group(1)
        assert served.printed(r"^\s*operator login:\s+(\S+)$").group(1) == "operator"
        with closing(sqlite3.connect(tmp_path / "ledger.sqlite3")) as db:  # the failure alerts' mails reach them
            assert db.execute("SELECT email FROM auth_user WHERE username = 'operator'").fetchone()[0]
        assert served.admin_login("operator", operator_password) == f"{served.base}/admin/"
        status, body = served.post("/api/v1/requests", {"subject": "cust-1001", "type": "access",
                                                        "regulation": "gdpr", "channel": "email"}, operator_token)
        assert (status, body.get("status")) == (201, "received"), body

        # and an erasure request runs on the worker to its end, and the mail sent to the subject links to
        # the verification page of this server, on the port it was started with
        status, body = served.post("/api/v1/requests", {"subject": "cust-1002", "type": "erasure",
                                                        "regulation": "gdpr", "channel": "email",
                                                        "contact_email": "ana@example.org"}, operator_token)
        assert status == 201, body
        request_id = body["id"]
        status, body = served.post(f"/api/v1/requests/{request_id}/verify-identity",
                                   {"method": "signed-in account"}, operator_token)
        assert status == 200, body
        status, body = served.post(f"/api/v1/requests/{request_id}/start", {}, operator_token)
        assert status in (200, 202), body
        mail = _wait_for_mail(tmp_path / "mail")
        links = re.findall(r"https?://\S+/verify/\?id=[0-9a-f-]+", mail)
        assert links and all(link.startswith(f"{served.base}/verify/?id=") for link in links), mail
        with urllib.request.urlopen(links[0], timeout=30) as page:
            assert page.status == 200
            assert links[0].rsplit("=", 1)[1] in page.read().decode()

        # and the worker process takes a task off the broker and runs it (the ping answers with our nonce)
        status, body = served.get("/healthz?worker=1")
        assert (status, body["worker"]) == (200, {"status": "ok"}), body
        assert re.search(r"Task config\.ping\[[0-9a-f-]+\] succeeded", served.output)

        # When: the process group gets SIGTERM
        os.killpg(served.proc.pid, signal.SIGTERM)

        # Then: the command stops both children and exits 0
        assert served.proc.wait(timeout=STOP_TIMEOUT) == 0, served.output[-5000:]
        assert _gone(pids.values()), f"children left behind: {pids}"
        assert not _none_left(tmp_path), "processes left behind (the beat scheduler?)"
        assert "Stopped: worker and web server are gone." in served.output
    finally:
        served.cleanup(pids.values())


def test_worker_death_stops_the_web_server_and_exits_nonzero(tmp_path):
    # Given: serve_embedded up, started twice on the same var dir (the demo data set is loaded once)
    first = Served(tmp_path)
    pids: dict[str, int] = {}
    try:
        first.wait_healthy()
        pids = first.child_pids()
        os.killpg(first.proc.pid, signal.SIGTERM)
        assert first.proc.wait(timeout=STOP_TIMEOUT) == 0
        assert "loaded tenant 'demo' with 32 records" in first.output
    finally:
        first.cleanup(pids.values())

    served = Served(tmp_path)
    try:
        served.wait_healthy()
        pids = served.child_pids()
        assert "tenant 'demo' already loaded (32 records)" in served.output

        # When: the worker dies
        os.kill(pids["worker"], signal.SIGKILL)

        # Then: the web server is stopped too and the command exits non-zero
        assert served.proc.wait(timeout=STOP_TIMEOUT) != 0, served.output[-5000:]
        assert _gone(pids.values()), f"children left behind: {pids}"
        # and so is the worker's beat scheduler, a process of its own that outlived the worker's SIGKILL
        assert not _none_left(tmp_path), "processes left behind (the beat scheduler?)"
        assert re.search(r"the worker exited with code -9", served.output)
    finally:
        served.cleanup(pids.values())


def test_vectors_another_embedder_made_are_told_at_start(sqlite_migrated):
    # Given: a store whose vectors HashingEmbedder made (the default until WordLlamaEmbedder)
    env = sqlite_env(sqlite_migrated, LEDGER_EMBEDDER="memory.embedding.HashingEmbedder")
    manage_script(WRITE % (["the cat slept on the mat"],), env=env)

    # When: the service starts with the default embedder
    served = Served(sqlite_migrated.parent)
    pids: dict[str, int] = {}
    try:
        # Then: it says so before it serves, with what to do
        served.printed(r"memory\.W002\) 1 live embedding was made by another embedder")
        served.printed(r"HINT: manage.py reembed")
        pids = served.child_pids()
        os.killpg(served.proc.pid, signal.SIGTERM)
        assert served.proc.wait(timeout=STOP_TIMEOUT) == 0
    finally:
        served.cleanup(pids.values())
