"""Fixtures for the MCP tests: two tenants with agent tokens, a locked content class, and a real MCP client.

The server runs in another process (stdio) or thread (the live server): the tests use `transactional_db`, so
what they write is committed and visible there."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from config.testdb import url_of
from memory.services.tokens import token_issue
from tests.factories import ContentClassFactory, TenantFactory, record, rule

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class Agents:
    acme_key: str
    globex_key: str
    operator_key: str
    globex_record_id: int


@pytest.fixture
def agents(transactional_db) -> Agents:
    acme, globex = TenantFactory(name="acme"), TenantFactory(name="globex")
    ContentClassFactory(tenant=acme, name="chat")
    ledger = ContentClassFactory(tenant=acme, name="trade-ledger")
    rule(acme, ledger, days=2555, authority="SEC 17a-4")  # seven years: a hard forget is refused
    globex_chat = ContentClassFactory(tenant=globex, name="chat")
    theirs = record(globex, globex_chat, scope="user:9", content="globex secret plans", subject="rival@example.com")
    return Agents(acme_key=token_issue(tenant_name="acme", role="agent")[1],
                  globex_key=token_issue(tenant_name="globex", role="agent")[1],
                  operator_key=token_issue(tenant_name="acme", role="operator")[1],
                  globex_record_id=theirs.pk)


def database_url() -> str:
    db = connection.settings_dict
    return url_of(db)


def serve_command(tenant: str) -> tuple[str, list[str], dict[str, str]]:
    """`manage.py mcp_serve` as an agent runtime would start it, on the test database."""
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "config.settings_test"}
    env.pop("LEDGER_AGENT_TOKEN", None)
    return sys.executable, [str(ROOT / "manage.py"), "mcp_serve", "--tenant", tenant], env
