"""`GET /healthz`: is this instance able to serve? For CI and load balancers; no login, no details that
could help an attacker (error class names only, never a URL or a message that may carry a password).

- database: one `SELECT 1` on the default connection;
- broker: a connection to the Celery broker is opened (Redis: a real round trip);
- worker (only with `?worker=1`): a `config.ping` task is enqueued and its answer awaited, which proves
  that a worker process takes messages off the broker and runs them. Opt-in because it costs a task
  and up to WORKER_WAIT seconds.

200 `{"status": "ok", ...}` when every check passed, else 503 `{"status": "error", ...}`.
"""
from __future__ import annotations

import secrets

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

# Seconds to wait for a worker to answer the ping: a filesystem-broker worker polls every second.
WORKER_WAIT = 10
BROKER_WAIT = 3


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - a health check reports, it does not raise
        return {"status": "error", "vendor": connection.vendor, "error": type(exc).__name__}
    return {"status": "ok", "vendor": connection.vendor}


def _broker() -> dict:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_WAIT)
            transport = conn.transport.driver_type
    except Exception as exc:  # noqa: BLE001
        return {"status": "error", "error": type(exc).__name__}
    return {"status": "ok", "transport": str(transport)}


def _worker() -> dict:
    from celery.backends.base import DisabledBackend

    from config.celery import app
    from config.tasks import PING_TASK

    if isinstance(app.backend, DisabledBackend):
        return {"status": "error", "error": "no_result_backend"}
    nonce = secrets.token_hex(8)
    try:
        result = app.send_task(PING_TASK, kwargs={"nonce": nonce}, ignore_result=False)
        answer = result.get(timeout=WORKER_WAIT, interval=0.2)
        result.forget()
    except Exception as exc:  # noqa: BLE001 - TimeoutError when no worker consumed it
        return {"status": "error", "error": type(exc).__name__}
    if answer != f"pong:{nonce}":
        return {"status": "error", "error": "wrong_answer"}
    return {"status": "ok"}


@never_cache
@require_GET
def healthz(request):
    checks = {"database": _database(), "broker": _broker()}
    if request.GET.get("worker") in ("1", "true", "yes"):
        checks["worker"] = _worker()
    ok = all(check["status"] == "ok" for check in checks.values())
    return JsonResponse({"status": "ok" if ok else "error", **checks}, status=200 if ok else 503)
