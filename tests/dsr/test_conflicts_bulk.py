"""One decision over a selection of retention conflicts (dsr.services.conflicts.decide_conflicts): each
conflict is decided on its own, through the single decision's service, and the selection is all or nothing:
one conflict that cannot take the decision and none is decided, the refusal naming each one and why."""
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from config.errors import ApplicationError
from dsr.models import ConflictStatus, RequestTransition, RetentionConflict
from dsr.services import conflicts as conflicts_service
from dsr.services.conflicts import MAX_SELECTION, conflict_uphold, decide_conflicts, override_refusal
from memory.models import Record
from tests.admin.conftest import conflicts_make
from tests.conftest import APP_ROLE

WHY = "Counsel reviewed the whole batch on 5 December."


def _state(c) -> dict:
    """What a decision changes: each conflict's status and decider, the records, the decisions' history."""
    return {
        "conflicts": sorted(RetentionConflict.objects.values_list("pk", "status", "decided_by", "justification")),
        "records": sorted(Record.objects.filter(tenant=c.tenant).values_list("pk", "content")),
        "history": RequestTransition.objects.filter(action__startswith="conflict_").count(),
    }


def _refused(call) -> ApplicationError:
    with pytest.raises(ApplicationError) as refused:
        call()
    return refused.value


@pytest.mark.django_db(transaction=True)
def test_an_override_over_a_selection_with_locked_records_decides_nothing_and_names_each(as_app_role, mailoutbox):
    # Given, as the application role: three conflicts, one overridable (governance rule), one under a
    # compliance rule, one under an active hold.
    c = conflicts_make()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (APP_ROLE,)
    before = _state(c)

    # When legal overrides all three at once,
    refusal = _refused(lambda: decide_conflicts(conflict_ids=[c.governance.pk, c.compliance.pk, c.hold.pk],
                                                decision="override", actor="legal:alice", justification=WHY))

    # then nothing is decided, and the refusal says which ones and why.
    assert refusal.code == "selection_refused" and refusal.status_code == 409
    assert {(r["conflict_id"], r["code"]) for r in refusal.extra["refused"]} == {
        (c.compliance.pk, "compliance_lock"), (c.hold.pk, "legal_hold")}
    assert f"Conflict {c.compliance.pk}: Compliance-mode rules keep this record" in refusal.detail
    assert _state(c) == before
    assert Record.objects.filter(pk=c.records["governance"].pk).exists()

    # The overridable one alone goes through, as the application role (the lock ends for that record only).
    decided = decide_conflicts(conflict_ids=[c.governance.pk], decision="override", actor="legal:alice",
                               justification=WHY)
    assert [x.status for x in decided] == [ConflictStatus.OVERRIDDEN]
    assert not Record.objects.filter(pk=c.records["governance"].pk).exists()


@pytest.mark.django_db
def test_an_uphold_over_a_selection_records_each_conflict_on_its_own_with_the_justification(mailoutbox):
    c = conflicts_make()
    ids = [c.governance.pk, c.compliance.pk, c.hold.pk]
    sent_before = len(mailoutbox)

    decided = decide_conflicts(conflict_ids=ids, decision="uphold", actor="legal:bob", justification=f"  {WHY} ")

    assert sorted(x.pk for x in decided) == sorted(ids)
    assert {(x.status, x.justification) for x in decided} == {(ConflictStatus.UPHELD, WHY)}  # answered as stored
    stored = RetentionConflict.objects.filter(pk__in=ids)
    assert {(x.status, x.decided_by, x.justification) for x in stored} == {(ConflictStatus.UPHELD, "legal:bob", WHY)}
    assert all(x.decided_at is not None for x in stored)
    history = RequestTransition.objects.filter(request=c.request, action="conflict_upheld", actor="legal:bob")
    assert sorted(h.note.split(" ")[1] for h in history) == sorted(str(x.record_id) for x in stored)
    assert all(h.note.endswith(WHY) for h in history)
    # Each subject notice is its own, as a single uphold sends it.
    assert len(mailoutbox) - sent_before == 3 and all(WHY in m.body for m in mailoutbox[sent_before:])
    assert c.request.notices.filter(kind__startswith="conflict-").count() == 3


@pytest.mark.django_db
def test_a_conflict_decided_already_refuses_the_whole_selection(mailoutbox):
    c = conflicts_make()
    conflict_uphold(conflict=c.compliance, actor="legal:bob", justification="kept")
    before = _state(c)

    refusal = _refused(lambda: decide_conflicts(conflict_ids=[c.hold.pk, c.compliance.pk, c.governance.pk],
                                                decision="defer", actor="legal:alice", justification=WHY,
                                                until=timezone.now().date() + timedelta(days=10)))

    assert refusal.code == "selection_refused"
    assert [(r["conflict_id"], r["code"]) for r in refusal.extra["refused"]] == [(c.compliance.pk, "conflict_decided")]
    assert _state(c) == before


@pytest.mark.django_db
def test_a_refusal_met_while_deciding_undoes_the_decisions_already_made(mailoutbox, monkeypatch):
    # A hold placed between the check and the act (a race) is refused by the override itself: the checks are
    # skipped here to stand for that, and the override decided before it must be undone.
    c = conflicts_make()
    assert c.governance.pk < c.compliance.pk  # the governance one is decided first
    before = _state(c)
    monkeypatch.setattr(conflicts_service, "_selection_refusals", lambda conflicts, ids, decision: [])

    refusal = _refused(lambda: decide_conflicts(conflict_ids=[c.governance.pk, c.compliance.pk],
                                                decision="override", actor="legal:alice", justification=WHY))

    assert refusal.code == "selection_refused"
    assert [(r["conflict_id"], r["code"]) for r in refusal.extra["refused"]] == [(c.compliance.pk, "compliance_lock")]
    assert _state(c) == before


@pytest.mark.django_db
def test_the_selection_is_capped_and_checked_before_anything_is_decided(mailoutbox):
    c = conflicts_make()
    before = _state(c)
    too_many = [c.governance.pk] + list(range(10**9, 10**9 + MAX_SELECTION))
    assert _refused(lambda: decide_conflicts(conflict_ids=too_many, decision="uphold", actor="legal",
                                             justification=WHY)).code == "selection_too_large"
    # Exactly the cap is accepted as a selection: the unknown ids are then what it refuses.
    at_cap = _refused(lambda: decide_conflicts(conflict_ids=too_many[:MAX_SELECTION], decision="uphold",
                                               actor="legal", justification=WHY))
    assert at_cap.code == "selection_refused" and len(at_cap.extra["refused"]) == MAX_SELECTION - 1
    assert {r["code"] for r in at_cap.extra["refused"]} == {"not_found"}
    for bad, code in [([], "invalid_selection"), (["1"], "invalid_selection"), ([True], "invalid_selection"),
                      ([-1], "invalid_selection"), ([2**63], "invalid_selection"), (c.hold.pk, "invalid_selection")]:
        assert _refused(lambda: decide_conflicts(conflict_ids=bad, decision="uphold", actor="legal",
                                                 justification=WHY)).code == code, bad
    ids = [c.hold.pk, c.governance.pk]
    for kwargs, code in [({"decision": "erase"}, "invalid_decision"),
                         ({"decision": "uphold", "justification": "  "}, "justification_required"),
                         ({"decision": "defer"}, "invalid_date"),
                         ({"decision": "defer", "until": timezone.now().date()}, "invalid_date")]:
        assert _refused(lambda: decide_conflicts(conflict_ids=ids, actor="legal", **{"justification": WHY, **kwargs})
                        ).code == code, kwargs
    assert _state(c) == before


@pytest.mark.django_db
def test_override_refusal_is_the_refusal_the_override_meets(mailoutbox):
    c = conflicts_make()
    assert override_refusal(c.governance) is None
    for conflict, code in [(c.compliance, "compliance_lock"), (c.hold, "legal_hold")]:
        said = override_refusal(conflict)
        met = _refused(lambda: conflicts_service.conflict_override(conflict=conflict, actor="legal",
                                                                   justification=WHY))
        assert (said.code, said.detail) == (met.code, met.detail) == (code, met.detail)


SQLITE_RUN = r"""
import json
from config.errors import ApplicationError
from dsr.models import RetentionConflict
from dsr.selectors import hold_waiting
from dsr.services.conflicts import decide_conflicts
from retention.models import LegalHold
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request

scenario = erasure_scenario()
request = verified_request(scenario)
run_to_end(request.pk)
ids = sorted(RetentionConflict.objects.filter(request=request).values_list("pk", flat=True))
waiting = hold_waiting(LegalHold.objects.get())
try:
    decide_conflicts(conflict_ids=ids, decision="override", actor="legal", justification="why")
    refused = None
except ApplicationError as exc:
    refused = [exc.code, sorted(r["code"] for r in exc.extra["refused"])]
after_refusal = sorted(RetentionConflict.objects.values_list("status", flat=True))
upheld = [c.status for c in decide_conflicts(conflict_ids=ids, decision="uphold", actor="legal", justification="why")]
print(json.dumps({"waiting": [[c.record_id for c in waiting.conflicts], [r.pk for r in waiting.requests]],
                  "hold_record": scenario.under_hold.pk, "request": request.pk, "refused": refused,
                  "after_refusal": after_refusal, "upheld": upheld}))
"""


def test_the_bulk_decision_and_the_holds_wait_list_on_sqlite(sqlite_migrated):
    # The embedded default: hold_waiting reads the conflicts' JSON in Python, as on PostgreSQL.
    from tests.dsr.test_workflow_sqlite import LOCMEM_MAIL
    from tests.sqlite_service import manage_script, sqlite_env

    found = manage_script(SQLITE_RUN, env=sqlite_env(sqlite_migrated, EMAIL_BACKEND=LOCMEM_MAIL))

    assert found["waiting"] == [[found["hold_record"]], [found["request"]]]
    assert found["refused"] == ["selection_refused", ["compliance_lock", "legal_hold"]]
    assert found["after_refusal"] == ["open", "open"]
    assert found["upheld"] == ["upheld", "upheld"]
