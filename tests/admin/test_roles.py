"""Who may do what in the admin: the groups the migration makes, an operator who cannot decide a
conflict, an auditor who can change nothing, and what nobody can do (delete a hold or a conflict,
override or shorten a compliance-mode rule: not even a superuser)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.utils import timezone

from dsr.models import ConflictStatus, RequestStatus, RequestTransition, RetentionConflict, SubjectRequest
from dsr.roles import ROLES, VIEWABLE, role_permissions
from memory.models import Record
from retention.models import LegalHold, RetentionRule, RetentionTableVersion
from tests.admin.conftest import conflicts_make

pytestmark = pytest.mark.django_db


def _codes(group: Group) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


def test_migrations_make_the_three_groups_with_exactly_their_permissions():
    # No roles_sync() here: what is in the database is what dsr migration 0003 and roles_complete made.
    groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
    assert set(groups) == set(ROLES)
    for role in ROLES:
        assert _codes(groups[role]) == role_permissions(role), role
    assert not any(code.split(".")[1].startswith("delete_") for role in ROLES for code in _codes(groups[role]))
    assert not [c for c in _codes(groups["auditor"]) if not c.split(".")[1].startswith("view_")]


def test_an_api_token_of_a_role_joins_the_group_the_migration_made():
    from memory.services.tokens import token_issue

    token, _ = token_issue(tenant_name="acme", role="legal")
    group = Group.objects.get(name="legal")
    assert token.user.groups.get() == group
    assert "dsr.change_retentionconflict" in _codes(group)


@pytest.fixture
def conflicts(mailoutbox):
    return conflicts_make()


def _pages(c) -> list[str]:
    hold = LegalHold.objects.get()
    rule = RetentionRule.objects.filter(mode="compliance").get()
    version = RetentionTableVersion.objects.filter(tenant=c.tenant).order_by("-number").first()
    return [
        "/admin/", "/admin/dsr/subjectrequest/", f"/admin/dsr/subjectrequest/{c.request.pk}/change/",
        f"/admin/dsr/subjectrequest/{c.request.pk}/progress/", "/admin/dsr/retentionconflict/",
        f"/admin/dsr/retentionconflict/{c.compliance.pk}/change/", "/admin/retention/legalhold/",
        f"/admin/retention/legalhold/{hold.pk}/change/", "/admin/retention/retentionrule/",
        f"/admin/retention/retentionrule/{rule.pk}/change/", "/admin/retention/retentiontableversion/",
        f"/admin/retention/retentiontableversion/{version.pk}/change/", "/admin/retention/contentclass/",
        "/admin/memory/record/", "/admin/tombstones/tombstone/",
    ]


@pytest.mark.parametrize("role", ["operator", "legal", "auditor"])
def test_every_role_reads_every_screen(client_as, conflicts, role):
    client = client_as(role)
    for url in _pages(conflicts):
        response = client.get(url)
        assert response.status_code == 200, (role, url, response.status_code)
    assert b"signed the lease" not in client.get(f"/admin/dsr/retentionconflict/{conflicts.governance.pk}/change/")\
        .content  # a conflict page never shows the record's content


def _acts(c) -> list[tuple[str, dict]]:
    """Every act the admin offers, as the POST it takes."""
    hold = LegalHold.objects.get()
    rule = RetentionRule.objects.filter(mode="governance").get()
    received = SubjectRequest.objects.create(
        tenant=c.tenant, subject=c.request.subject, type="erasure", regulation="gdpr", received_at=timezone.now(),
        due_date=timezone.now().date() + timedelta(days=30), contact_email="x@example.org")
    r = c.request.pk
    return [
        (f"/admin/dsr/subjectrequest/{received.pk}/verify/", {"method": "passport"}),
        (f"/admin/dsr/subjectrequest/{received.pk}/reject/", {"reason": "no match"}),
        (f"/admin/dsr/subjectrequest/{received.pk}/extend/", {"reason": "complex"}),
        (f"/admin/dsr/subjectrequest/{r}/start/", {}),
        ("/admin/dsr/subjectrequest/", {"action": "workflow_start_selected", "_selected_action": [received.pk]}),
        (f"/admin/dsr/retentionconflict/{c.governance.pk}/decide/", {"decision": "uphold", "justification": "x"}),
        (f"/admin/dsr/retentionconflict/{c.hold.pk}/decide/",
         {"decision": "defer", "justification": "x", "until": (timezone.now().date() + timedelta(days=9)).isoformat()}),
        (f"/admin/retention/legalhold/{hold.pk}/release/", {"reason": "settled"}),
        ("/admin/retention/legalhold/add/", {"tenant": c.tenant.pk, "matter": "m", "target": "subject",
                                             "subject_ref": "subject-31", "_preview": "1"}),
        ("/admin/retention/retentionrule/add/", {"content_class": rule.content_class_id, "kind": "pact",
                                                 "duration_days": 30, "authority": "pact 1", "mode": "governance",
                                                 "protects": "existence"}),
        (f"/admin/retention/retentionrule/{rule.pk}/duration/", {"duration_days": 10, "justification": "x"}),
        (f"/admin/retention/retentionrule/{rule.pk}/retire/", {"justification": "x"}),
        ("/admin/retention/contentclass/add/", {"tenant": c.tenant.pk, "name": "new-class"}),
        (f"/admin/memory/record/{c.records['free'][0].pk}/change/", {"content": "changed"}),
        (f"/admin/dsr/subjectrequest/{r}/change/", {"status": "closed"}),
    ]


def _state() -> tuple:
    return (list(SubjectRequest.objects.order_by("pk").values_list("status", "extended_due_date")),
            list(RetentionConflict.objects.order_by("pk").values_list("status", "decided_by")),
            list(LegalHold.objects.order_by("pk").values_list("released_at")),
            list(RetentionRule.objects.order_by("pk").values_list("duration_days", "retired_at")),
            RetentionTableVersion.objects.count(), RequestTransition.objects.count(),
            list(Record.objects.order_by("pk").values_list("content", "forgotten_at")))


def test_an_auditor_can_change_nothing(client_as, conflicts, django_capture_on_commit_callbacks):
    auditor = client_as("auditor")
    before = _state()
    with django_capture_on_commit_callbacks() as enqueued:
        for url, data in _acts(conflicts):
            response = auditor.post(url, data)
            if "action" in data:  # an action the user may not run is not offered: nothing runs, the list is
                # shown again (at once, or redirected to when the user is offered other actions, read-only ones)
                assert response.status_code == 200 or (response.status_code == 302
                                                       and response["Location"].startswith(url)), url
            elif url.endswith("/change/") and "/dsr/" in url:  # no raw edit of a request exists at all
                assert response.status_code == 405, url
            else:
                assert response.status_code == 403, (url, response.status_code)
    assert _state()[1:] == before[1:]  # (the requests list gained the received request _acts made)
    assert enqueued == []
    # And no screen offers an add button, a save button or an action, but read-only ones (an export:
    # permissions=["view"]).
    request = RequestFactory().get("/admin/")
    request.user = _user("auditor-ann")
    for model, model_admin in admin.site._registry.items():
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.has_delete_permission(request), model
        if model._meta.app_label in VIEWABLE:
            assert model_admin.has_view_permission(request), model
            for name, (action, _, _) in model_admin.get_actions(request).items():
                assert list(getattr(action, "allowed_permissions", ())) == ["view"], (model, name)
        else:  # users, groups, Celery beat's schedules: not even shown
            assert not model_admin.has_module_permission(request), model


def _user(username):
    from django.contrib.auth.models import User

    return User.objects.get(username=username)


def test_an_operator_cannot_resolve_a_conflict(client_as, conflicts):
    operator = client_as("operator")
    page = operator.get(f"/admin/dsr/retentionconflict/{conflicts.governance.pk}/change/")
    assert page.status_code == 200 and b'id="decide-form"' not in page.content
    history = RequestTransition.objects.count()
    for decision in ("uphold", "override", "defer"):
        response = operator.post(f"/admin/dsr/retentionconflict/{conflicts.governance.pk}/decide/",
                                 {"decision": decision, "justification": "I am not legal",
                                  "until": (timezone.now().date() + timedelta(days=5)).isoformat()})
        assert response.status_code == 403
    conflict = RetentionConflict.objects.get(pk=conflicts.governance.pk)
    assert (conflict.status, conflict.decided_by) == (ConflictStatus.OPEN, "")
    assert Record.objects.filter(pk=conflicts.records["governance"].pk).exists()
    assert RequestTransition.objects.count() == history


def test_legal_cannot_run_requests_and_operators_cannot_touch_holds_or_rules(client_as, conflicts):
    received = SubjectRequest.objects.create(
        tenant=conflicts.tenant, subject=conflicts.request.subject, type="erasure", regulation="gdpr",
        received_at=timezone.now(), due_date=timezone.now().date() + timedelta(days=30))
    assert client_as("legal").post(f"/admin/dsr/subjectrequest/{received.pk}/verify/",
                                   {"method": "x"}).status_code == 403
    hold = LegalHold.objects.get()
    rule = RetentionRule.objects.filter(mode="governance").get()
    operator = client_as("operator")
    assert operator.post(f"/admin/retention/legalhold/{hold.pk}/release/", {"reason": "x"}).status_code == 403
    assert operator.get("/admin/retention/legalhold/add/").status_code == 403
    assert operator.post(f"/admin/retention/retentionrule/{rule.pk}/retire/", {"justification": "x"}).status_code \
        == 403
    assert SubjectRequest.objects.get(pk=received.pk).status == RequestStatus.RECEIVED
    assert LegalHold.objects.get().released_at is None
    assert RetentionRule.objects.get(pk=rule.pk).retired_at is None


@pytest.mark.parametrize("role", ["legal", "superuser"])
def test_a_hold_or_a_conflict_cannot_be_deleted_through_the_admin(client_as, conflicts, role):
    client = client_as(role)
    hold = LegalHold.objects.get()
    for url in (f"/admin/retention/legalhold/{hold.pk}/delete/",
                f"/admin/dsr/retentionconflict/{conflicts.hold.pk}/delete/",
                f"/admin/retention/retentionrule/{RetentionRule.objects.first().pk}/delete/",
                f"/admin/dsr/subjectrequest/{conflicts.request.pk}/delete/"):
        assert client.get(url).status_code == 403, url
        assert client.post(url, {"post": "yes"}).status_code == 403, url
    for changelist, pk in (("/admin/retention/legalhold/", hold.pk),
                           ("/admin/dsr/retentionconflict/?state=all", conflicts.hold.pk)):
        listing = client.get(changelist)
        assert b"delete_selected" not in listing.content
        client.post(changelist.split("?")[0], {"action": "delete_selected", "_selected_action": [pk], "post": "yes"})
    assert LegalHold.objects.filter(pk=hold.pk).exists()
    assert RetentionConflict.objects.count() == 3
    assert b"Delete" not in client.get(f"/admin/retention/legalhold/{hold.pk}/change/").content


def test_an_override_of_a_compliance_lock_is_refused_even_for_a_superuser(client_as, conflicts):
    root = client_as("superuser")
    response = root.post(f"/admin/dsr/retentionconflict/{conflicts.compliance.pk}/decide/",
                         {"decision": "override", "justification": "I am root"})
    assert response.status_code == 200
    assert b"compliance_lock" in response.content and b"not even a superuser" in response.content
    kept = Record.objects.get(pk=conflicts.records["compliance"].pk)
    assert kept.content == "sold 50 ACME"
    assert RetentionConflict.objects.get(pk=conflicts.compliance.pk).status == ConflictStatus.OPEN
    # Nor under an active hold, until it is released.
    response = root.post(f"/admin/dsr/retentionconflict/{conflicts.hold.pk}/decide/",
                         {"decision": "override", "justification": "I am root"})
    assert b"legal_hold" in response.content
    assert Record.objects.filter(pk=conflicts.records["hold"].pk).exists()


def test_a_compliance_rule_cannot_be_shortened_or_retired_even_by_a_superuser(client_as, conflicts):
    root = client_as("superuser")
    rule = RetentionRule.objects.get(mode="compliance")
    versions = RetentionTableVersion.objects.count()
    shorter = root.post(f"/admin/retention/retentionrule/{rule.pk}/duration/",
                        {"duration_days": 30, "justification": "too long"})
    assert shorter.status_code == 200 and b"compliance_lock" in shorter.content
    retire = root.post(f"/admin/retention/retentionrule/{rule.pk}/retire/", {"justification": "not needed"})
    assert retire.status_code == 200 and b"compliance_lock" in retire.content
    assert b'id="retire-form"' not in root.get(f"/admin/retention/retentionrule/{rule.pk}/change/").content
    rule.refresh_from_db()
    assert (rule.duration_days, rule.retired_at) == (7 * 365, None)
    assert RetentionTableVersion.objects.count() == versions
    longer = root.post(f"/admin/retention/retentionrule/{rule.pk}/duration/",
                       {"duration_days": 10 * 365, "justification": "new SEC guidance"})
    assert longer.status_code == 302
    assert RetentionRule.objects.get(pk=rule.pk).duration_days == 10 * 365
