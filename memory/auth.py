"""Token authentication for the API: `Authorization: Token <key>`; the key is looked up by its SHA-256."""
from __future__ import annotations

import hashlib
import secrets

from rest_framework import authentication, exceptions


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def token_key_new() -> str:
    return secrets.token_urlsafe(32)


class ApiTokenAuthentication(authentication.TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key: str):
        from memory.models import ApiToken

        token = (
            ApiToken.objects.select_related("tenant", "user")
            .filter(key_hash=token_hash(key), revoked_at__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token
