"""Raise, resolve and acknowledge alerts; the mail to the operators; the webhooks' enqueueing.

The producers call these where the cause happens (dsr.tasks: a workflow step that failed past its retries;
memory.sweeps.runs: a failed sweep; retention.audit: a coverage gap; dsr.services.failure_alerts: a request
near its deadline with work left). Each call is one statement that the caller's transaction carries: an alert
raised inside a transaction that rolls back was never raised, and its mail and webhooks are sent only after
commit.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.utils import timezone

from alerts import errors
from alerts.models import Alert, AlertKind, AlertLevel, WebhookEndpoint

logger = logging.getLogger(__name__)

OPERATOR_GROUP = "operator"  # dsr/roles.py: the role that triages requests hears of what failed


@dataclass(frozen=True)
class Raised:
    alert_id: int
    created: bool       # False: the open alert of this cause was there already (its count went up)
    occurrences: int


def alert_key(*, tenant_id: int | None, kind: str, cause: str) -> str:
    return f"{'-' if tenant_id is None else tenant_id}:{kind}:{cause}"


# One statement, atomic whoever else raises the same cause at the same moment: the insert, or (the partial
# unique index `alert_open_key_unique` says an open alert of the key exists) a bump of that alert. PostgreSQL and
# SQLite (3.35+) both take this form. `occurrences` is 1 exactly when this statement inserted the row.
_UPSERT = """
INSERT INTO alerts_alert (key, tenant_id, kind, cause, level, title, detail, link, first_seen_at, last_seen_at,
                          occurrences, resolution, acknowledged_by)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 1, '', '')
ON CONFLICT (key) WHERE resolved_at IS NULL DO UPDATE SET
    occurrences = alerts_alert.occurrences + 1, last_seen_at = excluded.last_seen_at,
    level = excluded.level, title = excluded.title, detail = excluded.detail, link = excluded.link
RETURNING id, occurrences
"""


def alert_raise(*, kind: str, cause: str, title: str, tenant_id: int | None = None, level: str = AlertLevel.ERROR,
                detail: str = "", link: str = "") -> Raised:
    """Raise the alert of (tenant, kind, cause), once: the first call makes the alert, mails the operators and
    enqueues the webhooks (after commit); a repeat while it is open only counts (`occurrences`, `last_seen_at`)
    and brings its title and detail up to date. An acknowledged alert stays acknowledged."""
    if kind not in AlertKind.values:
        raise errors.invalid("invalid_alert_kind", f"kind must be one of {sorted(AlertKind.values)}.")
    if level not in AlertLevel.values:
        raise errors.invalid("invalid_alert_level", f"level must be one of {sorted(AlertLevel.values)}.")
    if not isinstance(cause, str) or not cause or len(cause) > 200:
        raise errors.invalid("invalid_alert_cause", "cause must be a non-empty string of at most 200 characters.")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    key = alert_key(tenant_id=tenant_id, kind=kind, cause=cause)
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT, [key, tenant_id, kind, cause, level, title[:300], detail[:5000], link[:300], now, now])
        alert_id, occurrences = cursor.fetchone()
    created = occurrences == 1
    if created:
        logger.warning("alert %s raised: %s %s: %s", alert_id, kind, cause, title)
        transaction.on_commit(lambda: alert_mail_send(alert_id=alert_id), robust=True)
        webhooks_enqueue(alert_id=alert_id, tenant_id=tenant_id)
    return Raised(alert_id, created, occurrences)


def alert_resolve(*, kind: str, cause: str, tenant_id: int | None = None, resolution: str = "") -> int:
    """The cause is gone: close its open alert (if any). Returns how many were closed (0 or 1)."""
    return alerts_resolve(kind=kind, causes=[cause], tenant_id=tenant_id, resolution=resolution)


def alerts_resolve(*, kind: str, causes: list[str], tenant_id: int | None = None, any_tenant: bool = False,
                   resolution: str = "") -> int:
    """`alert_resolve` for several causes of one kind, in one statement, of `tenant_id` (None: the service's own
    alerts) or, with `any_tenant`, of whichever tenant (causes that name an id unique across tenants, such as
    "request:42"). An index lookup per cause on the open alerts; nothing written when none is open (the cheap
    common case)."""
    if not causes:
        return 0
    if any_tenant:
        alerts = Alert.objects.filter(kind=kind, cause__in=list(causes))
    else:
        alerts = Alert.objects.filter(key__in=[alert_key(tenant_id=tenant_id, kind=kind, cause=c) for c in causes])
    resolution = (resolution or "the cause was resolved")[:300]
    closed = alerts.filter(resolved_at__isnull=True).update(resolved_at=timezone.now(), resolution=resolution)
    if closed:
        logger.info("%s %s alert(s) resolved: %s", closed, kind, resolution)
    return closed


def alerts_resolve_except(*, kind: str, keep: set[tuple[int | None, str]], resolution: str) -> int:
    """Close every open alert of `kind` whose (tenant id, cause) is not in `keep`: what a periodic check does
    with the causes it no longer finds (the audit's gaps, the requests near their deadline)."""
    keep_keys = {alert_key(tenant_id=tenant_id, kind=kind, cause=cause) for tenant_id, cause in keep}
    stale = [pk for pk, key in Alert.objects.filter(kind=kind, resolved_at__isnull=True).values_list("pk", "key")
             if key not in keep_keys]
    if not stale:
        return 0
    return Alert.objects.filter(pk__in=stale, resolved_at__isnull=True).update(
        resolved_at=timezone.now(), resolution=resolution[:300])


def alerts_acknowledge(*, alert_ids: list[int], actor: str) -> int:
    """Someone saw these and is on it: they leave the admin banner; they still close by themselves when their
    cause does, and a repeat of the cause meanwhile counts without a new mail. Resolved or acknowledged alerts
    are left as they are."""
    return Alert.objects.filter(pk__in=alert_ids, resolved_at__isnull=True, acknowledged_at__isnull=True).update(
        acknowledged_at=timezone.now(), acknowledged_by=actor[:200])


# --- mail ------------------------------------------------------------------------------------------------------

def operators_emails() -> list[str]:
    """The addresses of the operators: active users of the operator group with an address. Admin users belong to
    no tenant (every operator works every tenant's queue), so every operator hears of every tenant's alerts."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(groups__name=OPERATOR_GROUP, is_active=True).exclude(email="")
    return sorted(set(users.values_list("email", flat=True)))


def alert_mail_send(*, alert_id: int) -> bool:
    """Mail the alert to the operators, once: the claim (`mailed_at`) is a conditional update, so a second call
    for the same alert sends nothing. Runs after the alert's commit. A mail the backend refuses is logged and
    the claim released (the alert is still in the admin's banner and list)."""
    recipients = operators_emails()
    if not recipients:
        logger.warning("alert %s: no operator has an e-mail address; nobody was mailed", alert_id)
        return False
    if not Alert.objects.filter(pk=alert_id, mailed_at__isnull=True).update(mailed_at=timezone.now()):
        return False
    alert = Alert.objects.select_related("tenant").get(pk=alert_id)
    where = f"tenant {alert.tenant.name}" if alert.tenant else "the whole service"
    body = (f"{alert.title}\n\n{alert.detail}\n\nKind: {alert.get_kind_display()}\nConcerns: {where}\n"
            f"Cause: {alert.cause}\nFirst seen: {alert.first_seen_at:%Y-%m-%d %H:%M UTC}\n")
    if alert.link:
        body += f"\nSee: {settings.LEDGER_ALERT_ADMIN_URL.rstrip('/')}{alert.link}\n"
    body += ("\nYou get one mail per alert: repeats of the same cause are counted on the alert, which closes by "
             "itself once its cause is resolved.\n")
    message = EmailMessage(subject=f"[Forgetting Ledger] {alert.get_level_display()}: {alert.title}"[:250],
                           body=body, to=recipients, from_email=settings.DEFAULT_FROM_EMAIL)
    try:
        message.send()
    except OSError as exc:  # smtplib's errors are OSErrors
        Alert.objects.filter(pk=alert_id).update(mailed_at=None)
        logger.error("alert %s: the mail to the operators failed: %s", alert_id, exc)
        return False
    return True


# --- webhooks --------------------------------------------------------------------------------------------------

def webhook_endpoints_for(*, tenant_id: int | None) -> list[int]:
    """The active endpoints that hear of an alert of `tenant_id`: the tenant's own and the service-wide ones."""
    endpoints = WebhookEndpoint.objects.filter(active=True)
    if tenant_id is None:
        endpoints = endpoints.filter(tenant__isnull=True)
    else:
        from django.db.models import Q

        endpoints = endpoints.filter(Q(tenant__isnull=True) | Q(tenant_id=tenant_id))
    return list(endpoints.values_list("pk", flat=True))


def webhooks_enqueue(*, alert_id: int, tenant_id: int | None) -> int:
    """One delivery task per endpoint, enqueued after commit (an alert that rolled back is never sent)."""
    from alerts.tasks import webhook_deliver

    endpoint_ids = webhook_endpoints_for(tenant_id=tenant_id)
    for endpoint_id in endpoint_ids:
        delivery_id = str(uuid.uuid4())
        transaction.on_commit(lambda e=endpoint_id, d=delivery_id: webhook_deliver.delay(e, alert_id, d),
                              robust=True)
    return len(endpoint_ids)


def webhook_endpoint_create(*, url: str, secret: str, tenant_id: int | None = None, description: str = "",
                            actor: str) -> WebhookEndpoint:
    """A webhook endpoint, validated as the admin's form validates it (bad input: `invalid_webhook_url`,
    `invalid_webhook_secret`; nothing is saved)."""
    from django.core.exceptions import ValidationError

    endpoint = WebhookEndpoint(url=url, secret=secret, tenant_id=tenant_id, description=description)
    try:
        endpoint.full_clean(exclude=["tenant"] if tenant_id is None else None)
    except ValidationError as exc:
        field, problems = next(iter(exc.error_dict.items()))
        raise errors.invalid(problems[0].code or f"invalid_webhook_{field}", " ".join(problems[0].messages),
                             field=field) from None
    endpoint.save()
    logger.info("webhook endpoint %s added by %s", endpoint.pk, actor)
    return endpoint
