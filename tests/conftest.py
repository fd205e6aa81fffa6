import os

import psycopg
import pytest
from rest_framework.test import APIClient

from memory.services.tokens import token_issue
from tests.factories import ContentClassFactory, TenantFactory


@pytest.fixture
def no_signing_process():
    """The test starts without a tombstone signing process (tombstones/signing_process.py) and leaves none
    behind; yields the module that holds it."""
    from tombstones.services import issue

    def reset():
        if issue._signing is not None:
            issue._signing.close()
        issue._signing, issue._signing_retry_at = None, 0.0

    reset()
    yield issue
    reset()


@pytest.fixture
def tenant(db):
    return TenantFactory(name="acme")


@pytest.fixture
def other_tenant(db):
    return TenantFactory(name="globex")


@pytest.fixture
def chat(tenant):
    return ContentClassFactory(tenant=tenant, name="chat")


@pytest.fixture
def ledger_class(tenant):
    return ContentClassFactory(tenant=tenant, name="trade-ledger")


def _client(tenant_name: str, role: str) -> APIClient:
    _, key = token_issue(tenant_name=tenant_name, role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def agent(tenant):
    return _client(tenant.name, "agent")


@pytest.fixture
def other_agent(other_tenant):
    return _client(other_tenant.name, "agent")


@pytest.fixture
def legal(tenant):
    return _client(tenant.name, "legal")


@pytest.fixture
def api_client_for():
    return _client


@pytest.fixture
def workers():
    """Start real Celery workers (separate processes on the Redis broker); all are stopped afterwards."""
    from tests.workers import Worker, queue_purge

    started = []
    queue_purge()

    def start(name: str, **env) -> Worker:
        worker = Worker(name, **env).wait_ready()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    queue_purge()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(django_db_setup):
    """Debian's headless Chromium, driven by Playwright (never Playwright's own browser download)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: install Debian's package (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread while the browser lives; the tests' own ORM
    # calls (and the database flush between them) are still plain synchronous calls.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


# This pytest-xdist process ("gw0", "gw1"; "" without xdist). What belongs to the whole server or machine is
# named with it: the application role here, the Celery workers' logs (tests/workers.py).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
APP_ROLE = f"ledger_app_test_{XDIST_WORKER}" if XDIST_WORKER else "ledger_app_test"


def other_connection(**options) -> psycopg.Connection:
    """A psycopg connection of its own to the test database, as another process would open one (the caller
    closes it); `options` on top of the test connection's own parameters (`user`, `autocommit`...)."""
    from django.db import connection

    params = {k: v for k, v in connection.get_connection_params().items()
              if k in ("dbname", "host", "port", "user", "password", "options", "sslmode")}
    if "user" in options:
        params.pop("password", None)  # another role's: trust, as the application role has no password here
    return psycopg.connect(**{**params, **options})


@pytest.fixture
def app_role(transactional_db):
    """A real non-owner PostgreSQL role with the application's grants (memory/dbroles.py) on the test database;
    yields a function that opens a psycopg connection as that role (the caller closes it)."""
    from django.db import connection

    from memory.dbroles import app_role_create, app_role_grant

    if connection.vendor != "postgresql":
        pytest.skip("database roles are PostgreSQL's")
    with connection.cursor() as cursor:
        app_role_create(cursor, role=APP_ROLE, password=None)
        app_role_grant(cursor, role=APP_ROLE)

    def connect() -> psycopg.Connection:
        return other_connection(user=APP_ROLE, autocommit=True)

    return connect


@pytest.fixture
def as_app_role(app_role):
    """Django's own connection (this thread's, and every thread's opened afterwards) logs in as the application
    role until the test ends: services run with the rights the service has in production, not a superuser's."""
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    saved = settings_dict["USER"], settings_dict.get("PASSWORD", "")
    connections["default"].close()
    settings_dict["USER"], settings_dict["PASSWORD"] = APP_ROLE, ""
    try:
        yield APP_ROLE
    finally:
        connections["default"].close()
        settings_dict["USER"], settings_dict["PASSWORD"] = saved


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """A SQLite database migrated from scratch, once per test process (tests/sqlite_service.py): copy it with
    `sqlite_copy`, or use `sqlite_migrated`."""
    from tests.sqlite_service import DATABASE_FILE, sqlite_migrate

    return sqlite_migrate(tmp_path_factory.mktemp("sqlite-template") / DATABASE_FILE)


@pytest.fixture
def sqlite_migrated(sqlite_template, tmp_path):
    """This test's own migrated SQLite database, in `tmp_path` (its var dir)."""
    from tests.sqlite_service import sqlite_copy

    return sqlite_copy(sqlite_template, tmp_path)
