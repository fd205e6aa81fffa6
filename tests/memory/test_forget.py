"""The one guarded forget: refusals with reasons, modes permitted under a lock, partial answers,
and the same record surviving every other destructive path (DESIGN.md invariants 1 to 3)."""
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from config.errors import ApplicationError
from memory.models import DeletedRecord, DerivedArtifact, ForgetEvent, ForgetMode, Lineage, Record, RecordTag, Scope
from memory.services import ForgetTarget, artifact_write, records_forget
from retention.services import hold_place, rule_change_duration, rule_retire
from tests.factories import record, rule

SEVEN_YEARS = 7 * 365


def forget(agent, target, mode, **extra):
    return agent.post("/api/v1/memory/forget", {"target": target, "mode": mode, **extra}, format="json")


@pytest.fixture
def locked(tenant, ledger_class):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4")
    return record(tenant, ledger_class, content="bought 100 ACME at 12.30")


def test_hard_forget_of_locked_record_is_refused_with_reason(agent, locked):
    response = forget(agent, {"record_id": locked.pk}, "hard", reason="user asked")

    assert response.status_code == 409
    body = response.json()
    assert body["status"] == "refused"
    (result,) = body["results"]
    assert result["record_id"] == locked.pk and result["outcome"] == "refused"
    reason = result["reason"]
    assert reason["code"] == "retention_lock"
    assert reason["authority"] == "SEC 17a-4"
    assert reason["locked_until"].startswith(str(locked.retained_until.date()))
    assert reason["permitted_modes"] == ["soft", "redact"]
    (blocking,) = reason["blocking"]
    assert blocking["type"] == "rule" and blocking["kind"] == "regulatory" and blocking["duration_days"] == SEVEN_YEARS
    stored = Record.objects.get(pk=locked.pk)
    assert stored.content == "bought 100 ACME at 12.30" and stored.forgotten_at is None


def test_soft_and_redact_are_permitted_under_an_existence_lock_and_keep_the_row(agent, locked):
    assert forget(agent, {"record_id": locked.pk}, "soft").json()["results"][0]["outcome"] == "hidden"
    stored = Record.objects.get(pk=locked.pk)
    assert stored.forgotten_at is not None and stored.content and stored.erasure_pending

    assert forget(agent, {"record_id": locked.pk}, "redact").json()["results"][0]["outcome"] == "redacted"
    stored = Record.objects.get(pk=locked.pk)
    assert stored.content == "" and stored.redacted_at is not None
    assert (stored.created_at, stored.commitment) == (locked.created_at, locked.commitment)


def test_redact_is_refused_when_the_rule_protects_content(agent, tenant, ledger_class):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4(f) WORM", protects="content")
    worm = record(tenant, ledger_class, content="order ticket 991")

    response = forget(agent, {"record_id": worm.pk}, "redact")

    assert response.status_code == 409
    reason = response.json()["results"][0]["reason"]
    assert reason["code"] == "retention_lock" and reason["permitted_modes"] == ["soft"]
    assert reason["blocking"][0]["protects"] == "content"
    assert Record.objects.get(pk=worm.pk).content == "order ticket 991"


def test_pact_ttl_never_shortens_a_regulatory_retention(agent, tenant, ledger_class):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4")
    rule(tenant, ledger_class, days=90, kind="pact", authority="customer pact §4.2")
    old = record(tenant, ledger_class, age_days=100)

    assert old.retained_until == old.created_at + timedelta(days=SEVEN_YEARS)
    response = forget(agent, {"record_id": old.pk}, "hard")
    assert response.status_code == 409
    assert response.json()["results"][0]["reason"]["authority"] == "SEC 17a-4"
    assert Record.objects.filter(pk=old.pk).exists()


def test_hold_blocks_even_an_expired_rule(agent, tenant, ledger_class):
    rule(tenant, ledger_class, days=SEVEN_YEARS)
    expired = record(tenant, ledger_class, age_days=SEVEN_YEARS + 30, subject="s-9")
    hold = hold_place(tenant=tenant, matter="Doe v. Acme", authority="court order 22-cv-1",
                      subject=expired.subject, actor="legal")

    response = forget(agent, {"record_id": expired.pk}, "hard")

    assert response.status_code == 409
    reason = response.json()["results"][0]["reason"]
    assert reason["code"] == "legal_hold" and reason["authority"] == "court order 22-cv-1"
    assert reason["blocking"][0]["hold_id"] == hold.pk
    assert reason["permitted_modes"] == ["soft"]
    assert forget(agent, {"record_id": expired.pk}, "redact").status_code == 409
    assert Record.objects.get(pk=expired.pk).content == "hello world"


def test_partial_forget_says_partial_and_lists_each_outcome(agent, tenant, chat, ledger_class):
    rule(tenant, ledger_class, days=SEVEN_YEARS)
    free = record(tenant, chat, scope="user:7/session:1", content="free")
    kept = record(tenant, ledger_class, scope="user:7/session:2", content="kept")

    response = forget(agent, {"scope": "user:7"}, "hard")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "partial" and body["erasure_pending"] is True
    outcomes = {r["record_id"]: r["outcome"] for r in body["results"]}
    assert outcomes == {free.pk: "deleted", kept.pk: "refused"}
    assert not Record.objects.filter(pk=free.pk).exists() and Record.objects.filter(pk=kept.pk).exists()
    assert body["handle"]["sequence"] == ForgetEvent.objects.get().pk


def test_handles_are_monotonic(agent, tenant, chat):
    first, second = record(tenant, chat, content="a"), record(tenant, chat, content="b")
    one = forget(agent, {"record_id": first.pk}, "soft").json()["handle"]["sequence"]
    two = forget(agent, {"record_id": second.pk}, "soft").json()["handle"]["sequence"]
    assert two > one


def test_locked_record_cannot_be_destroyed_by_queryset_or_model_delete(tenant, locked):
    with pytest.raises(ApplicationError) as refused:
        Record.objects.filter(pk=locked.pk).delete()
    assert refused.value.code == "retention_lock"
    with pytest.raises(ApplicationError):
        Record.objects.get(pk=locked.pk).delete()
    with pytest.raises(ApplicationError):
        Record.objects.all().delete()
    assert Record.objects.filter(pk=locked.pk).exists()


def test_queryset_delete_of_unlocked_records_goes_through_the_guard(tenant, chat):
    doomed = record(tenant, chat)
    assert Record.objects.filter(pk=doomed.pk).delete() == (1, {"memory.Record": 1})
    assert not Record.objects.filter(pk=doomed.pk).exists()
    assert ForgetEvent.objects.get().path == "queryset_delete"


def test_locked_record_cannot_be_destroyed_by_the_management_command(tenant, locked):
    with pytest.raises(CommandError):
        call_command("forget", tenant=tenant.name, record_id=[locked.pk], mode="hard")
    assert Record.objects.filter(pk=locked.pk).exists()


def test_locked_record_cannot_be_destroyed_by_raw_sql(locked):
    with pytest.raises(DatabaseError, match="retention_lock"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [locked.pk])
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_record SET retained_until = NULL WHERE id = %s", [locked.pk])
    assert Record.objects.filter(pk=locked.pk).exists()


def test_locked_record_cannot_be_destroyed_from_the_admin(admin_client, locked):
    response = admin_client.post(f"/admin/memory/record/{locked.pk}/delete/", {"post": "yes"})
    assert response.status_code in (200, 302, 403, 409)
    response = admin_client.post("/admin/memory/record/", {"action": "delete_selected", "_selected_action": [locked.pk],
                                                           "post": "yes"})
    assert response.status_code in (200, 302, 403, 409)
    assert Record.objects.filter(pk=locked.pk).exists()


def test_forgetting_a_record_forgets_artifacts_derived_from_any_of_its_sources(agent, tenant, chat):
    a, b = record(tenant, chat, content="alpha"), record(tenant, chat, content="beta")
    summary = agent.post("/api/v1/memory/records", {"derived_from": [a.pk, b.pk], "kind": "summary",
                                                     "content": "alpha and beta"}, format="json")
    assert summary.status_code == 201

    assert forget(agent, {"record_id": a.pk}, "hard").status_code == 200

    assert not DerivedArtifact.objects.filter(pk=summary.json()["id"]).exists()
    assert agent.get(f"/api/v1/memory/records/{b.pk}").status_code == 200


def test_artifacts_of_lists_each_artifact_once_with_its_kind_holder_and_the_sources_among_those_given(tenant, chat):
    """What the hard branch lists in the tombstone and tracks as copies (one raw query per batch on PostgreSQL)."""
    from memory.services.forget import _artifacts_of

    a, b, c, outside = (record(tenant, chat, content=f"r{i}") for i in range(4))
    shared = artifact_write(tenant=tenant, kind="fleet_copy", source_ids=[c.pk, a.pk, outside.pk, b.pk],
                            content="copy", holder="agent-b")
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[b.pk], content="about b")
    artifact_write(tenant=tenant, kind="summary", source_ids=[outside.pk], content="not ours")

    found = _artifacts_of([a.pk, b.pk, c.pk])

    assert [x.pk for x in found] == sorted(x.pk for x in found)
    assert [(x.pk, x.kind, x.holder, x.sources) for x in found if x.kind != "embedding"] == [
        (shared.pk, "fleet_copy", "agent-b", sorted([a.pk, b.pk, c.pk])), (summary.pk, "summary", "", [b.pk])]
    # and each record's own embedding (the factory writes one), and nothing of `outside` alone
    assert sorted(x.sources for x in found if x.kind == "embedding") == [[a.pk], [b.pk], [c.pk]]


def test_a_scope_named_by_a_deletion_row_cannot_be_deleted_through_django(tenant, chat):
    """DeletedRecord's scope has no foreign-key constraint in PostgreSQL (memory migration 0009): Django's
    PROTECT is what keeps the scope of a deleted record from being deleted under its deletion row."""
    gone = record(tenant, chat, content="x", scope="user:9/session:1")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(gone.pk,)), mode="hard", actor="test")
    assert DeletedRecord.objects.get(record_id=gone.pk).scope_id == gone.scope_id

    with pytest.raises(ProtectedError):
        Scope.objects.get(pk=gone.scope_id).delete()
    assert Scope.objects.filter(pk=gone.scope_id).exists()


def test_hard_forget_writes_a_deletion_row_per_deleted_record_and_leaves_no_tags_or_lineage(tenant, chat, locked):
    """The hard branch's DELETE and its DeletedRecord rows are one statement on PostgreSQL: the rows written
    must be exactly the rows deleted, with their own tenant and scope, and nothing for a refused record."""
    doomed = [record(tenant, chat, content=f"d{i}", scope=f"user:{i}/session:1", tags=["a", "b"]) for i in range(3)]
    survivor = record(tenant, chat, content="other source")
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[doomed[0].pk, survivor.pk], content="both")

    result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in [*doomed, locked])),
                            mode="hard", actor="test", reason="test")

    assert result.status == "partial"
    assert not Record.objects.filter(pk__in=[r.pk for r in doomed]).exists()
    assert Record.objects.get(pk=locked.pk).content == "bought 100 ACME at 12.30"
    rows = {d.record_id: d for d in DeletedRecord.objects.all()}
    assert set(rows) == {r.pk for r in doomed}
    for r in doomed:
        assert (rows[r.pk].tenant_id, rows[r.pk].scope_id) == (tenant.pk, r.scope_id)
        assert rows[r.pk].forget_event_id == result.event.pk and rows[r.pk].deleted_at == result.event.created_at
    assert not RecordTag.objects.filter(record_id__in=[r.pk for r in doomed]).exists()
    assert not Lineage.objects.filter(source_id__in=[r.pk for r in doomed]).exists()
    assert not DerivedArtifact.objects.filter(pk=summary.pk).exists()
    assert not Lineage.objects.filter(artifact_id=summary.pk).exists()
    assert Record.objects.filter(pk=survivor.pk).exists()


def test_compliance_rule_can_never_be_shortened_or_retired(tenant, ledger_class):
    compliance = rule(tenant, ledger_class, days=SEVEN_YEARS, mode="compliance")
    for change in (lambda: rule_change_duration(rule=compliance, duration_days=30, actor="su", justification="x"),
                   lambda: rule_retire(rule=compliance, actor="su", justification="x")):
        with pytest.raises(ApplicationError) as refused:
            change()
        assert refused.value.code == "compliance_lock"
    extended = rule_change_duration(rule=compliance, duration_days=SEVEN_YEARS + 1, actor="legal", justification="x")
    assert extended.duration_days == SEVEN_YEARS + 1


def test_retiring_a_governance_rule_unlocks_its_records_set_based(agent, tenant, ledger_class,
                                                                  django_assert_max_num_queries):
    governance = rule(tenant, ledger_class, days=SEVEN_YEARS)
    records = [record(tenant, ledger_class, content=f"r{i}") for i in range(20)]
    with django_assert_max_num_queries(15):
        rule_retire(rule=governance, actor="legal", justification="policy withdrawn")
    assert not Record.objects.filter(pk__in=[r.pk for r in records], retained_until__isnull=False).exists()
    assert forget(agent, {"record_id": [r.pk for r in records]}, "hard").json()["status"] == "forgotten"


def test_a_rule_added_later_locks_existing_records(agent, tenant, ledger_class):
    earlier = record(tenant, ledger_class)
    rule(tenant, ledger_class, days=SEVEN_YEARS)
    assert forget(agent, {"record_id": earlier.pk}, "hard").status_code == 409


def test_released_hold_unlocks_and_stays_on_record(agent, tenant, chat):
    kept = record(tenant, chat, subject="s-1")
    hold = hold_place(tenant=tenant, matter="audit 2026", scope=kept.scope, actor="legal")
    assert forget(agent, {"record_id": kept.pk}, "hard").status_code == 409

    from retention.services import hold_release
    hold_release(hold=hold, actor="legal", reason="matter closed")

    assert forget(agent, {"record_id": kept.pk}, "hard").status_code == 200
    hold.refresh_from_db()
    assert hold.released_at is not None and hold.release_reason == "matter closed"


def test_service_refuses_unknown_mode(tenant, chat):
    kept = record(tenant, chat)
    with pytest.raises(ApplicationError) as refused:
        records_forget(tenant=tenant, target=ForgetTarget(record_ids=(kept.pk,)), mode="shred", actor="t")
    assert refused.value.code == "invalid_mode"
    assert Record.objects.get(pk=kept.pk).forgotten_at is None


def test_hold_placed_on_a_record_written_later_in_the_held_scope(agent, tenant, chat):
    first = record(tenant, chat, scope="user:3")
    hold_place(tenant=tenant, matter="m", scope=first.scope, actor="legal")
    later = record(tenant, chat, scope="user:3/session:9", age_days=0)
    assert later.held
    assert forget(agent, {"record_id": later.pk}, "hard").status_code == 409
    assert timezone.now()


def test_hidden_records_due_together_share_one_deferred_item_and_each_is_named_once(tenant, chat, ledger_class):
    from tests.memory.sweep_fixtures import statement_of
    from tombstones.verification import deferred_items, statement_summary

    rule(tenant, ledger_class, days=SEVEN_YEARS)
    free = [record(tenant, chat, subject="s-1", content=f"chat {i}") for i in range(3)]
    trades = [record(tenant, ledger_class, subject="s-1", content=f"trade {i}", age_days=i) for i in range(2)]
    held = record(tenant, chat, subject="s-2", content="under hold")
    hold_place(tenant=tenant, matter="Doe v. Acme", authority="court order", subject=held.subject, actor="legal")
    held.refresh_from_db()
    for trade in trades:
        trade.refresh_from_db()

    result = records_forget(tenant=tenant, target=ForgetTarget(subjects=("s-1", "s-2")), mode="soft", actor="t")
    statement = statement_of(result.event)

    purges = [d for d in statement["propagation"]["deferred"] if d["action"] == "purge_content"]
    by_item = deferred_items(statement)
    assert set(by_item) == {f"record:{r.pk}" for r in [*free, *trades, held]}
    # The three unlocked records are due together (compaction); each trade when its own lock ends; the held
    # record when the hold is released (no date).
    assert len(purges) == 4
    assert sorted(by_item[f"record:{r.pk}"]["items"] for r in free)[0] == sorted(f"record:{r.pk}" for r in free)
    for trade in trades:
        assert by_item[f"record:{trade.pk}"]["deadline"] == trade.retained_until.isoformat()
    assert by_item[f"record:{held.pk}"] == {"items": [f"record:{held.pk}"], "action": "purge_content",
                                             "deadline": None, "awaiting": "legal_hold_release"}
    summary = statement_summary(statement, keyid="k")
    assert summary["deferred"] == 6 and summary["deferred_undated"] == 1 and len(summary["deferred_deadlines"]) == 3


def _not_exact_json(value, path="statement") -> list[str]:
    """Where `value` holds anything but exact dict, list, str, int, bool or None (a str subclass included)."""
    if type(value) is dict:
        return [p for key, item in value.items() for p in _not_exact_json(item, f"{path}.{key}")]
    if type(value) is list:
        return [p for index, item in enumerate(value) for p in _not_exact_json(item, f"{path}[{index}]")]
    return [] if type(value) in (str, int, bool, type(None)) else [f"{path}: {type(value).__name__}"]


@pytest.mark.parametrize("mode", list(ForgetMode))
def test_the_statement_holds_only_exact_json_types_for_the_canonical_fast_path(tenant, chat, monkeypatch, mode):
    # Given the statements a forget hands to the tombstone service, the mode passed as the ForgetMode member
    # (as the sweeps and the workflow pass it)
    from memory.services import forget as forget_module
    from tombstones.services import issue

    statements = []
    original = issue.statement_payload
    monkeypatch.setattr(issue, "statement_payload", lambda **kwargs: statements.append(kwargs["statement"]) or
                        original(**kwargs))
    records = [record(tenant, chat, content=f"note {i}") for i in range(2)]
    artifact_write(tenant=tenant, kind="summary", content="both", source_ids=[r.pk for r in records])

    # When they are forgotten
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in records)), mode=mode,
                   actor="t", reason="r")

    # Then the statement is made of exact JSON types only: canonical_json's fast path (orjson) takes nothing else,
    # and one str subclass (a ForgetMode member) sent a sweep batch's whole statement through a Python walk
    (statement,) = statements
    assert _not_exact_json(statement) == []
    assert forget_module.OUTCOME[mode] in {item["outcome"] for item in statement["execution"]["records"]}


def test_each_record_is_named_once_with_its_outcome_in_the_answer_event_statement_and_salts(tenant, chat, ledger_class):
    """The answer's results, the event's outcomes, the statement's records and the stored salts are built from one
    pass over the decisions (forget.py's fast paths for forgets with nothing refused): each must still name every
    record once, in id order, with its own outcome; a refused record keeps its reason and gets no salt, nor does
    a redacted one (its salt went with its content)."""
    from tests.memory.sweep_fixtures import statement_of
    from tombstones.models import TombstoneSalts

    # Given three chat records, one of them already redacted, and a locked trade
    rule(tenant, ledger_class, days=SEVEN_YEARS)
    plain = [record(tenant, chat, subject="s-1", content=f"chat {i}") for i in range(3)]
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(plain[1].pk,)), mode="redact", actor="t")
    trade = record(tenant, ledger_class, subject="s-1", content="trade")
    ids = [r.pk for r in plain]

    # When the chat records are hidden (mixed outcomes, nothing refused)
    soft = records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(ids)), mode="soft", actor="t",
                          salts_for_receipt=True)

    # Then each is named once with its own outcome, everywhere, in id order
    expected = {ids[0]: "hidden", ids[1]: "redacted", ids[2]: "hidden"}
    assert [(r["record_id"], r["outcome"]) for r in soft.results] == sorted(expected.items())
    assert all(set(r) == {"record_id", "outcome"} for r in soft.results)
    assert ForgetEvent.objects.get(pk=soft.event.pk).outcomes == {
        "hidden": [ids[0], ids[2]], "redacted": [ids[1]], "deleted": [], "refused": []}
    statement = statement_of(soft.event)
    assert [(r["record_id"], r["outcome"]) for r in statement["execution"]["records"]] == [
        (str(pk), outcome) for pk, outcome in sorted(expected.items())]
    assert "reason" not in str(statement["execution"]["records"])
    salts = TombstoneSalts.objects.get(tombstone_id=soft.event.public_id).salts
    assert salts == {str(r.pk): r.salt for r in plain if r.pk != ids[1]}
    assert Record.objects.get(pk=ids[1]).salt == ""

    # When all four are forgotten hard (the trade refused)
    hard = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(*ids, trade.pk)), mode="hard", actor="t",
                          salts_for_receipt=True)

    # Then the trade alone is refused with its reason, and has no salt; the others are deleted
    assert [(r["record_id"], r["outcome"]) for r in hard.results] == [(pk, "deleted") for pk in ids] + [
        (trade.pk, "refused")]
    assert hard.results[-1]["reason"]["code"] == "retention_lock"
    assert ForgetEvent.objects.get(pk=hard.event.pk).outcomes == {
        "hidden": [], "redacted": [], "deleted": ids, "refused": [{"record_id": trade.pk, "code": "retention_lock"}]}
    records = statement_of(hard.event)["execution"]["records"]
    assert [(r["record_id"], r["outcome"], r.get("reason")) for r in records] == [
        (str(pk), "deleted", None) for pk in ids] + [(str(trade.pk), "refused", "retention_lock")]
    assert set(TombstoneSalts.objects.get(tombstone_id=hard.event.public_id).salts) == {str(ids[0]), str(ids[2])}
    assert Record.objects.filter(pk__in=[*ids, trade.pk]).count() == 1  # the trade, kept
