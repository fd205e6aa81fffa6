"""The authorized agents' admin actions (drp): a new token, shown once, replaces the old one; deactivating
refuses the agent's token. Roles see neither action (tests/admin/test_roles.py)."""
import pytest

from drp.models import Agent
from memory.auth import token_hash
from tests.admin.actions import act, covers, said
from tests.drp.conftest import Drp

pytestmark = pytest.mark.django_db


@covers(("drp.Agent", "issue_token"))
def test_issue_token_action_replaces_the_token_and_shows_the_new_one_once(client_as, tenant):
    drp = Drp(tenant)
    response = act(client_as("superuser"), Agent, "issue_token", [drp.agent.pk])
    (shown,) = [m for m in said(response) if "shown once" in m]
    token = shown.rsplit(": ", 1)[1]
    assert Agent.objects.get(pk=drp.agent.pk).token_hash == token_hash(token)
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 401
    drp.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 200


@covers(("drp.Agent", "deactivate"))
def test_deactivate_action_refuses_the_agents_token(client_as, tenant):
    drp = Drp(tenant)
    act(client_as("superuser"), Agent, "deactivate", [drp.agent.pk])
    assert not Agent.objects.get(pk=drp.agent.pk).active
    assert drp.client.get("/v1/agent/AGENT_A").status_code == 401
