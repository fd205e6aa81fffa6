"""`records_forget_many`: several independent targets in one guarded forget. Each target is decided on its own
and gets its own forget event and its own signed tombstone (DESIGN.md invariants 3, 5 and 6), while the
statements are set-based across the targets; a lock in one target never changes another's outcome, a lock
that changes between the read and the write makes every target be decided again, and the database guard
still refuses what Python would have let through."""
import threading

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from config.errors import ApplicationError
from memory.models import ArchiveDeletion, DeletedRecord, DerivedArtifact, ForgetEvent, Lineage, Record, Scope
from memory.services import ForgetOrder, ForgetTarget, artifact_write, records_forget, records_forget_many
from memory.services import forget as forget_module
from retention.services import hold_place
from tests.factories import ContentClassFactory, TenantFactory, record, rule
from tests.memory.sweep_fixtures import statement_of
from tombstones.models import Tombstone
from tombstones.services import receipt_build, tombstone_verify
from tombstones.verification import GENUINE

SEVEN_YEARS = 7 * 365


def embeddings(records) -> list[int]:
    """The embedding artifacts `record_write` made of these records."""
    return list(Lineage.objects.filter(source_id__in=[r.pk for r in records], artifact__kind="embedding")
                .values_list("artifact_id", flat=True))


def order(records, mode="hard", actor="test", **extra):
    return ForgetOrder(target=ForgetTarget(record_ids=tuple(sorted(r.pk for r in records))), mode=mode, actor=actor,
                       **extra)


@pytest.fixture
def subjects(tenant, chat):
    """Three subjects' records, three each."""
    return [[record(tenant, chat, content=f"s{s} r{i}", subject=f"s-{s}", scope=f"user:{s}/session:1")
             for i in range(3)] for s in range(3)]


def test_each_target_gets_its_own_event_and_its_own_tombstone_and_each_verifies(tenant, subjects):
    results = records_forget_many(tenant=tenant, orders=[order(rs, actor=f"request:{n}", salts_for_receipt=True)
                                                         for n, rs in enumerate(subjects)])

    events = [r.event for r in results]
    assert len({e.pk for e in events}) == 3 and len({r.tombstone_id for r in results}) == 3
    assert list(ForgetEvent.objects.order_by("pk")) == events
    assert [e.actor for e in events] == ["request:0", "request:1", "request:2"]
    assert Tombstone.objects.count() == 3
    for result, records in zip(results, subjects):
        assert result.status == "forgotten" and [r["outcome"] for r in result.results] == ["deleted"] * 3
        assert result.event.outcomes["deleted"] == [r.pk for r in records]
        statement = statement_of(result.event)
        assert statement["execution"]["handle"] == str(result.event.pk)
        assert [int(r["record_id"]) for r in statement["execution"]["records"]] == [r.pk for r in records]
        receipt = receipt_build(tombstone_id=result.tombstone_id)
        assert sorted(map(int, receipt["salts"])) == [r.pk for r in records]  # its own subject's salts only
        assert tombstone_verify(document=receipt).code == GENUINE
        for stored in records:
            report = tombstone_verify(document=receipt, content=stored.content, salt=receipt["salts"][str(stored.pk)])
            assert report.coverage.covered
        deleted = DeletedRecord.objects.filter(record_id__in=[r.pk for r in records])
        assert set(deleted.values_list("forget_event_id", flat=True)) == {result.event.pk}
    assert not Record.objects.exists()


def test_a_locked_record_in_one_target_does_not_change_another_targets_outcome(tenant, chat, ledger_class,
                                                                                 subjects):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4")
    trade = record(tenant, ledger_class, content="bought 100 ACME", subject="s-1", scope="user:1/session:1")

    first, second, third = records_forget_many(tenant=tenant, orders=[
        order(subjects[0]), order(subjects[1] + [trade]), order(subjects[2])])

    assert (first.status, second.status, third.status) == ("forgotten", "partial", "forgotten")
    refused = [r for r in second.results if r["outcome"] == "refused"]
    assert [r["record_id"] for r in refused] == [trade.pk]
    assert refused[0]["reason"]["code"] == "retention_lock" and refused[0]["reason"]["authority"] == "SEC 17a-4"
    assert first.event.outcomes["refused"] == [] and third.event.outcomes["refused"] == []
    assert list(Record.objects.values_list("pk", flat=True)) == [trade.pk]
    assert {r["record_id"]: r["outcome"] for r in statement_of(second.event)["execution"]["records"]}[
        str(trade.pk)] == "refused"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a second session writing meanwhile")
@pytest.mark.django_db(transaction=True)
def test_a_hold_placed_between_read_and_delete_makes_every_target_be_decided_again(monkeypatch):
    tenant = TenantFactory(name="racing")
    chat = ContentClassFactory(tenant=tenant, name="chat")
    subjects = [[record(tenant, chat, content=f"s{s} r{i}", subject=f"s-{s}") for i in range(2)] for s in range(2)]
    victim = subjects[1][0]
    original = forget_module._tombstone_issue
    placed = []

    def tombstones_then_hold(**kwargs):
        original(**kwargs)
        if not placed:  # another session places a hold and commits, after this forget decided
            def place():
                hold_place(tenant=tenant, matter="late matter", record_ids=[victim.pk], actor="legal")
                connection.close()
            thread = threading.Thread(target=place)
            thread.start()
            thread.join()
            placed.append(True)

    monkeypatch.setattr(forget_module, "_tombstone_issue", tombstones_then_hold)

    first, second = records_forget_many(tenant=tenant, orders=[order(subjects[0]), order(subjects[1])])

    assert placed
    assert first.status == "forgotten" and second.status == "partial"
    assert {r["record_id"]: r["outcome"] for r in second.results} == {victim.pk: "refused",
                                                                       subjects[1][1].pk: "deleted"}
    assert second.results[0]["reason"]["code"] == "legal_hold"
    assert list(Record.objects.values_list("pk", flat=True)) == [victim.pk]
    # The first attempt (its events and tombstones) was rolled back: one event and tombstone per target.
    assert list(ForgetEvent.objects.order_by("pk")) == [first.event, second.event]
    assert set(Tombstone.objects.values_list("id", flat=True)) == {first.event.public_id, second.event.public_id}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL trigger's message")
def test_the_database_guard_still_refuses_when_the_python_check_is_bypassed(tenant, chat, ledger_class, subjects,
                                                                             monkeypatch):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4")
    trade = record(tenant, ledger_class, content="bought 100 ACME", subject="s-1")
    # A Python guard gone wrong: every row decided deletable, and no lock condition in the statement.
    monkeypatch.setattr(forget_module, "_decide", lambda row, mode, now: "deleted")
    monkeypatch.setattr(forget_module, "lock_ended", lambda now: Q(pk__gt=0))

    with pytest.raises(ApplicationError) as raised:
        records_forget_many(tenant=tenant, orders=[order(subjects[0]), order(subjects[1] + [trade])])

    assert raised.value.code == "retention_lock" and raised.value.extra["guard"] == "database_trigger"
    assert Record.objects.count() == 10  # nothing of either target was changed
    assert not ForgetEvent.objects.exists() and not Tombstone.objects.exists()


def test_mixed_modes_in_one_call_each_row_carries_its_own_targets_event(tenant, chat, ledger_class, subjects):
    rule(tenant, ledger_class, days=SEVEN_YEARS, authority="SEC 17a-4(f) WORM", protects="content")
    worm = record(tenant, ledger_class, content="order ticket 991", subject="s-2")
    summary = artifact_write(tenant=tenant, kind="summary", source_ids=[subjects[0][0].pk], content="about s0")
    cache = artifact_write(tenant=tenant, kind="cache", source_ids=[subjects[1][0].pk], content="cached s1")
    archive = artifact_write(tenant=tenant, kind="archive", source_ids=[subjects[2][0].pk], holder="s3://cold",
                             content="copy")

    own = [embeddings(records) for records in subjects]

    hidden, redacted, deleted = records_forget_many(tenant=tenant, orders=[
        order(subjects[0], mode="soft", derivatives_mode="hard"),
        order(subjects[1] + [worm], mode="redact"),
        order(subjects[2], mode="hard"),
    ])

    assert [r["outcome"] for r in hidden.results] == ["hidden"] * 3
    assert [r["outcome"] for r in redacted.results] == ["redacted"] * 3 + ["refused"]
    assert redacted.status == "partial" and redacted.results[-1]["reason"]["permitted_modes"] == ["soft"]
    assert [r["outcome"] for r in deleted.results] == ["deleted"] * 3
    for stored in Record.objects.filter(pk__in=[r.pk for r in subjects[0]]):
        assert stored.forgotten_at is not None and stored.content and stored.forget_event_id == hidden.event.pk
    for stored in Record.objects.filter(pk__in=[r.pk for r in subjects[1]]):
        assert stored.content == "" and stored.redacted_at and stored.forget_event_id == redacted.event.pk
    kept = Record.objects.get(pk=worm.pk)
    assert kept.content == "order ticket 991" and kept.forget_event_id is None
    assert set(DeletedRecord.objects.values_list("record_id", "forget_event_id")) == {
        (r.pk, deleted.event.pk) for r in subjects[2]}
    assert not DerivedArtifact.objects.filter(pk__in=[summary.pk, archive.pk]).exists()  # hard derivatives
    cache.refresh_from_db()  # the redact forget's own derivatives mode: redacted, with its event
    assert cache.content == "" and cache.forget_event_id == redacted.event.pk
    assert (hidden.artifacts, redacted.artifacts, deleted.artifacts) == (
        {"deleted": sorted(own[0] + [summary.pk])}, {"redacted": sorted(own[1] + [cache.pk])},
        {"deleted": sorted(own[2] + [archive.pk])})
    (logged,) = ArchiveDeletion.objects.all()
    assert (logged.record_id, logged.forget_event_id) == (subjects[2][0].pk, deleted.event.pk)
    deferred = statement_of(hidden.event)["propagation"]["deferred"]
    assert [d["action"] for d in deferred] == ["purge_content"]


def test_an_artifact_of_two_targets_goes_with_the_first(tenant, subjects):
    shared = artifact_write(tenant=tenant, kind="summary", content="both",
                            source_ids=[subjects[0][1].pk, subjects[1][0].pk, subjects[1][2].pk])

    own = [embeddings(records) for records in subjects[:2]]

    first, second = records_forget_many(tenant=tenant, orders=[order(subjects[0]), order(subjects[1])])

    assert first.artifacts == {"deleted": sorted(own[0] + [shared.pk])} and second.artifacts == {"deleted": own[1]}
    assert [d["artifact_id"] for d in statement_of(first.event)["propagation"]["derivatives"]] == [
        str(pk) for pk in sorted(own[0] + [shared.pk])]
    assert not DerivedArtifact.objects.filter(pk=shared.pk).exists()


def test_one_unknown_target_fails_the_call_and_changes_nothing(tenant, subjects):
    with pytest.raises(ApplicationError) as raised:
        records_forget_many(tenant=tenant, orders=[
            order(subjects[0]), ForgetOrder(target=ForgetTarget(record_ids=(10**12,)), mode="hard", actor="t")])

    assert raised.value.code == "not_found" and raised.value.extra["record_ids"] == [10**12]
    assert Record.objects.count() == 9 and not ForgetEvent.objects.exists() and not Tombstone.objects.exists()


def test_targets_that_share_records_are_a_programming_error(tenant, subjects):
    with pytest.raises(ValueError):
        records_forget_many(tenant=tenant, orders=[order(subjects[0]), order(subjects[0][:1])])
    assert Record.objects.count() == 9 and not ForgetEvent.objects.exists()


def test_targets_of_every_kind_in_one_call_and_the_single_forget_is_one_of_them(tenant, subjects):
    by_subject = ForgetOrder(target=ForgetTarget(subjects=("s-0",)), mode="soft", actor="t")
    by_scope = ForgetOrder(target=ForgetTarget(scope="user:1"), mode="soft", actor="t")

    first, second = records_forget_many(tenant=tenant, orders=[by_subject, by_scope])
    single = records_forget(tenant=tenant, target=ForgetTarget(record_ids=(subjects[2][0].pk,)), mode="soft",
                            actor="t")

    assert [r["record_id"] for r in first.results] == [r.pk for r in subjects[0]]
    assert [r["record_id"] for r in second.results] == [r.pk for r in subjects[1]]
    assert first.event.target == {"subject_ids": [str(subjects[0][0].subject_id)]}
    scope_id = str(Scope.objects.get(tenant=tenant, path="user:1").pk)
    assert second.event.target == {"scope": "user:1", "scope_id": scope_id}  # the tombstone: the id alone
    assert single.status == "forgotten" and Tombstone.objects.count() == 3
    assert records_forget_many(tenant=tenant, orders=[]) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="set-based statements on PostgreSQL")
def test_the_statements_do_not_grow_with_the_number_of_targets(tenant, chat):
    def forget_targets(count):
        orders = []
        for n in range(count):
            records = [record(tenant, chat, content=f"{count} {n} {i}", subject=f"q-{count}-{n}") for i in range(2)]
            artifact_write(tenant=tenant, kind="summary", source_ids=[records[0].pk], content="s")
            orders.append(order(records[:1], mode="hard"))
            orders.append(order(records[1:], mode="soft"))
        with CaptureQueriesContext(connection) as queries:
            records_forget_many(tenant=tenant, orders=orders)
        return len(queries)

    forget_targets(1)  # the signing key's row, read once per process
    assert forget_targets(10) == forget_targets(2)
