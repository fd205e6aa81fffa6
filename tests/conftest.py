import pytest
from rest_framework.test import APIClient

from memory.services.tokens import token_issue
from tests.factories import ContentClassFactory, TenantFactory


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
