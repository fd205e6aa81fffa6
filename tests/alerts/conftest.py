"""Fixtures for the alerts' tests: operators with an address (they get the mail) and a real HTTP receiver on
127.0.0.1 (a thread of the test process) that answers with the statuses it is told, in turn, and keeps what
it received."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Group, User

from dsr.roles import roles_sync
from tests.admin.conftest import client_as  # noqa: F401 - the admin tests' logged-in clients, reused


@dataclass
class Received:
    at: float
    path: str
    headers: dict
    body: bytes


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=list)   # answered in turn; 200 once they run out
    received: list[Received] = field(default_factory=list)
    redirect_to: str | None = None


@pytest.fixture
def receiver():
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.received.append(Received(time.monotonic(), self.path, dict(self.headers), body))
            status = state.statuses.pop(0) if state.statuses else 200
            if state.redirect_to:
                status = 302
            self.send_response(status)
            if state.redirect_to:
                self.send_header("Location", state.redirect_to)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/ledger"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def operators(db):
    """Two operators with an address and one without; a legal user (not mailed)."""
    roles_sync()
    group = Group.objects.get(name="operator")
    made = []
    for name, email in (("op-ann", "ann@example.org"), ("op-bob", "bob@example.org"), ("op-cy", "")):
        user = User.objects.create_user(name, email, "pw", is_staff=True)
        user.groups.add(group)
        made.append(user)
    legal = User.objects.create_user("legal-lu", "lu@example.org", "pw", is_staff=True)
    legal.groups.add(Group.objects.get(name="legal"))
    return made
