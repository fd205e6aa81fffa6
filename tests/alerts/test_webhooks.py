"""Webhooks: delivered to a real HTTP receiver on 127.0.0.1, signed so that the receiver can check the body and
its timestamp with the shared secret, each attempt recorded; redirects never followed; bad configuration refused
with a clear error."""
from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

import pytest

from alerts.errors import AlertsError
from alerts.models import AlertKind, WebhookDelivery, WebhookEndpoint
from alerts.services import alert_raise, webhook_endpoint_create, webhook_endpoints_for
from alerts.webhooks import WebhookFailed, webhook_attempt

pytestmark = pytest.mark.django_db
SECRET = "s3cret-shared-with-the-receiver"
D1 = str(uuid.uuid4())


def receiver_verifies(secret: str, headers: dict, body: bytes, *, tolerance: int = 300) -> bool:
    """What the README tells a receiver to do."""
    timestamp = headers["X-Ledger-Timestamp"]
    expected = "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["X-Ledger-Signature"]) and abs(time.time() - int(timestamp)) <= tolerance


def test_a_delivery_reaches_the_receiver_signed_and_is_recorded(receiver, tenant):
    endpoint = webhook_endpoint_create(url=receiver.url, secret=SECRET, tenant_id=tenant.pk, actor="test")
    raised = alert_raise(kind=AlertKind.DEADLINE_NEAR, cause="request:9", tenant_id=tenant.pk, title="Due in 2 days")

    delivery = webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=D1, attempt=1)

    (got,) = receiver.received
    assert got.path == "/hooks/ledger" and got.headers["Content-Type"] == "application/json"
    assert receiver_verifies(SECRET, got.headers, got.body)
    assert not receiver_verifies("another-secret-of-16+", got.headers, got.body)
    assert not receiver_verifies(SECRET, got.headers, got.body.replace(b"Due in 2", b"Due in 9"))
    replayed = {**got.headers, "X-Ledger-Timestamp": str(int(got.headers["X-Ledger-Timestamp"]) + 3600)}
    assert not receiver_verifies(SECRET, replayed, got.body)  # the timestamp is signed: it cannot be refreshed
    body = json.loads(got.body)
    assert body["event"] == "alert.raised" and body["delivery_id"] == D1 == got.headers["X-Ledger-Delivery"]
    assert body["alert"]["kind"] == "deadline_near" and body["alert"]["tenant"] == "acme"
    assert delivery.ok and delivery.status_code == 200 and delivery.attempt == 1
    assert list(WebhookDelivery.objects.values_list("ok", flat=True)) == [True]


def test_a_failed_attempt_is_recorded_and_raised_for_a_retry(receiver, tenant):
    endpoint = webhook_endpoint_create(url=receiver.url, secret=SECRET, actor="test")
    raised = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="t")
    receiver.statuses = [500]

    with pytest.raises(WebhookFailed):
        webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=str(uuid.uuid4()), attempt=1)

    (row,) = WebhookDelivery.objects.all()
    assert (row.ok, row.status_code, row.error) == (False, 500, "HTTP 500")


def test_a_redirect_is_not_followed(receiver, tenant):
    receiver.redirect_to = "http://127.0.0.1:1/elsewhere"
    endpoint = webhook_endpoint_create(url=receiver.url, secret=SECRET, actor="test")
    raised = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="t")

    with pytest.raises(WebhookFailed):
        webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=str(uuid.uuid4()), attempt=1)

    assert len(receiver.received) == 1
    (row,) = WebhookDelivery.objects.all()
    assert row.status_code == 302 and "not followed" in row.error and not row.ok


def test_a_receiver_that_is_down_is_a_recorded_failure(tenant):
    endpoint = webhook_endpoint_create(url="http://127.0.0.1:9/nothing-listens", secret=SECRET, actor="test")
    raised = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="t")
    with pytest.raises(WebhookFailed):
        webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=str(uuid.uuid4()), attempt=1)
    (row,) = WebhookDelivery.objects.all()
    assert row.status_code is None and "refused" in row.error.lower()


def test_an_inactive_endpoint_gets_nothing(receiver, tenant):
    endpoint = webhook_endpoint_create(url=receiver.url, secret=SECRET, actor="test")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
    raised = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="t")
    assert webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=str(uuid.uuid4()), attempt=1) is None
    assert receiver.received == [] and not WebhookDelivery.objects.exists()


def test_a_tenants_endpoint_hears_only_that_tenants_alerts(tenant, other_tenant):
    mine = webhook_endpoint_create(url="https://hooks.example.org/a", secret=SECRET, tenant_id=tenant.pk, actor="t")
    theirs = webhook_endpoint_create(url="https://hooks.example.org/b", secret=SECRET, tenant_id=other_tenant.pk,
                                     actor="t")
    everything = webhook_endpoint_create(url="https://hooks.example.org/c", secret=SECRET, actor="t")
    assert set(webhook_endpoints_for(tenant_id=tenant.pk)) == {mine.pk, everything.pk}
    assert set(webhook_endpoints_for(tenant_id=None)) == {everything.pk}
    assert theirs.pk not in webhook_endpoints_for(tenant_id=tenant.pk)


def test_raising_enqueues_one_delivery_per_endpoint_after_commit_and_none_for_a_repeat(
        tenant, monkeypatch, django_capture_on_commit_callbacks):
    from alerts import tasks

    sent = []
    monkeypatch.setattr(tasks.webhook_deliver, "delay", lambda *args: sent.append(args))
    webhook_endpoint_create(url="https://hooks.example.org/a", secret=SECRET, tenant_id=tenant.pk, actor="t")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        raised = alert_raise(kind=AlertKind.DEADLINE_NEAR, cause="request:1", tenant_id=tenant.pk, title="t")
        alert_raise(kind=AlertKind.DEADLINE_NEAR, cause="request:1", tenant_id=tenant.pk, title="t")
    assert sent == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert len(sent) == 1 and sent[0][1] == raised.alert_id


@pytest.mark.parametrize("url, secret, code", [
    ("ftp://hooks.example.org/x", SECRET, "invalid_webhook_url"),
    ("file:///etc/passwd", SECRET, "invalid_webhook_url"),
    ("javascript:alert(1)", SECRET, "invalid_webhook_url"),
    ("hooks.example.org/x", SECRET, "invalid_webhook_url"),
    ("https://user:pw@hooks.example.org/x", SECRET, "invalid_webhook_url"),
    ("https://hooks.example.org:notaport/x", SECRET, "invalid_webhook_url"),
    ("https://", SECRET, "invalid_webhook_url"),
    ("https://hooks.example.org/x", "short", "invalid_webhook_secret"),
    ("https://hooks.example.org/x", " padded-secret-of-length ", "invalid_webhook_secret"),
])
def test_bad_webhook_config_is_refused_with_a_clear_error(url, secret, code):
    with pytest.raises(AlertsError) as refused:
        webhook_endpoint_create(url=url, secret=secret, actor="test")
    assert refused.value.code == code and refused.value.detail
    assert not WebhookEndpoint.objects.exists()


def test_the_readmes_receiver_snippet_accepts_a_real_delivery_and_refuses_a_forged_one(receiver):
    from tests.test_readme import marked_block

    namespace: dict = {}
    exec(marked_block("alerts-webhook-verify"), namespace)  # noqa: S102 - the README's own code, as written
    verified = namespace["ledger_webhook_verified"]
    endpoint = webhook_endpoint_create(url=receiver.url, secret=SECRET, actor="test")
    raised = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="t")
    webhook_attempt(endpoint_id=endpoint.pk, alert_id=raised.alert_id, delivery_id=str(uuid.uuid4()), attempt=1)

    (got,) = receiver.received
    assert verified(SECRET, got.headers, got.body)
    assert not verified(SECRET, got.headers, got.body + b" ")
    assert not verified("not-the-secret-at-all", got.headers, got.body)
