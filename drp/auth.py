"""DRP authentication: `Authorization: Bearer <token>` (sections 2.01-2.06), the token of one agent of one
tenant, looked up by its SHA-256. An inactive agent's token is refused as an unknown one."""
from __future__ import annotations

from rest_framework import authentication, exceptions, permissions

from memory.auth import token_hash


class AgentBearerAuthentication(authentication.TokenAuthentication):
    keyword = "Bearer"

    def authenticate_credentials(self, key: str):
        from drp.models import Agent

        agent = Agent.objects.select_related("tenant").filter(token_hash=token_hash(key), active=True).first()
        if agent is None:
            raise exceptions.AuthenticationFailed("Invalid token, or the agent is not active.")
        return None, agent


class IsAgent(permissions.BasePermission):
    message = "This endpoint needs an authorized agent's bearer token."

    def has_permission(self, request, view) -> bool:
        from drp.models import Agent

        return isinstance(getattr(request, "auth", None), Agent)
