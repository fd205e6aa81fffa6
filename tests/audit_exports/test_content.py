"""What each export holds, against rows made by real service calls; what none ever holds."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dsr.models import RequestItem, RequestTransition
from memory.models import Record, SweepRun
from retention.models import RetentionTableVersion
from tests.audit_exports.conftest import EMAIL, KINDS, MARKER, SUBJECT_REF, body, csv_rows, json_doc

pytestmark = pytest.mark.django_db


def export(client, name, **query):
    response = client.get(f"/api/v1/audit/exports/{name}", query)
    assert response.status_code == 200, (name, response.status_code, getattr(response, "content", b""))
    return response


def test_requests_export_shows_dates_states_history_outcomes_and_tombstones(world, token_for):
    auditor = token_for("acme", "auditor")
    request = world.request

    doc = json_doc(export(auditor, "requests.json"))

    assert doc["export"] == "requests" and doc["tenant"] == "acme"
    (row,) = doc["rows"]
    assert row["id"] == request.pk and row["subject_id"] == request.subject_id
    assert row["status"] == request.status and row["type"] == "erasure" and row["regulation"] == "gdpr"
    assert row["received_at"].startswith(request.received_at.date().isoformat())
    assert row["due_date"] == request.due_date.isoformat() and row["extended"] is False
    history = list(RequestTransition.objects.filter(request=request).order_by("at", "pk"))
    assert [(t["action"], t["actor"], t["to_status"]) for t in row["transitions"]] == [
        (t.action, t.actor, t.to_status) for t in history]
    assert ("verify_identity", "admin:operator-ann") in [(t["action"], t["actor"]) for t in row["transitions"]]
    items = list(RequestItem.objects.filter(request=request).order_by("pk"))
    assert [(i["object_id"], i["outcome"]) for i in row["items"]] == [(i.object_id, i.outcome) for i in items]
    tombstones = sorted({str(i.tombstone_id) for i in items if i.tombstone_id})
    assert tombstones and row["tombstone_ids"] == tombstones
    assert sum(row["item_outcomes"].values()) == len(items)

    (flat,) = csv_rows(export(auditor, "requests.csv"))
    assert flat["id"] == str(request.pk) and flat["status"] == request.status
    assert flat["transition_count"] == str(len(history)) and flat["tombstone_ids"].split() == tombstones
    assert flat["item_outcomes"] == " ".join(f"{k}={v}" for k, v in row["item_outcomes"].items())


def test_an_extension_shows_the_new_due_date(world, token_for, mailoutbox):
    from dsr.models import SubjectRequest
    from dsr.services import request_create, request_extend

    extended = request_create(tenant=world.tenant, subject_ref="someone-else", type="access", regulation="gdpr",
                              channel="api", contact_email="else@example.org", actor="api")
    extended = request_extend(request=extended, actor="admin:operator-ann", reason="complex request")
    rows = {r["id"]: r for r in csv_rows(export(token_for("acme", "auditor"), "requests.csv"))}
    assert rows[str(extended.pk)]["extended"] == "true"
    assert rows[str(extended.pk)]["extended_due_date"] == SubjectRequest.objects.get(
        pk=extended.pk).extended_due_date.isoformat()


def test_companion_exports_hold_every_transition_and_item_of_the_requests(world, token_for):
    auditor = token_for("acme", "auditor")
    transitions = csv_rows(export(auditor, "request-transitions.csv"))
    items = csv_rows(export(auditor, "request-items.csv"))
    assert sorted(int(t["id"]) for t in transitions) == sorted(
        RequestTransition.objects.filter(request__tenant=world.tenant).values_list("pk", flat=True))
    assert sorted(int(i["id"]) for i in items) == sorted(
        RequestItem.objects.filter(request__tenant=world.tenant).values_list("pk", flat=True))
    assert {i["outcome"] for i in items} >= {"deleted", "hidden"}


def test_conflicts_export_shows_the_decision_who_made_it_and_why(world, token_for):
    rows = {r["id"]: r for r in json_doc(export(token_for("acme", "auditor"), "conflicts.json"))["rows"]}
    row = rows[world.conflict.pk]
    assert row["status"] == "upheld" and row["decided_by"] == "admin:legal-ann"
    assert row["justification"] == world.conflict.justification and row["authority"] == "SEC 17a-4(f)"
    assert row["request_id"] == world.request.pk and row["blocking"]

    flat = {r["id"]: r for r in csv_rows(export(token_for("acme", "auditor"), "conflicts.csv"))}
    # A justification that starts with "=" is not run as a formula by a spreadsheet.
    assert flat[str(world.conflict.pk)]["justification"] == "'" + world.conflict.justification


def test_retention_versions_export_holds_each_version_with_its_rules(world, token_for):
    rows = json_doc(export(token_for("acme", "auditor"), "retention-versions.json"))["rows"]
    versions = list(RetentionTableVersion.objects.filter(tenant=world.tenant).order_by("pk"))
    assert [r["number"] for r in rows] == [v.number for v in versions]
    latest = rows[-1]
    assert latest["signed"] and latest["digest"] == versions[-1].digest
    assert {"Policy 4 (chat)": 60} == {r["authority"]: r["duration_days"] for r in latest["rules"]
                                       if r["authority"] == "Policy 4 (chat)"}
    flat = csv_rows(export(token_for("acme", "auditor"), "retention-versions.csv"))
    assert [int(r["rule_count"]) for r in flat] == [len(v.rules) for v in versions]


def test_holds_export_shows_placed_and_released_by_whom_on_what_authority(world, token_for):
    rows = {r["id"]: r for r in json_doc(export(token_for("acme", "auditor"), "holds.json"))["rows"]}
    released = rows[world.hold.pk]
    assert released["placed_by"] == "admin:legal-ann" and released["released_by"] == "admin:legal-bob"
    assert released["authority"] == "court order 26-cv-99" and released["release_reason"] == "case settled"
    assert released["target"] == "subject" and released["subject_id"] == world.request.subject_id
    assert released["active"] is False
    listed = [r for r in rows.values() if r["target"] == "records"]
    assert listed and listed[0]["listed_records"] == 1 and listed[0]["active"] is True


def test_sweep_runs_export_lists_runs_without_other_tenants_counts(world, token_for):
    run = SweepRun.objects.get(kind="compaction")
    (row,) = json_doc(export(token_for("acme", "auditor"), "sweep-runs.json"))["rows"]
    assert row["id"] == run.pk and row["status"] == run.status and row["actor"] == "test"
    assert row["counts"] is None  # a run covers every tenant: its counts are not one tenant's to see
    assert "errors" not in row and "report" not in row


def test_no_record_content_subject_reference_email_or_salt_reaches_any_export(world, token_for, client):
    from dsr.roles import roles_sync
    from django.contrib.auth.models import Group, User

    # The markers are still at rest: the test would prove nothing otherwise.
    assert Record.objects.filter(content__contains=MARKER).count() >= 2
    salts = [s for s in Record.objects.values_list("salt", flat=True) if s]
    assert salts
    roles_sync()
    user = User.objects.create_user("auditor-ann", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="auditor"))
    client.force_login(user)
    outputs = []
    for kind in KINDS:
        for fmt in ("csv", "json"):
            outputs.append(body(export(token_for("acme", "auditor"), f"{kind}.{fmt}")))
            response = client.get("/admin/audit_exports/auditexport/", {"kind": kind, "format": fmt})
            assert response.status_code == 200
            outputs.append(body(response))
    for output in outputs:
        text = output.decode()
        assert MARKER not in text and SUBJECT_REF not in text and EMAIL not in text
        assert "Tangerine" not in text and "disputed" not in text
        assert not [s for s in salts if s in text]


def test_period_is_whole_utc_days_both_ends_included(world, token_for):
    auditor = token_for("acme", "auditor")
    today = world.request.received_at.date()
    day = timedelta(days=1)

    def ids(**period):
        return [r["id"] for r in json_doc(export(auditor, "requests.json", **period))["rows"]]

    assert ids(**{"from": today.isoformat(), "to": today.isoformat()}) == [world.request.pk]
    assert ids(**{"from": today.isoformat()}) == [world.request.pk]
    assert ids(to=today.isoformat()) == [world.request.pk]
    assert ids(**{"from": (today + day).isoformat()}) == []
    assert ids(to=(today - day).isoformat()) == []
    # A hold counts in a period where it was placed or where it was released.
    holds = json_doc(export(auditor, "holds.json", **{"from": (today + day).isoformat()}))["rows"]
    assert holds == []


def test_a_request_received_at_the_last_instant_of_the_day_is_in_it(world, token_for):
    from dsr.models import SubjectRequest

    day = world.request.received_at.date() - timedelta(days=3)
    edge = timezone.datetime.combine(day, timezone.datetime.max.time(), tzinfo=timezone.get_fixed_timezone(0))
    SubjectRequest.objects.filter(pk=world.request.pk).update(received_at=edge)
    query = {"from": day.isoformat(), "to": day.isoformat()}
    assert [r["id"] for r in json_doc(export(token_for("acme", "auditor"), "requests.json", **query))["rows"]] == [
        world.request.pk]
    query = {"from": (day + timedelta(days=1)).isoformat()}
    assert json_doc(export(token_for("acme", "auditor"), "requests.json", **query))["rows"] == []
