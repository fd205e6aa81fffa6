"""Every admin action of every ModelAdmin, run as a browser runs it: a POST to the changelist with `action`
and `_selected_action`, as a logged-in user of the role that may use it, through the confirmation page where
there is one. No answer is a 5xx, and each test asserts what reached storage.

`test_every_registered_action_has_a_test` fails when an admin offers an action that no test covers
(`@covers`, tests/admin/actions.py; in any module of tests/admin), so that a new action, ours or a library's,
cannot ship untested.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from config.celery import app as celery_app
from dsr.models import RequestStatus, RequestTransition, SubjectRequest
from memory.models import DeletedRecord, ForgetEvent, Record, Tenant
from memory.services.tokens import token_issue
from retention.models import ContentClass
from retention.services import hold_place
from tests.admin.actions import COVERED, act, changelist, covers, offered, said
from tests.admin.conftest import staff_user
from tests.factories import record, rule
from tombstones.models import KeyEvent, SigningKey, Tombstone
from tombstones.services import key_current

pytestmark = pytest.mark.django_db

ROLES = ("operator", "legal", "auditor")


# --- the registry ----------------------------------------------------------------------------------------

def test_every_registered_action_has_a_test():
    # Given every action test of tests/admin (each module's `@covers` fills COVERED when it is imported)
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("test_"):
            importlib.import_module(f"tests.admin.{module.name}")
    # And every admin, as a superuser and as each role sees it
    users = [staff_user("superuser")] + [staff_user(role) for role in ROLES]
    actions = {(model._meta.label, name) for model in admin.site._registry for user in users
               for name in offered(model, user)}
    # Then each action offered to anyone has its test below
    assert actions - COVERED == set(), "admin actions with no test (@covers) in tests/admin"
    assert ("memory.Record", "forget_hard") in actions  # (and the enumeration sees the actions at all)


# --- memory: the bulk hard forget ------------------------------------------------------------------------

@pytest.fixture
def records():
    """Three records of one tenant: one free, one under a compliance rule, one under a legal hold; and a free
    record of a second tenant."""
    tenant = Tenant.objects.create(name="acme")
    chat = ContentClass.objects.create(tenant=tenant, name="chat")
    trades = ContentClass.objects.create(tenant=tenant, name="trade-ledger")
    rule(tenant, trades, days=7 * 365, authority="SEC 17a-4(f)", protects="content", mode="compliance")
    made = {
        "free": record(tenant, chat, scope="user:5/session:1", content="call me at 555 0100", subject="s-5"),
        "locked": record(tenant, trades, scope="user:5/session:1", content="sold 50 ACME", subject="s-5"),
        "held": record(tenant, chat, scope="user:5/session:2", content="the disputed chat", subject="s-5"),
    }
    hold_place(tenant=tenant, matter="Roe v. Acme", authority="court order 26-cv-31", record_ids=[made["held"].pk],
               actor="legal")
    other = Tenant.objects.create(name="globex")
    made["other"] = record(other, ContentClass.objects.create(tenant=other, name="chat"), content="globex note")
    return made


def _tombstoned(pk: int) -> bool:
    """A signed tombstone of a hard forget names the record as deleted."""
    events = ForgetEvent.objects.filter(path="admin", mode="hard").values_list("public_id", flat=True)
    for tombstone in Tombstone.objects.filter(id__in=list(events)):
        statement = json.loads(bytes(tombstone.payload))
        if any(str(r["record_id"]) == str(pk) and r["outcome"] == "deleted" for r in statement["execution"]["records"]):
            return True
    return False


@covers(("memory.Record", "forget_hard"))
def test_bulk_hard_forget_deletes_the_free_records_with_a_tombstone_and_refuses_the_locked_ones_saying_why(
        client_as, records):
    # Given a superuser (the only one with the delete permission) who selects all four records
    root = client_as("superuser")
    ids = [r.pk for r in records.values()]

    # When they run the bulk hard forget from the changelist
    response = act(root, Record, "forget_hard", ids)

    # Then the free records are gone, each with a signed tombstone and its deletion on record
    assert response.status_code == 200
    for name in ("free", "other"):
        pk = records[name].pk
        assert not Record.objects.filter(pk=pk).exists(), name
        assert DeletedRecord.objects.filter(record_id=pk).exists(), name
        assert _tombstoned(pk), name
    # And the guard kept the locked and the held record, untouched
    for name in ("locked", "held"):
        kept = Record.objects.get(pk=records[name].pk)
        assert (kept.content, kept.forgotten_at) == (records[name].content, None), name
    # And the message says why, per record: the code, the authority, the lock's end, what is still permitted
    messages = " ".join(said(response))
    assert "2 refused" in messages and "globex: forget" in messages
    locked_until = Record.objects.get(pk=records["locked"].pk).retained_until.date().isoformat()
    assert f"retention_lock (SEC 17a-4(f) until {locked_until}; still permitted: soft): record " \
           f"{records['locked'].pk}" in messages
    assert f"legal_hold (court order 26-cv-31; still permitted: soft): record {records['held'].pk}" in messages
    assert ForgetEvent.objects.get(tenant__name="acme").actor == "admin:root"


@covers(("memory.Record", "forget_hard"))
def test_bulk_hard_forget_of_the_whole_filtered_changelist_goes_through_the_guard(client_as, records):
    # Given a superuser who filters the changelist on one content class and selects across all its pages
    root = client_as("superuser")
    chat = ContentClass.objects.get(tenant__name="acme", name="chat")
    url = f"{changelist(Record)}?content_class__id__exact={chat.pk}"
    response = root.post(url, {"action": "forget_hard", "select_across": "1", "index": "0",
                               "_selected_action": [str(records["free"].pk)]})
    assert response.status_code == 302
    # Then exactly that class's records were asked for: the free one is deleted, the held one refused
    assert not Record.objects.filter(pk=records["free"].pk).exists()
    assert Record.objects.get(pk=records["held"].pk).content == "the disputed chat"
    assert Record.objects.filter(pk__in=[records["locked"].pk, records["other"].pk]).count() == 2
    outcomes = ForgetEvent.objects.get().outcomes
    assert json.dumps(outcomes).count("legal_hold") >= 1 and "retention_lock" not in json.dumps(outcomes)


@covers(("memory.Record", "forget_hard"))
@pytest.mark.parametrize("role", ROLES)
def test_no_role_but_a_superuser_may_run_the_bulk_hard_forget(client_as, records, role):
    # Given a ledger role (none holds a delete permission)
    client = client_as(role)
    assert "forget_hard" not in offered(Record, User.objects.get(username=f"{role}-ann"))
    # When it posts the action anyway
    act(client, Record, "forget_hard", [r.pk for r in records.values()])
    # Then nothing was forgotten
    assert Record.objects.filter(forgotten_at__isnull=True).count() == 4
    assert not ForgetEvent.objects.exists()


def test_deleting_a_record_from_its_page_is_a_hard_forget_with_a_tombstone(client_as, records):
    # (Not an action, the other destructive path of the records' admin.) A free record: asked, then forgotten.
    root = client_as("superuser")
    url = reverse("admin:memory_record_delete", args=[records["free"].pk])
    assert root.get(url).status_code == 200
    assert root.post(url, {"post": "yes"}).status_code == 302
    assert not Record.objects.filter(pk=records["free"].pk).exists() and _tombstoned(records["free"].pk)
    # A locked one offers no delete at all
    for name in ("locked", "held"):
        url = reverse("admin:memory_record_delete", args=[records[name].pk])
        assert root.post(url, {"post": "yes"}).status_code == 403, name
        assert Record.objects.get(pk=records[name].pk).content == records[name].content


# --- dsr: start the selected workflows -------------------------------------------------------------------

@covers(("dsr.SubjectRequest", "workflow_start_selected"))
def test_bulk_workflow_start_starts_the_verified_requests_and_refuses_the_others(
        client_as, records, django_capture_on_commit_callbacks):
    # Given a verified and a received request
    tenant = Tenant.objects.get(name="acme")
    subject = records["free"].subject
    now = timezone.now()
    verified, received = (SubjectRequest.objects.create(
        tenant=tenant, subject=subject, type="erasure", regulation="gdpr", received_at=now,
        due_date=(now + timedelta(days=30)).date(), contact_email="s5@example.org", status=status,
    ) for status in (RequestStatus.VERIFIED, RequestStatus.RECEIVED))
    operator = client_as("operator")

    # When an operator starts both from the request queue
    with django_capture_on_commit_callbacks() as enqueued:
        response = act(operator, SubjectRequest, "workflow_start_selected", [verified.pk, received.pk])

    # Then the verified one started (one message for the group), the other stays received, and the page says so
    verified.refresh_from_db(), received.refresh_from_db()
    assert verified.workflow_started_at is not None and received.workflow_started_at is None
    assert received.status == RequestStatus.RECEIVED
    assert RequestTransition.objects.filter(request=verified, action="workflow_started",
                                            actor="admin:operator-ann").exists()
    assert len(enqueued) == 1
    assert f"Not started (only verified requests run): {received.pk} (not_verified)." in said(response)
    # And legal and auditors are not offered it, and their POST changes nothing
    for role in ("legal", "auditor"):
        act(client_as(role), SubjectRequest, "workflow_start_selected", [received.pk])
    assert SubjectRequest.objects.get(pk=received.pk).workflow_started_at is None


# --- tombstones: key rotation ----------------------------------------------------------------------------

@covers(("tombstones.SigningKey", "rotate"))
def test_rotate_retires_the_selected_purposes_keys_and_makes_new_ones(client_as):
    # Given the current tombstone and checkpoint keys
    old = [key_current(purpose="tombstone"), key_current(purpose="checkpoint")]
    root = client_as("superuser")
    # When a superuser rotates both
    response = act(root, SigningKey, "rotate", [k.pk for k in old])
    # Then both are retired (and kept), each purpose has a new current key, and the history says who
    assert response.status_code == 200
    for key in old:
        key.refresh_from_db()
        assert key.retired_at is not None
        new = SigningKey.objects.get(purpose=key.purpose, retired_at__isnull=True)
        assert new.pk != key.pk and f"New {key.purpose} key {new.kid}." in said(response)
    assert KeyEvent.objects.filter(actor="admin:root", action="retired").count() == 2
    # And no ledger role may rotate
    for role in ROLES:
        act(client_as(role), SigningKey, "rotate", [SigningKey.objects.get(purpose="tombstone",
                                                                           retired_at__isnull=True).pk])
    assert SigningKey.objects.count() == 4


# --- auth: users and groups (superusers only) ------------------------------------------------------------

@covers(("auth.User", "delete_selected"))
def test_deleting_users_asks_first_deletes_a_user_without_tokens_and_keeps_one_a_token_names(client_as):
    root = client_as("superuser")
    gone = User.objects.create_user("leaver", password="x")
    token, _ = token_issue(tenant_name="acme", role="agent")
    # When a superuser deletes a plain user, through the confirmation page
    response = act(root, User, "delete_selected", [gone.pk], confirm=True)
    assert not User.objects.filter(pk=gone.pk).exists()
    assert "Successfully deleted 1 user." in said(response)
    # Then a user an API token names is not deleted: the page says what protects it
    page = root.post(changelist(User), {"action": "delete_selected", "_selected_action": [str(token.user_id)]})
    assert page.status_code == 200 and b"<title>Cannot delete user" in page.content and b"api token" in page.content
    act(root, User, "delete_selected", [token.user_id], post="yes")
    assert User.objects.filter(pk=token.user_id).exists()


@covers(("auth.Group", "delete_selected"))
def test_deleting_a_group_asks_first_and_deletes_it(client_as):
    root = client_as("superuser")
    group = Group.objects.create(name="contractors")
    response = act(root, Group, "delete_selected", [group.pk], confirm=True)
    assert response.status_code == 200 and not Group.objects.filter(pk=group.pk).exists()


# --- django-celery-beat: the schedules (superusers only) -------------------------------------------------

@pytest.fixture
def periodic():
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.HOURS)
    return [PeriodicTask.objects.create(name=f"ping {i}", task="config.ping", interval=every, enabled=bool(i),
                                        kwargs=json.dumps({"nonce": f"admin-{i}"})) for i in range(2)]


def _enabled(tasks) -> list[bool]:
    from django_celery_beat.models import PeriodicTask

    return list(PeriodicTask.objects.filter(pk__in=[t.pk for t in tasks]).order_by("name")
                .values_list("enabled", flat=True))


@covers(("django_celery_beat.PeriodicTask", "enable_tasks"), ("django_celery_beat.PeriodicTask", "disable_tasks"),
        ("django_celery_beat.PeriodicTask", "toggle_tasks"))
def test_enable_disable_and_toggle_change_the_selected_schedules(client_as, periodic):
    from django_celery_beat.models import PeriodicTask

    root = client_as("superuser")
    ids = [t.pk for t in periodic]
    act(root, PeriodicTask, "enable_tasks", ids)
    assert _enabled(periodic) == [True, True]
    act(root, PeriodicTask, "disable_tasks", ids)
    assert _enabled(periodic) == [False, False]
    act(root, PeriodicTask, "toggle_tasks", [periodic[0].pk])
    assert _enabled(periodic) == [True, False]


@covers(("django_celery_beat.PeriodicTask", "run_tasks"))
def test_run_sends_the_selected_task_to_the_broker(client_as, periodic, settings):
    from django_celery_beat.models import PeriodicTask

    # Given a schedule on a queue of this test's own (no worker of the suite takes from it)
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-admin-run"
    PeriodicTask.objects.filter(pk=periodic[1].pk).update(queue=queue)
    root = client_as("superuser")
    # When a superuser runs it now
    response = act(root, PeriodicTask, "run_tasks", [periodic[1].pk])
    assert "1 task was successfully run" in said(response)
    # Then its message is on the broker, with the schedule's arguments
    with celery_app.connection_for_read() as connection:
        inbox = connection.SimpleQueue(queue)
        try:
            message = inbox.get(timeout=10)
            message.ack()
            assert message.headers["task"] == "config.ping"
            assert message.decode()[1] == {"nonce": "admin-1"}
        finally:
            inbox.queue.delete()
            inbox.close()


def _schedules():
    from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, SolarSchedule

    return [
        (ClockedSchedule, lambda: ClockedSchedule.objects.create(clocked_time=timezone.now() + timedelta(days=1))),
        (CrontabSchedule, lambda: CrontabSchedule.objects.create(minute="7", hour="3")),
        (SolarSchedule, lambda: SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35)),
        (IntervalSchedule, lambda: IntervalSchedule.objects.create(every=17, period=IntervalSchedule.MINUTES)),
    ]


@covers(*[(f"django_celery_beat.{name}", "delete_selected") for name in
          ("PeriodicTask", "ClockedSchedule", "CrontabSchedule", "SolarSchedule", "IntervalSchedule")])
def test_deleting_schedules_asks_first_and_deletes_them(client_as, periodic):
    from django_celery_beat.models import PeriodicTask

    root = client_as("superuser")
    act(root, PeriodicTask, "delete_selected", [periodic[0].pk], confirm=True)
    assert list(PeriodicTask.objects.filter(pk__in=[t.pk for t in periodic]).values_list("pk", flat=True)) \
        == [periodic[1].pk]
    for model, make in _schedules():
        made = make()
        act(root, model, "delete_selected", [made.pk], confirm=True)
        assert not model.objects.filter(pk=made.pk).exists(), model
