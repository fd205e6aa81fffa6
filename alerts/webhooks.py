"""Signing and sending one webhook attempt.

The scheme (README.md, "Failure alerts"): the body is JSON (UTF-8); the request carries
`X-Ledger-Timestamp: <unix seconds>` and `X-Ledger-Signature: sha256=<hex>`, the HMAC-SHA256 under the endpoint's
secret of `<timestamp>.<raw body>`. The timestamp is inside the signed string, so a captured request replayed
later fails a receiver that refuses timestamps older than a few minutes; `X-Ledger-Delivery` (the same for every
attempt of one delivery) lets a receiver drop a retry it already processed.

Redirects are never followed (a 3xx is a failed attempt: a redirect could carry the signed alert to a host
nobody configured), the timeout is short, and nothing of the response but its status is kept.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.utils import timezone

from alerts.models import Alert, WebhookDelivery, WebhookEndpoint

SIGNATURE_HEADER = "X-Ledger-Signature"
TIMESTAMP_HEADER = "X-Ledger-Timestamp"
DELIVERY_HEADER = "X-Ledger-Delivery"


class WebhookFailed(Exception):
    """An attempt that did not get a 2xx answer: the task retries it with backoff."""


def signature(*, secret: str, timestamp: int | str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def payload(alert: Alert, *, event: str, delivery_id: str) -> dict:
    """What a receiver gets: the alert's identity and state, never any record content (an alert holds none)."""
    return {
        "event": event,
        "delivery_id": delivery_id,
        "alert": {
            "id": alert.pk, "kind": alert.kind, "level": alert.level, "title": alert.title, "detail": alert.detail,
            "tenant": alert.tenant.name if alert.tenant else None, "cause": alert.cause,
            "first_seen_at": alert.first_seen_at.isoformat(), "last_seen_at": alert.last_seen_at.isoformat(),
            "occurrences": alert.occurrences, "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
            "admin_url": f"{settings.LEDGER_ALERT_ADMIN_URL.rstrip('/')}/admin/alerts/alert/{alert.pk}/change/",
        },
    }


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx status


_opener = urllib.request.build_opener(_NoRedirects)


def webhook_attempt(*, endpoint_id: int, alert_id: int, delivery_id: str, attempt: int,
                    event: str = "alert.raised") -> WebhookDelivery | None:
    """POST the alert to the endpoint once and record the attempt (a WebhookDelivery row, whatever happened).
    Raises WebhookFailed unless the receiver answered 2xx. An endpoint switched off meanwhile gets nothing."""
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).first()
    alert = Alert.objects.select_related("tenant").filter(pk=alert_id).first()
    if endpoint is None or alert is None:
        return None
    body = json.dumps(payload(alert, event=event, delivery_id=delivery_id), separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(endpoint.url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "forgetting-ledger-alerts/1",
        TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(secret=endpoint.secret, timestamp=timestamp, body=body),
        DELIVERY_HEADER: delivery_id,
    })
    started = timezone.now()
    status, error = None, ""
    try:
        with _opener.open(request, timeout=settings.LEDGER_ALERT_WEBHOOK_TIMEOUT) as response:
            status = response.status
            response.read(1024)  # a little of the body, so a keep-alive receiver sees the answer taken
    except urllib.error.HTTPError as exc:  # 3xx (not followed), 4xx, 5xx
        status, error = exc.code, f"HTTP {exc.code}" + (" (redirects are not followed)" if 300 <= exc.code < 400 else "")
        exc.close()
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, timed out, DNS, a bad URL
        error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    ok = status is not None and 200 <= status < 300
    delivery = WebhookDelivery.objects.create(
        delivery_id=delivery_id, endpoint=endpoint, alert=alert, event=event, attempt=attempt, started_at=started,
        finished_at=timezone.now(), status_code=status, error=error[:500], ok=ok)
    if not ok:
        raise WebhookFailed(f"webhook {endpoint_id} attempt {attempt}: {error or status}")
    return delivery
