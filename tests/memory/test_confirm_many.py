"""Confirming many forgets in one pass per read path (`erasures_confirm`, what the erasure workflow's
confirm step uses) gives each forget the answer it would get alone: one forget's gaps never block,
nor hide behind, another's."""
import pytest

from memory.models import ForgetEvent, Record
from memory.services import ForgetTarget, erasure_confirm, records_forget
from memory.services.confirm import erasures_confirm
from tests.factories import record

pytestmark = pytest.mark.django_db


def forget(tenant, records, mode):
    return records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in records)), mode=mode,
                          actor="test").event


def alone(tenant, event):
    result = erasure_confirm(tenant=tenant, handle={"sequence": event.pk})
    return result.erased, result.gaps, result.evidence


def assert_each_as_alone(tenant, events, together):
    """Probed together, each forget gets exactly the answer it gets when probed alone."""
    for event, result in zip(events, together):
        assert (result.erased, result.gaps, result.evidence) == alone(tenant, event)


def test_forgets_probed_together_each_get_the_answer_they_get_alone(tenant, chat):
    hidden = record(tenant, chat, scope="user:42/session:1", content="my address is 12 Tangerine Lane",
                    subject="u42")
    deleted = [record(tenant, chat, scope="user:42/session:2", content=f"note {i}", subject="u42") for i in range(3)]
    soft, hard = forget(tenant, [hidden], "soft"), forget(tenant, deleted, "hard")

    together = erasures_confirm(tenant=tenant, events=[soft, hard])

    assert [r.erased for r in together] == [False, True]
    assert {(g["path"], g["gap"]) for g in together[0].gaps} == {
        ("storage", "content_at_rest"), ("similarity_index", "vector_at_rest"), ("derivatives", "content_at_rest")}
    assert {g["record_id"] for g in together[0].gaps if "record_id" in g} == {hidden.pk}
    assert ForgetEvent.objects.get(pk=hard.pk).confirmed_at is not None
    assert ForgetEvent.objects.get(pk=soft.pk).confirmed_at is None
    assert Record.objects.get(pk=hidden.pk).erasure_pending is True
    assert_each_as_alone(tenant, [soft, hard], together)


def test_a_record_visible_again_is_a_gap_of_its_own_forget_on_every_listing_of_its_scopes(tenant, chat):
    leaked = record(tenant, chat, scope="user:42/session:1", content="tangerine falcon", subject="u42")
    gone = record(tenant, chat, scope="user:43/session:1", content="other notes", subject="u43")
    first, second = forget(tenant, [leaked], "soft"), forget(tenant, [gone], "hard")
    # A path that forgot the guard's rules put the record back (what confirmation exists to catch).
    Record.objects.filter(pk=leaked.pk).update(forgotten_at=None)

    together = erasures_confirm(tenant=tenant, events=[first, second])

    assert [r.erased for r in together] == [False, True]
    gaps = together[0].gaps
    assert {"record_id": leaked.pk, "path": "read_by_id", "gap": "visible"} in gaps
    assert [g for g in gaps if g["path"] == "scope_listing"] == [
        {"record_id": leaked.pk, "path": "scope_listing", "scope": "user:42/session:1", "gap": "visible"}]
    assert {"record_id": leaked.pk, "path": "keyword_search", "gap": "visible"} in gaps
    assert_each_as_alone(tenant, [first, second], together)


def test_a_leak_in_a_scope_two_forgets_share_is_a_gap_of_the_forget_that_named_the_record_only(tenant, chat):
    leaked = record(tenant, chat, scope="user:42/session:1", content="a draft", subject="u42")
    neighbour = record(tenant, chat, scope="user:42/session:1", content="a letter", subject="u42")
    first, second = forget(tenant, [leaked], "soft"), forget(tenant, [neighbour], "hard")
    Record.objects.filter(pk=leaked.pk).update(forgotten_at=None)

    together = erasures_confirm(tenant=tenant, events=[first, second])

    assert [g["scope"] for g in together[0].gaps if g["path"] == "scope_listing"] == ["user:42/session:1"]
    assert together[1].erased is True and together[1].gaps == []
    assert ForgetEvent.objects.get(pk=second.pk).confirmed_at is not None
