"""A fleet copy's acknowledgement is signed: a follow-up tombstone that closes the forget's `fleet_copy:N` item,
as the sweeps close theirs; confirm-erasure requires that tombstone, not the notice's flag."""
from __future__ import annotations

import json

import pytest

from memory.models import FleetCopyNotice
from tests.factories import record
from tests.memory.sweep_fixtures import statement_of
from tombstones.models import Tombstone
from tombstones.services import receipt_build, tombstone_verify
from tombstones.verification import GENUINE, deferred_items

pytestmark = pytest.mark.django_db


@pytest.fixture
def copied(agent, tenant, chat):
    """A record copied to another agent, then forgotten (hard): a fleet notice and its deferred item."""
    source = record(tenant, chat, content="copied to agent-b")
    copy = agent.post("/api/v1/memory/records", {"derived_from": [source.pk], "kind": "fleet_copy",
                                                  "content": "copied to agent-b", "holder": "agent-b@example.com"},
                      format="json").json()
    handle = agent.post("/api/v1/memory/forget", {"target": {"record_id": source.pk}, "mode": "hard",
                                                  "reason": "asked"}, format="json").json()["handle"]
    return copy["id"], handle, FleetCopyNotice.objects.get()


def confirm(agent, handle):
    return agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json")


def test_the_forget_defers_the_copy_by_its_id_without_the_holders_name(copied):
    artifact_id, handle, notice = copied
    statement = statement_of(notice.forget_event)
    assert deferred_items(statement)[f"fleet_copy:{artifact_id}"]["action"] == "acknowledge"
    assert "agent-b" not in json.dumps(statement)


def test_acknowledgement_issues_a_genuine_tombstone_that_closes_the_item_and_confirm_needs_it(agent, copied):
    artifact_id, handle, notice = copied
    before = confirm(agent, handle)
    assert before.status_code == 409
    assert [(g["gap"], g["artifact_id"]) for g in before.json()["gaps"]] == [("unacknowledged", artifact_id)]

    answer = agent.post(f"/api/v1/memory/fleet-notices/{notice.pk}/ack")

    assert answer.status_code == 200
    notice.refresh_from_db()
    assert answer.json()["closing_tombstone_id"] == str(notice.closing_tombstone_id)
    closing = Tombstone.objects.get(pk=notice.closing_tombstone_id)
    statement = json.loads(bytes(closing.payload))
    event = notice.forget_event
    assert statement["propagation"]["closes"] == [{"tombstone_id": str(event.public_id), "handle": str(event.pk),
                                                   "action": "acknowledge", "items": [f"fleet_copy:{artifact_id}"]}]
    assert statement["propagation"]["derivatives"] == [{"artifact_id": str(artifact_id), "kind": "fleet_copy",
                                                        "outcome": "deleted"}]
    assert statement["request"]["path"] == "fleet_ack" and statement["request"]["actor"].startswith("token:")
    assert statement["request"]["authority"] == statement_of(event)["request"]["authority"]
    assert "agent-b" not in json.dumps(statement)
    assert tombstone_verify(document=receipt_build(tombstone_id=closing.pk)).code == GENUINE
    after = confirm(agent, handle)
    assert after.status_code == 200 and after.json()["erased"] is True
    fleet = next(e for e in after.json()["evidence"] if e["path"] == "fleet_copies")
    assert fleet["closing_tombstones"] == [{"item": f"fleet_copy:{artifact_id}", "tombstone_id": str(closing.pk)}]


def test_acknowledging_twice_issues_one_tombstone_and_keeps_the_first_time(agent, copied):
    _, _, notice = copied
    first = agent.post(f"/api/v1/memory/fleet-notices/{notice.pk}/ack").json()
    tombstones = Tombstone.objects.count()

    second = agent.post(f"/api/v1/memory/fleet-notices/{notice.pk}/ack").json()

    assert Tombstone.objects.count() == tombstones
    assert (second["closing_tombstone_id"], second["acknowledged_at"]) == (first["closing_tombstone_id"],
                                                                           first["acknowledged_at"])
    assert agent.get("/api/v1/memory/fleet-notices", {"holder": "agent-b@example.com"}).json()["results"] == []


def test_a_flag_without_a_closing_tombstone_is_a_gap_and_acknowledging_again_signs_it(agent, copied):
    # Given a notice acknowledged before acknowledgements were signed (or whose flag was set by hand)
    artifact_id, handle, notice = copied
    FleetCopyNotice.objects.filter(pk=notice.pk).update(acknowledged_at=notice.notified_at)

    gap = confirm(agent, handle)
    assert gap.status_code == 409 and [g["gap"] for g in gap.json()["gaps"]] == ["acknowledgement_unsigned"]
    pending = agent.get("/api/v1/memory/fleet-notices", {"holder": "agent-b@example.com"}).json()["results"]
    assert [n["id"] for n in pending] == [notice.pk]  # listed again, so that its holder acknowledges it

    agent.post(f"/api/v1/memory/fleet-notices/{notice.pk}/ack")

    notice.refresh_from_db()
    assert notice.closing_tombstone_id is not None and notice.acknowledged_at == notice.notified_at
    assert confirm(agent, handle).status_code == 200


def test_a_closing_tombstone_that_does_not_close_the_item_is_still_a_gap(agent, copied, tenant, chat):
    # Given a notice pointing at a genuine tombstone that closes something else (another forget's tombstone)
    _, handle, notice = copied
    other = agent.post("/api/v1/memory/forget", {"target": {"record_id": record(tenant, chat).pk}, "mode": "hard",
                                                 "reason": "x"}, format="json").json()["handle"]
    FleetCopyNotice.objects.filter(pk=notice.pk).update(acknowledged_at=notice.notified_at,
                                                       closing_tombstone_id=other["tombstone_id"])

    answer = confirm(agent, handle)

    assert answer.status_code == 409 and [g["gap"] for g in answer.json()["gaps"]] == ["acknowledgement_unsigned"]
