"""Validation of a webhook's configuration, shared by the model (admin forms) and the services."""
from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

MIN_SECRET_LENGTH = 16


def webhook_url_validate(value: str) -> None:
    """http or https, with a host, and no credentials in the URL (they would be shown in the admin and logged
    with every delivery; a receiver authenticates the sender by the signature instead)."""
    try:
        parts = urlsplit(value or "")
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ValidationError("Not a valid URL.", code="invalid_webhook_url") from None
    if parts.scheme not in ("http", "https"):
        raise ValidationError(f"A webhook URL must start with http:// or https:// (not {parts.scheme or 'nothing'}:).",
                              code="invalid_webhook_url")
    if not parts.hostname:
        raise ValidationError("A webhook URL needs a host name.", code="invalid_webhook_url")
    if parts.username or parts.password:
        raise ValidationError("Put no user name or password in a webhook URL: receivers check the signature.",
                              code="invalid_webhook_url")


def webhook_secret_validate(value: str) -> None:
    if len(value or "") < MIN_SECRET_LENGTH:
        raise ValidationError(f"A webhook secret needs at least {MIN_SECRET_LENGTH} characters.",
                              code="invalid_webhook_secret")
    if value != value.strip() or any(ord(c) < 32 for c in value):
        raise ValidationError("A webhook secret may not hold spaces at its ends or control characters.",
                              code="invalid_webhook_secret")
