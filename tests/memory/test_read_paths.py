"""After a forget no read path returns the content (DESIGN.md invariant 4), and confirm-erasure only
says "erased" when every path and derivative has been probed (invariant 5)."""
import pytest

from memory.models import DerivedArtifact, Record
from tests.factories import record, rule

SECRET = "the launch code is tangerine falcon"


def forget(agent, target, mode):
    return agent.post("/api/v1/memory/forget", {"target": target, "mode": mode}, format="json")


def read_paths(agent, record_id, text):
    """What each read path returns for a record id and its text (ids seen anywhere)."""
    seen = {}
    seen["read_by_id"] = agent.get(f"/api/v1/memory/records/{record_id}").status_code
    listing = agent.get("/api/v1/memory/records", {"scope": "user:42"}).json()["results"]
    seen["scope_listing"] = [r["id"] for r in listing]
    keyword = agent.get("/api/v1/memory/search", {"q": text}).json()["results"]
    seen["keyword"] = [h["record"]["id"] for h in keyword]
    similar = agent.get("/api/v1/memory/search", {"q": text, "mode": "similar", "limit": 50}).json()["results"]
    seen["similar"] = [h["record"]["id"] for h in similar]
    seen["similar_contents"] = [h["record"]["content"] for h in similar]
    return seen


@pytest.fixture
def user_tree(tenant, chat):
    """user:42 with two sessions and a document below one of them; and a neighbour user."""
    return {
        "session": record(tenant, chat, scope="user:42/session:1", content=SECRET, subject="u42"),
        "document": record(tenant, chat, scope="user:42/session:2/document:7", content="tangerine falcon notes",
                           subject="u42"),
        "neighbour": record(tenant, chat, scope="user:43/session:1", content="tangerine smoothie", subject="u43"),
    }


def test_every_read_path_returns_the_record_before_the_forget(agent, user_tree):
    seen = read_paths(agent, user_tree["session"].pk, SECRET)
    assert seen["read_by_id"] == 200
    assert user_tree["session"].pk in seen["scope_listing"] and user_tree["document"].pk in seen["scope_listing"]
    assert user_tree["session"].pk in seen["keyword"]
    assert seen["similar"][0] == user_tree["session"].pk


def test_the_search_api_answers_the_selectors_hits_in_their_order_each_with_its_own_score(agent, tenant,
                                                                                          user_tree):
    from memory.selectors import records_search, records_similar

    keyword = agent.get("/api/v1/memory/search", {"q": "tangerine"}).json()["results"]
    assert [h["record"]["id"] for h in keyword] == [r.pk for r in records_search(tenant=tenant, q="tangerine",
                                                                                 limit=10)]
    assert len(keyword) == 3 and all(set(h) == {"record"} for h in keyword)
    similar = agent.get("/api/v1/memory/search", {"q": SECRET, "mode": "similar"}).json()["results"]
    expected = records_similar(tenant=tenant, q=SECRET, limit=10)
    assert [(h["record"]["id"], h["score"]) for h in similar] == [(e.record.pk, round(e.score, 6)) for e in expected]
    assert similar[0]["record"]["content"] == SECRET and similar[0]["record"]["scope"] == "user:42/session:1"


@pytest.mark.parametrize("mode", ["soft", "redact", "hard"])
def test_forgetting_a_user_scope_hides_its_sessions_from_every_read_path(agent, user_tree, mode):
    response = forget(agent, {"scope": "user:42"}, mode)
    assert response.status_code == 200

    for forgotten in (user_tree["session"], user_tree["document"]):
        seen = read_paths(agent, forgotten.pk, SECRET)
        assert seen["read_by_id"] == 410
        for path in ("scope_listing", "keyword", "similar"):
            assert forgotten.pk not in seen[path], path
        assert SECRET not in seen["similar_contents"]
    assert agent.get(f"/api/v1/memory/records/{user_tree['neighbour'].pk}").status_code == 200


def test_forgotten_record_read_by_id_answers_410_with_its_handle_to_its_tenant_only(agent, other_agent, user_tree):
    handle = forget(agent, {"record_id": user_tree["session"].pk}, "hard").json()["handle"]

    mine = agent.get(f"/api/v1/memory/records/{user_tree['session'].pk}")
    assert mine.status_code == 410
    assert mine.json()["code"] == "forgotten" and mine.json()["handle"] == handle
    theirs = other_agent.get(f"/api/v1/memory/records/{user_tree['session'].pk}")
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found"


def test_summary_written_after_the_forget_from_the_forgotten_record_is_refused(agent, user_tree):
    forget(agent, {"scope": "user:42"}, "soft")

    response = agent.post("/api/v1/memory/records", {"derived_from": [user_tree["session"].pk], "kind": "summary",
                                                      "content": "summary of the launch code"}, format="json")

    assert response.status_code == 409 and response.json()["code"] == "source_forgotten"
    assert not DerivedArtifact.objects.filter(kind="summary").exists()


def test_artifacts_by_source_hide_artifacts_of_forgotten_sources(agent, tenant, chat, user_tree):
    neighbour = user_tree["neighbour"]
    summary = agent.post("/api/v1/memory/records", {"derived_from": [neighbour.pk, user_tree["session"].pk],
                                                     "kind": "summary", "content": "both"}, format="json").json()
    listed = agent.get(f"/api/v1/memory/records/{neighbour.pk}/artifacts").json()["results"]
    assert summary["id"] in [a["id"] for a in listed]

    forget(agent, {"record_id": user_tree["session"].pk}, "soft")

    listed = agent.get(f"/api/v1/memory/records/{neighbour.pk}/artifacts").json()["results"]
    assert summary["id"] not in [a["id"] for a in listed]


def test_confirm_erasure_asserts_erased_only_after_probing_every_path(agent, user_tree):
    handle = forget(agent, {"scope": "user:42"}, "hard").json()["handle"]

    response = agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["erased"] is True
    assert {e["path"] for e in body["evidence"]} == {"storage", "read_by_id", "scope_listing", "keyword_search",
                                                       "similarity_search", "derivatives", "fleet_copies"}
    assert all(e["found"] == 0 for e in body["evidence"])


def test_soft_forget_stays_erasure_pending_and_confirm_names_the_gaps(agent, user_tree):
    body = forget(agent, {"record_id": user_tree["session"].pk}, "soft").json()
    assert body["erasure_pending"] is True

    response = agent.post("/api/v1/memory/confirm-erasure", {"handle": body["handle"]}, format="json")

    assert response.status_code == 409
    gaps = response.json()["gaps"]
    assert response.json()["code"] == "erasure_unconfirmed" and response.json()["erased"] is False
    assert {"record_id": user_tree["session"].pk, "path": "storage", "gap": "content_at_rest",
            "detail": "The record is hidden but its content is still stored.",
            "deferred_until": "compaction"} in gaps
    assert any(g["gap"] == "vector_at_rest" for g in gaps)
    assert Record.objects.get(pk=user_tree["session"].pk).erasure_pending is True


def test_redact_then_confirm_clears_erasure_pending(agent, user_tree):
    handle = forget(agent, {"record_id": user_tree["session"].pk}, "redact").json()["handle"]
    assert Record.objects.get(pk=user_tree["session"].pk).erasure_pending is True

    assert agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json").status_code == 200

    assert Record.objects.get(pk=user_tree["session"].pk).erasure_pending is False


def test_locked_record_hidden_reports_its_lock_end_as_the_deferral(agent, tenant, ledger_class):
    rule(tenant, ledger_class, days=365)
    kept = record(tenant, ledger_class, content="trade")
    handle = forget(agent, {"record_id": kept.pk}, "soft").json()["handle"]

    gaps = agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json").json()["gaps"]

    assert gaps[0]["deferred_until"].startswith(str(kept.retained_until.date()))


def test_forget_by_tag_and_by_subject(agent, tenant, chat):
    tagged = record(tenant, chat, content="tagged", tags=["project-x"], subject="s-a")
    other = record(tenant, chat, content="other", subject="s-b")
    assert forget(agent, {"tag": "project-x"}, "hard").json()["results"] == [
        {"record_id": tagged.pk, "outcome": "deleted"}]
    assert forget(agent, {"subject": "s-b"}, "hard").json()["results"] == [{"record_id": other.pk, "outcome": "deleted"}]


def test_archive_copies_enter_the_deletion_log_and_fleet_copies_wait_for_acknowledgement(agent, tenant, chat):
    from memory.models import ArchiveDeletion, FleetCopyNotice

    source = record(tenant, chat, content="copied everywhere")
    archive = agent.post("/api/v1/memory/records", {"derived_from": [source.pk], "kind": "archive", "content": "",
                                                     "holder": "s3://cold/2026"}, format="json").json()
    copy = agent.post("/api/v1/memory/records", {"derived_from": [source.pk], "kind": "fleet_copy",
                                                  "content": "copied everywhere", "holder": "agent-b"},
                      format="json").json()

    handle = forget(agent, {"record_id": source.pk}, "hard").json()["handle"]

    logged = ArchiveDeletion.objects.get()
    assert (logged.record_id, logged.artifact_id, logged.commitment) == (source.pk, archive["id"], source.commitment)
    pending = agent.get("/api/v1/memory/fleet-notices", {"holder": "agent-b"}).json()["results"]
    assert [(n["artifact_id"], n["source_ids"]) for n in pending] == [(copy["id"], [source.pk])]
    confirm = agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json")
    assert confirm.status_code == 409
    assert [g["gap"] for g in confirm.json()["gaps"]] == ["unacknowledged"]

    assert agent.post(f"/api/v1/memory/fleet-notices/{pending[0]['id']}/ack").status_code == 200

    assert FleetCopyNotice.objects.get().acknowledged_at is not None
    assert agent.post("/api/v1/memory/confirm-erasure", {"handle": handle}, format="json").status_code == 200
