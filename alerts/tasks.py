"""Celery tasks of the alerts app: a webhook's delivery (retried with exponential backoff) and nothing else;
the check for requests near their deadline is dsr's (dsr.tasks.deadline_alerts), scheduled by alerts
migration 0002."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings

from alerts.webhooks import WebhookFailed, webhook_attempt


# Bounded: LEDGER_ALERT_WEBHOOK_RETRIES retries after the first attempt, waiting LEDGER_ALERT_WEBHOOK_BACKOFF
# seconds × 2^n (at most an hour) between them; each attempt is a WebhookDelivery row. Late acknowledgement (the
# settings' default): a worker lost mid-attempt sends it again, and the receiver drops a repeat by X-Ledger-Delivery.
@shared_task(name="alerts.webhook_deliver", bind=True, autoretry_for=(WebhookFailed,),
             max_retries=settings.LEDGER_ALERT_WEBHOOK_RETRIES, retry_backoff=settings.LEDGER_ALERT_WEBHOOK_BACKOFF,
             retry_backoff_max=3600, retry_jitter=settings.LEDGER_ALERT_WEBHOOK_JITTER)
def webhook_deliver(self, endpoint_id: int, alert_id: int, delivery_id: str, event: str = "alert.raised") -> bool:
    return webhook_attempt(endpoint_id=endpoint_id, alert_id=alert_id, delivery_id=delivery_id,
                           attempt=self.request.retries + 1, event=event) is not None
