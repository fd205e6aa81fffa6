"""The admin's acts when the input is wrong or the service refuses: the refusal is shown as the service
gave it, on the form, and nothing changes; and the small pieces (the export download, the hold
preview's guard, the version diff)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dsr.models import ConflictStatus, RequestStatus, RequestTransition, RetentionConflict, SubjectRequest
from dsr.services import request_create
from memory.models import DerivedArtifact, Record
from memory.services import ForgetTarget, artifact_write, records_forget
from retention.models import LegalHold, RetentionRule
from retention.table_diff import table_diff
from tests.admin.conftest import conflicts_make
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def conflicts(mailoutbox):
    return conflicts_make()


def test_a_deferral_without_a_date_is_refused_by_the_form_and_changes_nothing(client_as, conflicts):
    legal = client_as("legal")
    response = legal.post(f"/admin/dsr/retentionconflict/{conflicts.hold.pk}/decide/",
                          {"decision": "defer", "justification": "later"})
    assert response.status_code == 200 and b"A deferral needs a date." in response.content
    assert RetentionConflict.objects.get(pk=conflicts.hold.pk).status == ConflictStatus.OPEN


def test_a_decided_conflict_cannot_be_decided_again(client_as, conflicts):
    legal = client_as("legal")
    url = f"/admin/dsr/retentionconflict/{conflicts.compliance.pk}/decide/"
    assert legal.post(url, {"decision": "uphold", "justification": "SEC"}).status_code == 302
    page = legal.get(f"/admin/dsr/retentionconflict/{conflicts.compliance.pk}/change/")
    assert b'id="decide-form"' not in page.content and b"admin:legal-ann" in page.content
    again = legal.post(url, {"decision": "override", "justification": "changed my mind"})
    assert b"conflict_decided" in again.content
    assert Record.objects.filter(pk=conflicts.records["compliance"].pk).exists()


def test_an_illegal_move_or_a_second_extension_shows_the_services_refusal(client_as, tenant, mailoutbox):
    request = request_create(tenant=tenant, subject_ref="s-1", type="erasure", regulation="gdpr", channel="email",
                             contact_email="s1@example.org", actor="api")
    operator = client_as("operator")
    assert operator.post(f"/admin/dsr/subjectrequest/{request.pk}/extend/", {"reason": "busy"}).status_code == 302
    second = operator.post(f"/admin/dsr/subjectrequest/{request.pk}/extend/", {"reason": "still busy"})
    assert second.status_code == 200 and b"already_extended" in second.content
    started = operator.post(f"/admin/dsr/subjectrequest/{request.pk}/start/", {})
    assert b"not_verified" in started.content
    empty = operator.post(f"/admin/dsr/subjectrequest/{request.pk}/verify/", {"method": ""})
    assert empty.status_code == 200 and b"This field is required" in empty.content
    request.refresh_from_db()
    assert request.status == RequestStatus.RECEIVED
    assert list(request.history.values_list("action", flat=True)) == ["received", "extend"]
    assert len(mailoutbox) == 1


def test_every_act_is_logged_in_the_admins_log_with_what_happened(client_as, tenant, mailoutbox):
    from django.contrib.admin.models import LogEntry

    request = request_create(tenant=tenant, subject_ref="s-2", type="erasure", regulation="ccpa", channel="letter",
                             contact_email="s2@example.org", actor="api")
    operator = client_as("operator")
    operator.post(f"/admin/dsr/subjectrequest/{request.pk}/verify/", {"method": "notarised letter"})
    entry = LogEntry.objects.get(object_id=str(request.pk))
    assert entry.user.username == "operator-ann" and "notarised letter" in entry.get_change_message()
    assert RequestTransition.objects.filter(request=request, action="verify_identity",
                                            actor="admin:operator-ann").exists()


def test_an_access_requests_export_downloads_from_its_page(client_as, mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario, type="access")
    run_to_end(request.pk)
    auditor = client_as("auditor")
    page = auditor.get(f"/admin/dsr/subjectrequest/{request.pk}/change/")
    assert b'id="export-link"' in page.content
    export = auditor.get(f"/admin/dsr/subjectrequest/{request.pk}/export/")
    assert export["Content-Disposition"] == f'attachment; filename="request-{request.pk}-export.json"'
    assert {r["id"] for r in export.json()["records"]} == {r.pk for r in scenario.free} | {
        scenario.under_rule.pk, scenario.under_hold.pk}


def test_a_hold_is_placed_only_as_previewed(client_as, tenant, chat):
    ids = [record(tenant, chat, subject="s-9", scope=f"user:9/session:{i}").pk for i in range(3)]
    legal = client_as("legal")
    form = {"tenant": tenant.pk, "matter": "Audit 2026", "authority": "regulator letter", "target": "records",
            "record_ids": f"{ids[0]}, {ids[1]}"}
    preview = legal.post("/admin/retention/legalhold/add/", {**form, "_preview": "1"})
    assert preview.context["preview"] == 2
    key = preview.context["preview_key"]
    # The form was changed after the preview: shown again with the new count, not placed.
    changed = legal.post("/admin/retention/legalhold/add/", {**form, "record_ids": " ".join(map(str, ids)),
                                                              "preview_key": key, "_confirm": "1"})
    assert changed.status_code == 200 and changed.context["preview"] == 3
    assert not LegalHold.objects.exists()
    placed = legal.post("/admin/retention/legalhold/add/", {**form, "preview_key": key, "_confirm": "1"})
    assert placed.status_code == 302
    assert sorted(Record.objects.filter(held=True).values_list("pk", flat=True)) == ids[:2]
    missing = legal.post("/admin/retention/legalhold/add/", {**form, "record_ids": "999999", "_preview": "1"})
    assert missing.context["preview"] == 0


def test_a_hold_target_must_belong_to_the_tenant(client_as, tenant, other_tenant):
    from tests.factories import ContentClassFactory

    theirs = ContentClassFactory(tenant=other_tenant, name="theirs")
    response = client_as("legal").post("/admin/retention/legalhold/add/", {
        "tenant": tenant.pk, "matter": "m", "target": "content_class", "content_class": theirs.pk, "_preview": "1"})
    assert b"Choose a content class of acme" in response.content
    response = client_as("legal").post("/admin/retention/legalhold/add/", {
        "tenant": tenant.pk, "matter": "m", "target": "subject", "subject_ref": "nobody", "_preview": "1"})
    assert b"No subject with this reference" in response.content
    assert not LegalHold.objects.exists()


def test_the_retention_table_diff_names_each_change():
    before = [{"id": 1, "content_class": "chat", "kind": "pact", "duration_days": 30, "authority": "P1",
               "mode": "governance", "protects": "existence"},
              {"id": 2, "content_class": "trades", "kind": "regulatory", "duration_days": 2557, "authority": "SEC",
               "mode": "compliance", "protects": "content"}]
    after = [{**before[1], "duration_days": 3650},
             {"id": 3, "content_class": "mail", "kind": "operational", "duration_days": 90, "authority": "ops",
              "mode": "governance", "protects": "existence"}]
    changes = table_diff(before, after)
    assert [(c.rule_id, c.change) for c in changes] == [(1, "removed"), (2, "changed"), (3, "added")]
    assert changes[1].fields == (("duration_days", 2557, 3650),)
    assert "duration_days 2557 → 3650" in changes[1].describe()
    assert [c.change for c in table_diff(None, before)] == ["added", "added"]


def test_the_queue_finds_a_done_request_by_its_id_and_widens_to_all(client_as, tenant):
    request = request_create(tenant=tenant, subject_ref="s-3", type="erasure", regulation="gdpr", channel="api",
                             actor="api")
    SubjectRequest.objects.filter(pk=request.pk).update(status=RequestStatus.CLOSED)
    operator = client_as("operator")
    assert operator.get("/admin/dsr/subjectrequest/").context["cl"].result_count == 0  # the open queue
    found = operator.get("/admin/dsr/subjectrequest/", {"q": str(request.pk)})
    assert [r.pk for r in found.context["cl"].result_list] == [request.pk]
    by_ref = operator.get("/admin/dsr/subjectrequest/", {"q": "s-3"})
    assert [r.pk for r in by_ref.context["cl"].result_list] == [request.pk]
    overdue = operator.get("/admin/dsr/subjectrequest/", {"queue": "overdue"})
    assert overdue.context["cl"].result_count == 0


def test_a_rule_added_through_the_admin_versions_the_table(client_as, tenant, chat):
    legal = client_as("legal")
    response = legal.post("/admin/retention/retentionrule/add/", {
        "content_class": chat.pk, "kind": "pact", "duration_days": 0, "authority": "x", "mode": "governance",
        "protects": "existence"})
    assert response.status_code == 200 and not RetentionRule.objects.exists()
    response = legal.post("/admin/retention/retentionrule/add/", {
        "content_class": chat.pk, "kind": "pact", "duration_days": 45, "authority": "Pact 7", "mode": "governance",
        "protects": "existence"})
    rule = RetentionRule.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/{rule.pk}/change/")
    versions = legal.get("/admin/retention/retentiontableversion/")
    assert b"added rule" in versions.content
    assert (rule.tenant, rule.duration_days, rule.mode) == (tenant, 45, "governance")
    assert timezone.now() - rule.created_at < timedelta(minutes=1)


def test_the_bulk_start_starts_the_verified_requests_together_and_names_the_others(client_as, monkeypatch):
    from dsr import tasks

    sent = []
    monkeypatch.setattr(tasks, "dispatch_enqueue", lambda *, request_ids: sent.append(list(request_ids)))
    first = verified_request(erasure_scenario(subject="subject-7"), subject="subject-7")
    second = verified_request(erasure_scenario(subject="subject-8"), subject="subject-8")
    received = request_create(tenant=first.tenant, subject_ref="subject-9", type="erasure", regulation="gdpr",
                              channel="email", contact_email="s9@example.org", actor="operator:test")

    response = client_as("operator").post("/admin/dsr/subjectrequest/", {
        "action": "workflow_start_selected", "_selected_action": [first.pk, second.pk, received.pk]}, follow=True)

    shown = [str(m) for m in response.context["messages"]]
    assert f"Workflow started for 2 request(s): {first.pk}, {second.pk}." in shown
    assert f"Not started (only verified requests run): {received.pk} (not_verified)." in shown
    assert sent == [[first.pk, second.pk]]  # one message for the two
    assert SubjectRequest.objects.filter(pk__in=[first.pk, second.pk], workflow_started_at__isnull=False).count() == 2
    received.refresh_from_db()
    assert received.workflow_started_at is None and received.status == RequestStatus.RECEIVED


@pytest.mark.django_db
def test_the_admin_shows_which_embedder_made_a_vector_and_does_not_let_an_artifact_be_edited(tenant, chat,
                                                                                              client_as):
    note = record(tenant, chat, content="the cat slept on the mat")
    artifact = DerivedArtifact.objects.get(kind="embedding", lineage__source=note)
    client = client_as("superuser")
    url = f"/admin/memory/derivedartifact/{artifact.pk}/change/"
    page = client.get(url).content.decode()
    assert "wordllama-l2_supercat-256" in page and 'name="embedder"' not in page

    client.post(url, {"tenant": tenant.pk, "scope": artifact.scope_id, "kind": "embedding", "content": "",
                      "holder": "", "created_at_0": "2026-01-01", "created_at_1": "00:00:00",
                      "embedder": "someone-else"})
    artifact.refresh_from_db()
    assert artifact.embedder == "wordllama-l2_supercat-256"


@pytest.mark.django_db
def test_no_one_can_give_a_forgotten_or_redacted_copy_back_through_the_admin(tenant, chat, client_as):
    """An artifact is forgotten only through the guarded forget and written only through the memory API: the admin
    shows artifacts and changes none, not even for a superuser (a copy given back after its tombstone would make
    the tombstone false)."""
    notes = [record(tenant, chat, content=text) for text in ("the cat slept on the mat", "an invoice is due")]
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[notes[1].pk], content="an invoice")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(notes[0].pk,)), mode="soft", actor="test")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(notes[1].pk,)), mode="redact", actor="test")
    hidden = DerivedArtifact.objects.get(kind="embedding", lineage__source=notes[0])
    before = list(DerivedArtifact.objects.order_by("pk").values())
    assert hidden.forgotten_at is not None and before[-1]["redacted_at"] is not None
    client = client_as("superuser")

    for artifact, changes in ((hidden, {"forgotten_at_0": "", "forgotten_at_1": ""}),
                              (summary, {"content": "an invoice", "redacted_at_0": "", "redacted_at_1": ""})):
        url = f"/admin/memory/derivedartifact/{artifact.pk}/change/"
        page = client.get(url)
        assert page.status_code == 200 and b'name="content"' not in page.content and b'name="_save"' not in page.content
        form = {"tenant": tenant.pk, "scope": artifact.scope_id, "kind": artifact.kind, "holder": "",
                "created_at_0": "2026-01-01", "created_at_1": "00:00:00", "content": "", **changes}
        assert client.post(url, form).status_code == 403
    assert client.get("/admin/memory/derivedartifact/add/").status_code == 403
    assert client.post("/admin/memory/derivedartifact/add/", {"tenant": tenant.pk, "kind": "summary",
                                                              "content": "x"}).status_code == 403
    assert client.post("/admin/memory/derivedartifact/", {"action": "delete_selected",
                                                          "_selected_action": [hidden.pk]}).status_code in (200, 302)
    assert list(DerivedArtifact.objects.order_by("pk").values()) == before
