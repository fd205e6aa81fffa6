"""The alerts in the admin: a banner on every page while unresolved alerts exist (one cheap query), the list it
links to, the acknowledge action (operators may, auditors may not), the webhook endpoints' form (bad input gets
a clear error; the secret is never shown again), the deliveries read-only."""
from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from alerts.models import Alert, AlertKind, WebhookDelivery, WebhookEndpoint
from alerts.services import alert_raise, alert_resolve

pytestmark = pytest.mark.django_db
SECRET = "s3cret-shared-with-the-receiver"


def _raise(n: int = 1, **kwargs):
    return [alert_raise(kind=AlertKind.SWEEP_FAILED, cause=f"kind-{i}", title=f"The sweep {i} failed", **kwargs)
            for i in range(n)]


def _alert_queries(client, url: str) -> tuple[int, int, bytes]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries), sum("alerts_alert" in q["sql"] for q in queries), response.content


@pytest.mark.parametrize("role", ["operator", "legal", "auditor"])
def test_the_banner_shows_on_every_admin_page_with_one_query(client_as, role):
    client = client_as(role)
    client.get("/admin/")  # warm: the session, the permissions cache
    pages = ["/admin/", "/admin/dsr/subjectrequest/", "/admin/memory/record/", "/admin/retention/legalhold/"]
    before = {url: _alert_queries(client, url)[0] for url in pages}
    _raise(3)
    for url in pages:
        total, on_alerts, content = _alert_queries(client, url)
        assert b'id="alerts-banner"' in content and b"3 open alerts" in content, url
        assert b"/admin/alerts/alert/?state=open" in content
        assert on_alerts == 1 and total == before[url], url  # the same count query as with no alert


def test_no_banner_without_open_alerts_or_without_the_permission(client_as, admin_client, django_user_model):
    operator = client_as("operator")
    (raised,) = _raise()
    alert_resolve(kind=AlertKind.SWEEP_FAILED, cause="kind-0")
    assert b'id="alerts-banner"' not in operator.get("/admin/").content
    _raise()
    staff = django_user_model.objects.create_user("nobody", "n@example.org", "pw", is_staff=True)
    from django.test import Client

    plain = Client()
    plain.force_login(staff)
    assert b'id="alerts-banner"' not in plain.get("/admin/").content
    assert b'id="alerts-banner"' in admin_client.get("/admin/").content


def test_an_operator_acknowledges_and_the_banner_goes(client_as):
    operator = client_as("operator")
    (first, second) = _raise(2)
    page = operator.get("/admin/alerts/alert/?state=open")
    assert page.status_code == 200 and b"The sweep 0 failed" in page.content and b"acknowledge" in page.content

    done = operator.post("/admin/alerts/alert/", {"action": "acknowledge", "_selected_action": [first.alert_id,
                                                                                                   second.alert_id]})
    assert done.status_code == 302
    assert Alert.objects.filter(acknowledged_by="admin:operator-ann").count() == 2
    assert b'id="alerts-banner"' not in operator.get("/admin/").content
    assert operator.get("/admin/alerts/alert/?state=acknowledged").status_code == 200


def test_an_auditor_cannot_acknowledge(client_as):
    auditor = client_as("auditor")
    (raised,) = _raise()
    page = auditor.get("/admin/alerts/alert/")
    assert page.status_code == 200 and b'value="acknowledge"' not in page.content
    auditor.post("/admin/alerts/alert/", {"action": "acknowledge", "_selected_action": [raised.alert_id]})
    assert Alert.objects.get().acknowledged_at is None
    assert auditor.get(f"/admin/alerts/alert/{raised.alert_id}/change/").status_code == 200
    assert auditor.post(f"/admin/alerts/alert/{raised.alert_id}/delete/").status_code == 403


def test_the_webhook_form_refuses_bad_input_with_clear_errors(admin_client, tenant):
    page = admin_client.get("/admin/alerts/webhookendpoint/add/")
    assert page.status_code == 200
    for url, secret, message in [
        ("ftp://hooks.example.org/x", SECRET, b"must start with http:// or https://"),
        ("not a url", SECRET, b"must start with http:// or https://"),
        ("https://user:pw@hooks.example.org/x", SECRET, b"no user name or password"),
        ("https://hooks.example.org/x", "short", b"at least 16 characters"),
        ("x" * 600, SECRET, b"at most 500 characters"),
    ]:
        response = admin_client.post("/admin/alerts/webhookendpoint/add/",
                                     {"url": url, "secret": secret, "active": "on", "tenant": tenant.pk})
        assert response.status_code == 200 and message in response.content, (url, secret)
    response = admin_client.post("/admin/alerts/webhookendpoint/add/",
                                 {"url": "https://hooks.example.org/x", "secret": SECRET, "tenant": "nope"})
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    assert not WebhookEndpoint.objects.exists()

    response = admin_client.post("/admin/alerts/webhookendpoint/add/",
                                 {"url": "https://hooks.example.org/x", "secret": SECRET, "active": "on"})
    assert response.status_code == 302
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret == SECRET and endpoint.tenant is None


def test_the_secret_is_kept_on_change_and_never_shown_to_a_reader(admin_client, client_as):
    endpoint = WebhookEndpoint.objects.create(url="https://hooks.example.org/x", secret=SECRET)
    change = admin_client.get(f"/admin/alerts/webhookendpoint/{endpoint.pk}/change/")
    assert change.status_code == 200 and SECRET.encode() not in change.content
    response = admin_client.post(f"/admin/alerts/webhookendpoint/{endpoint.pk}/change/",
                                 {"url": "https://hooks.example.org/y", "secret": "", "active": "on"})
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.secret == SECRET and endpoint.url == "https://hooks.example.org/y"

    reader = client_as("operator").get(f"/admin/alerts/webhookendpoint/{endpoint.pk}/change/")
    assert reader.status_code == 200 and SECRET.encode() not in reader.content
    assert client_as("operator").get("/admin/alerts/webhookendpoint/add/").status_code == 403


def test_deliveries_are_visible_and_read_only(client_as, admin_client):
    endpoint = WebhookEndpoint.objects.create(url="https://hooks.example.org/x", secret=SECRET)
    (raised,) = _raise()
    now = timezone.now()
    delivery = WebhookDelivery.objects.create(delivery_id=uuid.uuid4(), endpoint=endpoint, alert_id=raised.alert_id,
                                              attempt=1, started_at=now, finished_at=now, status_code=500,
                                              error="HTTP 500")
    for client in (client_as("operator"), admin_client):
        listing = client.get("/admin/alerts/webhookdelivery/")
        assert listing.status_code == 200 and b"HTTP 500" in listing.content
        page = client.get(f"/admin/alerts/webhookdelivery/{delivery.pk}/change/")
        assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.get("/admin/alerts/webhookdelivery/add/").status_code == 403
