"""On a real Celery worker (a separate process, the Redis broker, PostgreSQL): a workflow step fails for good
(the database refuses it: a trigger, no mock), the request's alert is raised once, the operators get one mail,
and the tenant's webhook, a real HTTP receiver on 127.0.0.1 that answers 500 twice, gets the signed alert on
the third attempt after backoff, each attempt a WebhookDelivery row; then the step goes through and the alert
resolves."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from alerts.models import Alert, AlertKind, WebhookDelivery
from alerts.services import webhook_endpoint_create
from dsr.services.workflow import workflow_start
from dsr.tasks import step_enqueue
from tests.alerts.test_webhooks import SECRET, receiver_verifies
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.workers import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _refuse_planning(request_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"""
            CREATE OR REPLACE FUNCTION alerts_test_refuse_plan() RETURNS trigger AS $$
            BEGIN
                IF NEW.id = {int(request_id)} AND NEW.status = 'planned' THEN
                    RAISE EXCEPTION 'planning request % refused by the test''s trigger', NEW.id;
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql""")
        cursor.execute("CREATE TRIGGER alerts_test_refuse_plan BEFORE UPDATE ON dsr_subjectrequest "
                       "FOR EACH ROW EXECUTE FUNCTION alerts_test_refuse_plan()")


def _alert_mails(mail_dir: Path) -> list[bytes]:
    mails = [path.read_bytes() for path in Path(mail_dir).glob("*.eml")]
    return [mail for mail in mails if b"Subject: [Forgetting Ledger]" in mail]


def _allow_planning() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS alerts_test_refuse_plan ON dsr_subjectrequest")
        cursor.execute("DROP FUNCTION IF EXISTS alerts_test_refuse_plan()")


def test_a_failed_workflow_step_alerts_once_mails_once_and_the_webhook_retries_with_backoff(
        workers, receiver, operators, tmp_path):
    scenario = erasure_scenario()
    request = verified_request(scenario)
    webhook_endpoint_create(url=receiver.url, secret=SECRET, tenant_id=scenario.tenant.pk, actor="test")
    receiver.statuses = [500, 500]
    mail_dir = tmp_path / "mail"
    workers("alerts", LEDGER_ALERT_WEBHOOK_BACKOFF="1", LEDGER_ALERT_WEBHOOK_JITTER="false",
            EMAIL_BACKEND="config.mail.FileEmailBackend", EMAIL_FILE_PATH=str(mail_dir))
    _refuse_planning(request.pk)
    try:
        workflow_start(request=request, actor="operator:test")

        alert = wait_for(lambda: Alert.objects.filter(kind=AlertKind.WORKFLOW_FAILED).first(), timeout=60,
                         what="the workflow failure's alert")
        deliveries = wait_for(lambda: list(WebhookDelivery.objects.order_by("attempt")) if
                              WebhookDelivery.objects.filter(ok=True).exists() else None,
                              timeout=60, what="the webhook's third attempt")
    finally:
        _allow_planning()

    assert alert.cause == f"request:{request.pk}" and alert.tenant_id == scenario.tenant.pk
    assert "plan step" in alert.title and "refused by the test's trigger" in alert.detail
    assert [(d.attempt, d.status_code, d.ok) for d in deliveries] == [(1, 500, False), (2, 500, False), (3, 200, True)]
    assert len({d.delivery_id for d in deliveries}) == 1
    assert len(receiver.received) == 3
    gaps = [b.at - a.at for a, b in zip(receiver.received, receiver.received[1:])]
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9, gaps  # exponential backoff: 1 s, then 2 s
    for got in receiver.received:
        assert receiver_verifies(SECRET, got.headers, got.body)
        assert json.loads(got.body)["alert"]["id"] == alert.pk
    mails = wait_for(lambda: _alert_mails(mail_dir), timeout=20, what="the operators' mail")
    assert len(mails) == 1 and b"failed at the plan step" in mails[0]
    assert b"To: ann@example.org, bob@example.org" in mails[0]

    # The step is retried (as workflow_resume would) and goes through: the alert resolves by itself.
    step_enqueue(request_id=request.pk, step="plan")
    resolved = wait_for(lambda: Alert.objects.filter(pk=alert.pk, resolved_at__isnull=False).first(), timeout=90,
                        what="the alert to resolve")
    assert resolved.occurrences == 1 and Alert.objects.filter(kind=AlertKind.WORKFLOW_FAILED).count() == 1
    assert len(_alert_mails(mail_dir)) == 1  # no mail for a resolution (the subject's notice is another mail)
