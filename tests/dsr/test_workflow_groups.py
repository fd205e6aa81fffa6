"""The workflow's steps run for a group of requests at once (dsr/services/workflow.py): each request still
gets its own forgets, tombstones, receipts and notice; a request another transaction holds is skipped; a
crash rolls the group's step back; one request's failure does not spoil the others."""
import json
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.errors import ApplicationError
from dsr.models import ItemOutcome, RequestItem, RequestStatus, RetentionConflict, SubjectNotice, SubjectRequest
from dsr.services import notify, workflow
from memory import errors as memory_errors
from memory.models import DerivedArtifact, ForgetEvent, Lineage, Record
from memory.selectors import records_search, records_similar
from memory.services import records_refusals
from retention.services import hold_place
from tests.conftest import other_connection
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tombstones.models import Tombstone, TombstoneSalts
from tombstones.services import tombstone_verify
from tombstones.verification import GENUINE

SUBJECTS = ("subject-7", "subject-8", "subject-9")


def started_requests(subjects=SUBJECTS) -> list[tuple]:
    """One verified erasure request per subject (each with the issue's scenario), all started."""
    made = []
    for subject in subjects:
        scenario = erasure_scenario(subject=subject)
        request = verified_request(scenario, subject=subject)
        workflow.workflow_start(request=request, actor="operator:test")  # its message is not sent: no commit
        made.append((scenario, request))
    return made


def assert_done_on_its_own(scenario, request: SubjectRequest, mailoutbox) -> None:
    """The request's own forgets (one per decision), tombstones, conflicts, receipts and notice."""
    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED and request.notified_at is not None
    items = RequestItem.objects.filter(request=request, kind="record")
    assert not items.filter(outcome=ItemOutcome.PENDING).exists()
    events = ForgetEvent.objects.filter(actor=f"request:{request.pk}")
    assert events.count() == 2  # erase and hide, never repeated
    covered = sorted(pk for e in events for pk in e.outcomes["hidden"] + e.outcomes["redacted"] + e.outcomes["deleted"])
    assert covered == sorted(items.values_list("object_id", flat=True))
    assert sorted(r.pk for r in scenario.free + [scenario.under_rule, scenario.under_hold]) == covered
    tombstones = {str(t) for t in items.values_list("tombstone_id", flat=True)}
    assert tombstones == {str(e.public_id) for e in events}
    assert Tombstone.objects.filter(id__in=tombstones).count() == 2
    assert sorted(RetentionConflict.objects.filter(request=request).values_list("record_id", flat=True)) == \
        sorted([scenario.under_rule.pk, scenario.under_hold.pk])
    (notice,) = SubjectNotice.objects.filter(request=request)
    assert sorted(r["tombstone_id"] for r in notice.receipt["receipts"]) == sorted(tombstones)
    for receipt in notice.receipt["receipts"]:
        assert tombstone_verify(document=receipt).code == GENUINE
    mail = [m for m in mailoutbox if f"request {request.pk}," in m.body][0]
    mailed = json.loads(mail.attachments[0][1])
    for record in scenario.free:  # the subject's salts, in the receipt mailed, prove their own content is covered
        receipt = next(r for r in mailed["receipts"] if str(record.pk) in r["salts"])
        report = tombstone_verify(document=receipt, content=record.content, salt=receipt["salts"][str(record.pk)])
        assert report.coverage.covered
    # and we kept no copy of them: neither in the notice nor beside the tombstones
    assert all("salts" not in r for r in notice.receipt["receipts"])
    assert not TombstoneSalts.objects.filter(tombstone_id__in=tombstones).exists()
    assert mail.to == ["subject@example.org"]
    assert list(request.history.values_list("action", flat=True)) == [
        "workflow_started", "plan", "evaluate", "executed", "confirm", "subject_notified"]
    assert not Record.objects.filter(subject__ref=scenario.free[0].subject.ref, forgotten_at__isnull=True).exists()


@pytest.mark.django_db
def test_one_delivery_carries_a_group_through_every_step_each_request_on_its_own(mailoutbox):
    made = started_requests()
    first = made[0][1]

    assert run_to_end(first.pk) == ["plan", "execute", "confirm", "notify"]

    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)
    assert len(mailoutbox) == 3
    # The other requests' own messages come later: each finds its work done, in one query, and stops.
    for _, request in made[1:]:
        with CaptureQueriesContext(connection) as queries:
            assert workflow.step_plan(request_id=request.pk) == workflow.StepResult(False, None)
        # one plain read: no transaction (no SAVEPOINT here), no lock
        assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT"]
        assert "FOR UPDATE" not in queries.captured_queries[0]["sql"]
    assert len(mailoutbox) == 3


@pytest.mark.django_db
def test_a_group_costs_less_per_request_than_requests_run_alone(mailoutbox, settings, monkeypatch):
    """What grouping is for: the plan, the decisions, the confirmation, the receipts' checkpoint and the
    bookkeeping are shared; what each request adds is mostly its own two forgets."""
    alone, grouped = [], []
    made = started_requests(("subject-1", "subject-2", "subject-3", "subject-4", "subject-5"))
    monkeypatch.setattr(workflow, "GROUP_SIZE", 1)
    for _, request in made[:2]:
        with CaptureQueriesContext(connection) as queries:
            run_to_end(request.pk)
        alone.append(len(queries))
    monkeypatch.setattr(workflow, "GROUP_SIZE", 50)
    with CaptureQueriesContext(connection) as queries:
        run_to_end(made[2][1].pk)
    grouped = len(queries)

    assert all(SubjectRequest.objects.get(pk=r.pk).notified_at for _, r in made)
    per_request = grouped / 3
    assert per_request < 0.7 * alone[1], (alone, grouped)


@pytest.mark.django_db
def test_requests_that_nobody_started_are_not_planned_by_a_group(mailoutbox):
    (_, started), = started_requests(("subject-7",))
    unstarted = verified_request(erasure_scenario(subject="subject-8"), subject="subject-8")

    run_to_end(started.pk)

    unstarted.refresh_from_db()
    assert unstarted.status == RequestStatus.VERIFIED and not RequestItem.objects.filter(request=unstarted).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a second session holding a row lock (SKIP LOCKED)")
@pytest.mark.django_db(transaction=True)
def test_a_request_another_transaction_holds_is_skipped_and_left_to_it(mailoutbox):
    made = started_requests()
    (_, first), (_, held), (_, third) = made
    with other_connection() as other:
        other.execute("SELECT id FROM dsr_subjectrequest WHERE id = %s FOR UPDATE", [held.pk])  # another worker's

        with connection.cursor() as cursor:  # a claim that waited for the held row fails here instead of hanging
            cursor.execute("SET lock_timeout = '5s'")
        try:
            workflow.step_plan(request_id=first.pk)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")

        statuses = dict(SubjectRequest.objects.values_list("pk", "status"))
        assert (statuses[first.pk], statuses[held.pk], statuses[third.pk]) == (
            RequestStatus.EXECUTING, RequestStatus.VERIFIED, RequestStatus.EXECUTING)
        assert not RequestItem.objects.filter(request=held).exists()
        other.rollback()

    run_to_end(held.pk)  # its own message: then it runs, and the others' remaining steps with it
    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)


@pytest.mark.django_db
def test_a_crash_mid_group_rolls_the_groups_step_back_and_a_rerun_completes_it(mailoutbox, monkeypatch):
    made = started_requests()
    first = made[0][1]
    workflow.step_plan(request_id=first.pk)
    calls = []
    real_forget = workflow.records_forget_many

    def dies_after_the_forgets(**kwargs):
        calls.append([order.actor for order in kwargs["orders"]])
        real_forget(**kwargs)  # the group's forgets are written (events, tombstones, deletes), then:
        raise RuntimeError("worker lost its database in the middle of the group")

    monkeypatch.setattr(workflow, "records_forget_many", dies_after_the_forgets)
    with pytest.raises(RuntimeError):
        workflow.step_execute(request_id=first.pk)

    assert len(calls) == 1 and calls[0][:2] == [f"request:{first.pk}"] * 2 and len(calls[0]) == 2 * len(made)
    assert not ForgetEvent.objects.exists() and not Tombstone.objects.exists()
    assert not RequestItem.objects.exclude(outcome=ItemOutcome.PENDING).filter(kind="record").exists()
    assert not SubjectRequest.objects.filter(executed_at__isnull=False).exists()
    monkeypatch.setattr(workflow, "records_forget_many", real_forget)

    run_to_end(first.pk)

    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)


@pytest.mark.django_db
def test_a_request_whose_forget_fails_is_left_due_and_the_others_commit(mailoutbox, monkeypatch):
    made = started_requests()
    (_, first), (_, failing), (_, third) = made
    workflow.step_plan(request_id=first.pk)
    real_forget = workflow.records_forget_many
    calls = []

    def refuses_one_request(**kwargs):
        calls.append(len(kwargs["orders"]))
        if any(order.actor == f"request:{failing.pk}" for order in kwargs["orders"]):
            raise memory_errors.conflict("concurrent_change", "The records' locks kept changing during the forget.")
        return real_forget(**kwargs)

    monkeypatch.setattr(workflow, "records_forget_many", refuses_one_request)
    assert workflow.step_execute(request_id=first.pk).next_step == workflow.CONFIRM
    with pytest.raises(ApplicationError) as raised:  # its own delivery says why, as before grouping
        workflow.step_execute(request_id=failing.pk)
    assert raised.value.code == "concurrent_change"

    executed = set(SubjectRequest.objects.filter(executed_at__isnull=False).values_list("pk", flat=True))
    assert executed == {first.pk, third.pk}
    assert not ForgetEvent.objects.filter(actor=f"request:{failing.pk}").exists()
    assert not RequestItem.objects.filter(request=failing).exclude(outcome=ItemOutcome.PENDING).filter(
        kind="record").exists()
    # The group's one call failed as a whole; then each request was forgotten on its own.
    assert calls[:4] == [6, 2, 2, 2]
    monkeypatch.setattr(workflow, "records_forget_many", real_forget)

    run_to_end(failing.pk)

    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)


@pytest.mark.django_db
def test_a_record_refused_in_one_request_is_decided_again_without_holding_back_the_others(mailoutbox):
    made = started_requests()
    (_, first), (scenario, refused), (_, third) = made
    workflow.step_plan(request_id=first.pk)
    # A hold placed between evaluation and execution: that request's erase of the record is refused.
    hold_place(tenant=scenario.tenant, matter="Roe v. Acme", authority="court order 26-cv-9",
               record_ids=[scenario.free[1].pk], actor="legal")

    assert workflow.step_execute(request_id=first.pk).next_step == workflow.CONFIRM

    executed = set(SubjectRequest.objects.filter(executed_at__isnull=False).values_list("pk", flat=True))
    assert executed == {first.pk, third.pk}
    item = RequestItem.objects.get(request=refused, kind="record", object_id=scenario.free[1].pk)
    assert (item.decision, item.outcome, item.reason["code"]) == ("", ItemOutcome.PENDING, "legal_hold")

    run_to_end(refused.pk)

    refused.refresh_from_db()
    assert refused.status == RequestStatus.PARTIALLY_COMPLETED and refused.notified_at is not None
    item.refresh_from_db()
    assert (item.decision, item.outcome) == ("hide", ItemOutcome.HIDDEN)
    assert RetentionConflict.objects.filter(request=refused).count() == 3
    assert Record.objects.get(pk=scenario.free[1].pk).content  # held: kept, hidden
    for scenario_, request in (made[0], made[2]):
        assert_done_on_its_own(scenario_, request, mailoutbox)


@pytest.mark.django_db
def test_a_mail_refused_for_one_request_leaves_it_unnotified_and_the_others_sent(mailoutbox, monkeypatch):
    made = started_requests()
    (_, first), (_, refused), (_, third) = made
    for step in (workflow.step_plan, workflow.step_execute, workflow.step_confirm):
        step(request_id=first.pk)
    real_send = notify._send

    def smtp_refuses(request, notice):
        if request.pk == refused.pk:
            import smtplib
            raise smtplib.SMTPRecipientsRefused({notice.to: (550, b"mailbox unavailable")})
        return real_send(request, notice)

    monkeypatch.setattr(notify, "_send", smtp_refuses)
    notify.step_notify(request_id=first.pk)

    notified = set(SubjectRequest.objects.filter(notified_at__isnull=False).values_list("pk", flat=True))
    assert notified == {first.pk, third.pk}
    assert not SubjectNotice.objects.filter(request=refused).exists()  # rolled back with its savepoint
    assert len(mailoutbox) == 2
    monkeypatch.setattr(notify, "_send", real_send)

    notify.step_notify(request_id=refused.pk)

    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)
    assert len(mailoutbox) == 3


@pytest.mark.django_db
def test_a_groups_execute_forgets_at_most_one_batch_of_records_and_leaves_the_rest_due(mailoutbox, monkeypatch):
    """Five records per request, batches of eight: the own request's five, and no one else's (ten would
    not fit); the others are done by the deliveries that follow, each exactly once."""
    made = started_requests()
    (_, first), (_, second), (_, third) = made
    workflow.step_plan(request_id=first.pk)
    monkeypatch.setattr(workflow, "EXECUTE_BATCH", 8)

    assert workflow.step_execute(request_id=first.pk).next_step == workflow.CONFIRM

    assert set(SubjectRequest.objects.filter(executed_at__isnull=False).values_list("pk", flat=True)) == {first.pk}
    assert not ForgetEvent.objects.exclude(actor=f"request:{first.pk}").exists()
    workflow.step_execute(request_id=second.pk)
    assert set(SubjectRequest.objects.filter(executed_at__isnull=False).values_list("pk", flat=True)) == {
        first.pk, second.pk}
    run_to_end(third.pk)
    for scenario, request in made:
        assert_done_on_its_own(scenario, request, mailoutbox)


def _put_back(model, pk: int, **changes) -> dict:
    """A row a forget removed, written back as it was (what a path that forgot the guard would do)."""
    row = model.objects.filter(pk=pk).values()[0]
    return lambda: model.objects.create(**{**row, **changes})


def _leaks(scenario) -> dict:
    """Per read path, a leftover of one subject that only that path shows (with the paths that share its final
    step or its copy): {name: (a function that leaves it, run after the execute step; the paths that must
    report it)}."""
    free, summary = scenario.free[0], scenario.summary_id
    embedding = DerivedArtifact.objects.filter(kind="embedding", lineage__source=free).values_list("pk", flat=True)[0]
    row, vector = _put_back(Record, free.pk), _put_back(DerivedArtifact, embedding)
    link = Lineage.objects.filter(artifact_id=embedding).values("source_id", "artifact_id")[0]
    kept = DerivedArtifact.objects.filter(kind="embedding", lineage__source=scenario.under_rule).values_list(
        "pk", flat=True)[0]
    kept_vector, kept_link = _put_back(DerivedArtifact, kept), {"source_id": scenario.under_rule.pk, "artifact_id": kept}

    def visible_again():
        row(), vector(), Lineage.objects.create(**link)

    def vector_kept():  # the kept (hidden) record's embedding, back in the similarity index
        kept_vector(), Lineage.objects.create(**kept_link)

    return {
        "read_by_id, scope listing, keyword and similarity search": (
            visible_again, {"storage", "read_by_id", "scope_listing", "keyword_search", "similarity_search",
                            "similarity_index", "derivatives"}),  # its embedding is back too
        "storage": (_put_back(Record, free.pk, forgotten_at=free.created_at), {"storage"}),
        "similarity index": (vector_kept, {"similarity_index", "derivatives"}),
        "derivatives": (_put_back(DerivedArtifact, summary), {"derivatives"}),
    }


@pytest.mark.parametrize("path", ["read_by_id, scope listing, keyword and similarity search", "storage",
                                  "similarity index", "derivatives"])
@pytest.mark.django_db
def test_a_leftover_in_one_read_path_of_one_subject_of_a_group_keeps_that_request_open(mailoutbox, path):
    """The group's confirmation probes every read path for all its requests at once: what one subject has left
    in any one path is still found, named, and keeps that request (only) from being completed."""
    made = started_requests()
    (_, first), (leaky_scenario, leaky), (_, third) = made
    leak, paths = _leaks(leaky_scenario)[path]
    assert workflow.step_plan(request_id=first.pk).next_step == workflow.EXECUTE
    assert workflow.step_execute(request_id=first.pk).next_step == workflow.CONFIRM
    leak()

    workflow.step_confirm(request_id=first.pk)

    statuses = dict(SubjectRequest.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[leaky.pk], statuses[third.pk]) == (
        RequestStatus.PARTIALLY_COMPLETED, RequestStatus.EXECUTING, RequestStatus.PARTIALLY_COMPLETED)
    gaps = SubjectRequest.objects.get(pk=leaky.pk).gaps
    assert {gap["path"] for gap in gaps if "path" in gap} == paths, gaps
    if "keyword_search" in paths:  # what the single searches, record by record, find too
        content = leaky_scenario.free[0].content
        assert records_search(tenant=leaky.tenant, q=content, limit=1, within_ids=[leaky_scenario.free[0].pk])
        assert records_similar(tenant=leaky.tenant, q=content, limit=1, within_ids=[leaky_scenario.free[0].pk])


@pytest.mark.django_db
def test_a_groups_decisions_are_stored_with_each_records_own_reason_and_deferral(mailoutbox):
    made = started_requests()

    workflow.step_plan(request_id=made[0][1].pk)

    for scenario, request in made:
        items = {i.object_id: i for i in RequestItem.objects.filter(request=request, kind="record")}
        locks = {r.pk: r for r in Record.objects.filter(pk__in=[scenario.under_rule.pk, scenario.under_hold.pk])}
        assert {pk: (i.decision, i.reason, i.deferred_until) for pk, i in items.items() if pk not in locks} == {
            r.pk: ("erase", None, None) for r in scenario.free}
        rule, hold = items[scenario.under_rule.pk], items[scenario.under_hold.pk]
        assert (rule.decision, rule.reason["code"], rule.reason["authority"]) == ("hide", "retention_lock",
                                                                                 "SEC 17a-4(f)")
        assert rule.deferred_until == locks[scenario.under_rule.pk].retained_until
        assert (hold.decision, hold.reason["code"], hold.deferred_until) == ("hide", "legal_hold", None)
        refused = records_refusals(tenant=request.tenant, record_ids=sorted(locks), mode="redact")
        assert (rule.reason, hold.reason) == (refused[rule.object_id], refused[hold.object_id])


@pytest.mark.django_db
@pytest.mark.parametrize("type", ["erasure", "access"])
def test_a_groups_steps_read_nothing_of_the_requests_they_claim_that_the_claim_did_not_load(type, mailoutbox,
                                                                                            monkeypatch):
    """The claim loads only some columns of the other requests (`_PEER_FIELDS`): a step that read another one
    would load it with a query per request."""
    made = []
    for subject in SUBJECTS:
        request = verified_request(erasure_scenario(subject=subject), subject=subject, type=type)
        workflow.workflow_start(request=request, actor="operator:test")
        made.append(request)
    original = SubjectRequest.refresh_from_db

    def refresh(self, *args, fields=None, **kwargs):
        assert fields is None, f"a deferred load of {fields} for request {self.pk}"
        return original(self, *args, fields=fields, **kwargs)

    monkeypatch.setattr(SubjectRequest, "refresh_from_db", refresh)
    if type == "access":  # an access request's plan (its export) runs alone; then the notify step for the group
        for request in made:
            assert workflow.step_plan(request_id=request.pk).next_step == workflow.NOTIFY
    run_to_end(made[0].pk)

    assert len(mailoutbox) == 3
    assert not SubjectRequest.objects.filter(pk__in=[r.pk for r in made], notified_at__isnull=True).exists()


@pytest.mark.django_db
def test_two_requests_of_one_subject_in_one_group_each_run_to_their_end(mailoutbox):
    # Given the same subject's erasure asked twice (two channels), both verified and started together
    scenario = erasure_scenario()
    first, second = verified_request(scenario), verified_request(scenario)
    workflow.workflows_start(requests=[first, second], actor="operator:test")

    # When the first one's delivery carries the group, and then the second's own delivery comes
    run_to_end(first.pk)
    run_to_end(second.pk)

    # Then each request ran to its end with forgets of its own: the first erased what could go and hid the
    # locked; the second found the erased records gone and hid the locked ones again, with its own tombstone
    for request in (first, second):
        request.refresh_from_db()
        assert request.status == RequestStatus.PARTIALLY_COMPLETED and request.notified_at is not None
        assert not RequestItem.objects.filter(request=request, outcome=ItemOutcome.PENDING).exists()
        assert sorted(RetentionConflict.objects.filter(request=request).values_list("record_id", flat=True)) == \
            sorted([scenario.under_rule.pk, scenario.under_hold.pk])
    free = [r.pk for r in scenario.free]
    assert not Record.objects.filter(pk__in=free).exists()
    # Nothing locked was destroyed by either request: the ruled and the held record keep their rows and content
    kept_records = Record.objects.filter(pk__in=[scenario.under_rule.pk, scenario.under_hold.pk])
    assert [(r.content != "", r.forgotten_at is not None) for r in kept_records] == [(True, True), (True, True)]
    outcomes = dict(RequestItem.objects.filter(request=second, kind="record", object_id__in=free)
                    .values_list("object_id", "outcome"))
    assert set(outcomes.values()) == {ItemOutcome.GONE}
    kept = RequestItem.objects.filter(request=second, kind="record", object_id=scenario.under_hold.pk).get()
    assert kept.outcome == ItemOutcome.HIDDEN and kept.tombstone_id is not None
    assert len(mailoutbox) == 2
