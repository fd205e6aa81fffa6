"""The request state machine (dsr/services/states.py): only the table's moves happen, an illegal move is an
error that changes nothing, a move made from a stale status loses, and every move leaves a history row with
who made it."""
import threading
from itertools import product

import pytest
from django.db import connection
from django.db.transaction import TransactionManagementError

from config.errors import ApplicationError
from dsr.models import RequestStatus, RequestTransition, SubjectRequest
from dsr.services import (request_close, request_create, request_extend, request_refuse, request_reject_identity,
                          request_transition, request_verify_identity)
from dsr.services.states import ALLOWED, OPEN

STATUSES = list(RequestStatus.values)
ILLEGAL = [(a, b) for a, b in product(STATUSES, STATUSES) if b not in ALLOWED[a]]
LEGAL = [(a, b) for a in STATUSES for b in sorted(ALLOWED[a])]


def new_request(tenant, **kw) -> SubjectRequest:
    fields = {"subject_ref": "s-1", "type": "erasure", "regulation": "gdpr", "channel": "api", "actor": "test",
              "contact_email": "subject@example.org", **kw}
    return request_create(tenant=tenant, **fields)


def put_in(request: SubjectRequest, status: str) -> SubjectRequest:
    """Place the request in `status` directly (the arrange step of a table test), bypassing the machine."""
    SubjectRequest.objects.filter(pk=request.pk).update(status=status)
    request.refresh_from_db()
    return request


def stored(request: SubjectRequest):
    return (SubjectRequest.objects.get(pk=request.pk).status,
            list(RequestTransition.objects.filter(request=request).values_list("pk", flat=True)))


def test_the_table_covers_every_status_and_closed_is_terminal():
    assert set(ALLOWED) == set(STATUSES)
    assert all(targets <= set(STATUSES) for targets in ALLOWED.values())
    assert ALLOWED[RequestStatus.CLOSED] == set()
    assert OPEN == set(STATUSES) - {RequestStatus.COMPLETED, RequestStatus.REFUSED, RequestStatus.CLOSED}


@pytest.mark.parametrize("from_status,to_status", ILLEGAL)
def test_illegal_move_raises_and_changes_nothing(tenant, from_status, to_status):
    request = put_in(new_request(tenant), from_status)
    before = stored(request)

    with pytest.raises(ApplicationError) as refused:
        request_transition(request=request, to=to_status, actor="operator:ann")

    assert (refused.value.code, refused.value.status_code) == ("illegal_transition", 409)
    assert refused.value.extra == {"from_status": from_status, "to_status": to_status}
    assert stored(request) == before


@pytest.mark.parametrize("from_status,to_status", LEGAL)
def test_allowed_move_is_made_and_recorded_with_its_actor(tenant, from_status, to_status):
    request = put_in(new_request(tenant), from_status)

    moved = request_transition(request=request, to=to_status, actor="operator:ann", note="why")

    assert SubjectRequest.objects.get(pk=request.pk).status == to_status == moved.status
    row = RequestTransition.objects.filter(request=request).latest("pk")
    assert (row.from_status, row.to_status, row.actor, row.action, row.note) == (
        from_status, to_status, "operator:ann", f"move_{to_status}", "why")


def test_move_from_a_stale_status_raises_concurrent_transition(tenant):
    request = new_request(tenant)
    mine, theirs = SubjectRequest.objects.get(pk=request.pk), SubjectRequest.objects.get(pk=request.pk)
    request_verify_identity(request=theirs, actor="operator:bob", method="passport")
    before = stored(request)

    with pytest.raises(ApplicationError) as refused:
        request_transition(request=mine, to=RequestStatus.CLOSED, actor="operator:ann")

    assert (refused.value.code, refused.value.status_code) == ("concurrent_transition", 409)
    assert stored(request) == before
    assert SubjectRequest.objects.get(pk=request.pk).status == RequestStatus.VERIFIED


@pytest.mark.django_db(transaction=True)
def test_two_operators_verifying_at_once_make_one_move(tenant):
    request = new_request(tenant)
    copies = [SubjectRequest.objects.get(pk=request.pk) for _ in range(2)]
    barrier, outcomes = threading.Barrier(2), []

    def verify(copy, who):
        try:
            barrier.wait(timeout=10)
            request_verify_identity(request=copy, actor=who, method="passport")
            outcomes.append("moved")
        except ApplicationError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=verify, args=(c, f"operator:{i}")) for i, c in enumerate(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["concurrent_transition", "moved"]
    assert RequestTransition.objects.filter(request=request, action="verify_identity").count() == 1
    assert SubjectRequest.objects.get(pk=request.pk).status == RequestStatus.VERIFIED


def test_receipt_and_verification_are_recorded_with_who_how_and_when(tenant):
    request = new_request(tenant, actor="token:abc:operator")
    request = request_verify_identity(request=request, actor="token:def:operator", method="video call")

    assert (request.identity_verified_by, request.identity_method) == ("token:def:operator", "video call")
    assert request.identity_verified_at is not None
    rows = list(RequestTransition.objects.filter(request=request).values_list("action", "from_status", "to_status",
                                                                              "actor", "note"))
    assert rows[0][:4] == ("received", "", "received", "token:abc:operator")
    assert rows[1] == ("verify_identity", "received", "verified", "token:def:operator", "video call")


def test_verifying_twice_is_an_illegal_move(tenant):
    request = request_verify_identity(request=new_request(tenant), actor="op", method="passport")
    before = stored(request)
    with pytest.raises(ApplicationError) as refused:
        request_verify_identity(request=request, actor="op", method="passport")
    assert refused.value.code == "illegal_transition"
    assert stored(request) == before


def test_rejected_identity_closes_with_the_reason_and_only_before_verification(tenant):
    rejected = request_reject_identity(request=new_request(tenant), actor="op", reason="documents forged")
    assert (rejected.status, rejected.closing_reason) == (RequestStatus.CLOSED, "documents forged")
    assert rejected.identity_verified_at is None

    verified = request_verify_identity(request=new_request(tenant, subject_ref="s-2"), actor="op", method="id")
    with pytest.raises(ApplicationError) as refused:
        request_reject_identity(request=verified, actor="op", reason="changed my mind")
    assert refused.value.code == "illegal_transition"
    assert SubjectRequest.objects.get(pk=verified.pk).status == RequestStatus.VERIFIED


def test_refuse_then_close_keeps_the_refusal_reason(tenant):
    request = request_refuse(request=new_request(tenant), actor="legal:lee", reason="manifestly unfounded")
    request = request_close(request=request, actor="op")
    assert (request.status, request.closing_reason) == (RequestStatus.CLOSED, "manifestly unfounded")
    assert list(RequestTransition.objects.filter(request=request).values_list("action", flat=True)) == [
        "received", "refuse", "close"]


def test_closing_an_unfinished_request_needs_a_reason(tenant):
    request = new_request(tenant)
    with pytest.raises(ApplicationError) as refused:
        request_close(request=request, actor="op")
    assert refused.value.code == "invalid_reason"
    assert request_close(request=request, actor="op", reason="subject withdrew").closing_reason == "subject withdrew"


def test_a_closed_request_cannot_be_extended(tenant, mailoutbox):
    request = request_close(request=new_request(tenant), actor="op", reason="withdrawn")
    with pytest.raises(ApplicationError) as refused:
        request_extend(request=request, actor="op", reason="complex")
    assert refused.value.code == "request_not_open"
    assert mailoutbox == []


@pytest.mark.django_db(transaction=True)
def test_a_move_under_the_callers_lock_needs_the_callers_transaction(tenant):
    request = put_in(new_request(tenant), RequestStatus.VERIFIED)

    with pytest.raises(RuntimeError):
        request_transition(request=request, to=RequestStatus.PLANNED, actor="workflow", locked=True)
    assert SubjectRequest.objects.get(pk=request.pk).status == RequestStatus.VERIFIED
    assert not RequestTransition.objects.filter(request=request, to_status=RequestStatus.PLANNED).exists()


@pytest.mark.django_db(transaction=True)
def test_a_move_under_the_callers_lock_sets_what_it_wrote_and_fails_with_the_callers_transaction(tenant):
    from django.db import transaction
    from django.utils import timezone

    request = put_in(new_request(tenant), RequestStatus.VERIFIED)
    planned_at = timezone.now()

    with transaction.atomic():
        SubjectRequest.objects.select_for_update().get(pk=request.pk)
        moved = request_transition(request=request, to=RequestStatus.PLANNED, actor="workflow", locked=True,
                                   planned_at=planned_at)
    assert (moved.status, moved.planned_at) == (RequestStatus.PLANNED, planned_at)
    assert SubjectRequest.objects.get(pk=request.pk).planned_at == planned_at

    put_in(SubjectRequest.objects.get(pk=request.pk), RequestStatus.EXECUTING)  # someone else moved it meanwhile
    with pytest.raises(TransactionManagementError), transaction.atomic():
        SubjectRequest.objects.filter(pk=request.pk).update(closing_reason="written by the caller")
        with pytest.raises(ApplicationError):
            request_transition(request=moved, to=RequestStatus.EXECUTING, actor="workflow", locked=True)
        SubjectRequest.objects.get(pk=request.pk)  # no savepoint to go back to: the transaction is lost
    assert SubjectRequest.objects.get(pk=request.pk).closing_reason == ""


@pytest.mark.django_db
def test_a_groups_move_writes_one_history_row_per_request_with_its_own_note_and_who_moved_it(tenant):
    from django.db import transaction

    from dsr.services.states import histories_add, requests_transition

    made = [put_in(new_request(tenant, subject_ref=f"s-{n}"), RequestStatus.VERIFIED) for n in range(3)]
    for request in made:
        request.refresh_from_db()
    with transaction.atomic():
        requests_transition(requests=made, to=RequestStatus.PLANNED, actor="workflow", action="plan",
                            notes={made[0].pk: "10 items planned", made[2].pk: "it's 3"})
        histories_add(requests=made[1:], action="executed", actor="workflow")

    for request in made:
        request.refresh_from_db()
        assert request.status == RequestStatus.PLANNED
    rows = list(RequestTransition.objects.filter(request__in=made, action__in=["plan", "executed"])
                .order_by("pk").values_list("request_id", "action", "actor", "note", "from_status", "to_status"))
    assert rows == [
        (made[0].pk, "plan", "workflow", "10 items planned", "verified", "planned"),
        (made[1].pk, "plan", "workflow", "", "verified", "planned"),
        (made[2].pk, "plan", "workflow", "it's 3", "verified", "planned"),
        (made[1].pk, "executed", "workflow", "", "", ""),
        (made[2].pk, "executed", "workflow", "", "", ""),
    ]
    assert RequestTransition.objects.filter(request__in=made, action="plan").values("at").distinct().count() == 1


def test_the_display_of_type_regulation_and_status_is_django_s_own():
    # SubjectRequest defines get_type/regulation/status_display itself (Django's rebuilds a dict each call):
    # for every choice, and for a value that is none, the answer of Django's generic method.
    from django.db.models import Model

    from dsr.models import Regulation, RequestStatus, RequestType, SubjectRequest

    for name, choices in (("type", RequestType), ("regulation", Regulation), ("status", RequestStatus)):
        field = SubjectRequest._meta.get_field(name)
        for value in [*choices.values, "not-a-choice"]:
            request = SubjectRequest(**{name: value})
            assert getattr(request, f"get_{name}_display")() == Model._get_FIELD_display(request, field)
