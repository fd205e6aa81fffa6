"""Who an MCP connection acts as: an agent token, checked as the API checks it (`memory.auth`)."""
from __future__ import annotations

from rest_framework import exceptions, status

from config.errors import ApplicationError
from memory.auth import ApiTokenAuthentication
from memory.models import ApiToken


def agent_token_check(token: ApiToken | None, *, tenant_name: str | None = None) -> ApiToken:
    """The token an MCP connection acts with: an agent token, of `tenant_name` when given. `ApplicationError`
    (`permission_denied`, `tenant_mismatch`) otherwise."""
    if token is None or token.role != ApiToken.Role.AGENT:
        raise ApplicationError("permission_denied", "The MCP tools need an agent token (issue_token --role agent).",
                               status_code=status.HTTP_403_FORBIDDEN)
    if tenant_name is not None and token.tenant.name != tenant_name:
        raise ApplicationError("tenant_mismatch", f"This token belongs to another tenant, not to {tenant_name!r}.",
                               status_code=status.HTTP_403_FORBIDDEN)
    return token


def agent_token_from_key(key: str, *, tenant_name: str | None = None) -> ApiToken:
    """The agent token with this key (of `tenant_name` when given). `AuthenticationFailed` for an unknown or
    revoked key; `ApplicationError` (`permission_denied`, `tenant_mismatch`) for a token that may not act here."""
    if not key:
        raise exceptions.AuthenticationFailed("No token given.")
    _, token = ApiTokenAuthentication().authenticate_credentials(key)
    return agent_token_check(token, tenant_name=tenant_name)


def agent_token_from_request(request) -> ApiToken:
    """The agent token of an HTTP request's `Authorization: Token <key>` header, as the API reads it."""
    found = ApiTokenAuthentication().authenticate(request)
    if found is None:
        raise exceptions.NotAuthenticated("Authentication credentials were not provided: send "
                                          "`Authorization: Token <agent token>`.")
    return agent_token_check(found[1])
