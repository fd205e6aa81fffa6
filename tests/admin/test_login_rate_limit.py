"""The admin login is rate-limited by django-axes (config/settings.py): AXES_FAILURE_LIMIT failures lock the
account from every address, and lock the address for every account, until the cool-off has passed. A lockout
is a page that says so (429), never a 500; API tokens and the tests' logins are not touched by it."""
from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.http import HttpRequest
from django.test import Client
from django.utils import timezone

from memory.services.tokens import token_issue
from tests.admin.conftest import PASSWORD, staff_user
from tests.admin.actions import act, covers, said

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"
LIMIT = settings.AXES_FAILURE_LIMIT


def login(username: str, password: str, address: str) -> tuple[Client, object]:
    client = Client(REMOTE_ADDR=address)
    return client, client.post(LOGIN, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def locked(response) -> bool:
    return response.status_code == 429 and b"Too many failed logins" in response.content


@pytest.fixture
def staff():
    return staff_user("operator"), staff_user("legal")


def test_the_limit_is_sensible():
    assert 3 <= LIMIT <= 10 and timedelta(minutes=5) <= settings.AXES_COOLOFF_TIME <= timedelta(hours=24)
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]


def test_failed_logins_for_one_account_lock_it_from_every_address(staff):
    operator, legal = staff
    # Given LIMIT wrong passwords for one account, each from another address
    for i in range(LIMIT):
        _, response = login(operator.username, "wrong", f"10.1.0.{i + 1}")
        assert response.status_code in (200, 429)
    # When the right password comes from yet another address
    client, response = login(operator.username, PASSWORD, "10.1.9.9")
    # Then it is refused with the lockout page, and no session is opened
    assert locked(response) and operator.username.encode() in response.content
    assert not logged_in(client)
    # But another account logs in from that same address, and from one of the guessing ones
    for address in ("10.1.9.9", "10.1.0.1"):
        client, response = login(legal.username, PASSWORD, address)
        assert response.status_code == 302 and logged_in(client), address
    # (the refused attempt is on record too: an attempt during a lockout starts the cool-off again)
    assert AccessAttempt.objects.filter(username=operator.username).count() == LIMIT + 1


def test_failed_logins_from_one_address_lock_it_for_every_account(staff):
    operator, legal = staff
    # Given LIMIT wrong passwords from one address, each for another account
    for i in range(LIMIT):
        login(f"guess-{i}", "wrong", "10.2.0.1")
    # Then an account with no failure of its own cannot log in from there, right password or not
    client, response = login(legal.username, PASSWORD, "10.2.0.1")
    assert locked(response) and not logged_in(client)
    # But it logs in from any other address
    client, response = login(legal.username, PASSWORD, "10.2.0.2")
    assert response.status_code == 302 and logged_in(client)


def test_a_right_password_below_the_limit_logs_in(staff):
    operator, _ = staff
    for _ in range(LIMIT - 1):
        client, response = login(operator.username, "wrong", "10.3.0.1")
        assert response.status_code == 200 and b'id="login-form"' in response.content  # the form, again
    client, response = login(operator.username, PASSWORD, "10.3.0.1")
    assert response.status_code == 302 and logged_in(client)
    assert AccessLog.objects.filter(username=operator.username, ip_address="10.3.0.1").exists()


def test_the_lockout_ends_after_the_cool_off(staff):
    operator, _ = staff
    for _ in range(LIMIT):
        login(operator.username, "wrong", "10.4.0.1")
    assert locked(login(operator.username, PASSWORD, "10.4.0.1")[1])
    # When the attempts are older than the cool-off
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    # Then the account and the address log in again
    client, response = login(operator.username, PASSWORD, "10.4.0.1")
    assert response.status_code == 302 and logged_in(client)


def test_api_tokens_and_test_logins_work_from_a_locked_address(staff):
    operator, _ = staff
    token, key = token_issue(tenant_name="acme", role="agent")
    for i in range(LIMIT):
        login(f"guess-{i}", "wrong", "10.5.0.1")
    # An API token is not a password: a locked address still uses it
    api = Client(REMOTE_ADDR="10.5.0.1", HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/memory/search?q=hello").status_code == 200
    assert api.get("/api/v1/memory/search?q=hello", HTTP_AUTHORIZATION="Token not-a-token").status_code == 401
    # The tests' logins: force_login, and client.login with the request axes needs
    forced = Client(REMOTE_ADDR="10.5.0.1")
    forced.force_login(operator)
    assert logged_in(forced)
    assert Client().login(request=HttpRequest(), username=operator.username, password=PASSWORD)


# --- the admin's screens for it (superusers only) --------------------------------------------------------

@covers(("axes.AccessAttempt", "delete_selected"))
def test_deleting_the_attempts_lifts_the_lockout(client_as, staff):
    operator, _ = staff
    for _ in range(LIMIT):
        login(operator.username, "wrong", "10.6.0.1")
    root = client_as("superuser")
    # When a superuser deletes the account's attempts, through the confirmation page
    act(root, AccessAttempt, "delete_selected",
        AccessAttempt.objects.filter(username=operator.username).values_list("pk", flat=True), confirm=True)
    # Then the account logs in again
    assert not AccessAttempt.objects.filter(username=operator.username).exists()
    client, response = login(operator.username, PASSWORD, "10.6.0.1")
    assert response.status_code == 302 and logged_in(client)


@covers(("axes.AccessAttempt", "cleanup_expired_attempts"))
def test_cleanup_removes_only_the_attempts_past_the_cool_off(client_as):
    root = client_as("superuser")  # (first: a login cleans up too)
    login("old-guess", "wrong", "10.7.0.1")
    login("new-guess", "wrong", "10.7.0.2")
    AccessAttempt.objects.filter(username="old-guess").update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(minutes=1))
    response = act(root, AccessAttempt, "cleanup_expired_attempts", AccessAttempt.objects.values_list("pk", flat=True))
    assert "Cleaned up 1 expired access attempts." in said(response)
    assert list(AccessAttempt.objects.values_list("username", flat=True)) == ["new-guess"]


def test_the_login_log_is_read_only_and_no_role_sees_the_attempts(client_as):
    roles = {role: client_as(role) for role in ("operator", "legal", "auditor")}
    login("operator-ann", PASSWORD, "10.8.0.1")
    root = client_as("superuser")
    entry = AccessLog.objects.get(username="operator-ann", ip_address="10.8.0.1")
    assert root.get("/admin/axes/accesslog/").status_code == 200
    assert root.post(f"/admin/axes/accesslog/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AccessLog.objects.filter(pk=entry.pk).exists()
    for role, client in roles.items():
        assert client.get("/admin/axes/accessattempt/").status_code == 403, role
