"""The request state machine: the allowed moves are this table, and a move is a conditional UPDATE.

An illegal move raises `illegal_transition`; a move that someone else made first raises
`concurrent_transition`. Every move writes a history row in the same transaction.
"""
from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from dsr import errors
from dsr.models import RequestStatus as S
from dsr.models import RequestTransition, SubjectRequest
from memory.lookups import array_literal

ALLOWED: dict[str, set[str]] = {
    S.RECEIVED: {S.VERIFIED, S.CLOSED, S.REFUSED},
    S.VERIFIED: {S.PLANNED, S.REFUSED, S.CLOSED},
    S.PLANNED: {S.EXECUTING, S.COMPLETED, S.REFUSED},
    S.EXECUTING: {S.AWAITING_LEGAL, S.COMPLETED, S.PARTIALLY_COMPLETED},
    S.AWAITING_LEGAL: {S.EXECUTING, S.COMPLETED, S.PARTIALLY_COMPLETED},
    # A legal decision after the first pass (an override, a deferral come due) runs the workflow again.
    S.PARTIALLY_COMPLETED: {S.EXECUTING, S.CLOSED},
    S.COMPLETED: {S.CLOSED},
    S.REFUSED: {S.CLOSED},
    S.CLOSED: set(),
}
OPEN = {S.RECEIVED, S.VERIFIED, S.PLANNED, S.EXECUTING, S.AWAITING_LEGAL, S.PARTIALLY_COMPLETED}


def history_add(*, request: SubjectRequest, action: str, actor: str, note: str = "", from_status: str = "",
                to_status: str = "") -> RequestTransition:
    return RequestTransition.objects.create(request=request, action=action, actor=actor, note=note,
                                            from_status=from_status, to_status=to_status, at=timezone.now())


def request_transition(*, request: SubjectRequest, to: str, actor: str, action: str = "", note: str = "",
                       locked: bool = False, **fields) -> SubjectRequest:
    """Move `request` to `to` (and set `fields` with it), or raise. Returns the refreshed request.

    `locked=True` is for a caller that holds the request's row lock in its own transaction (the workflow's
    steps): its instance is current, so the move and `fields` (plain values) are set on it instead of
    reading the row again, and its transaction (no savepoint of ours) makes the move and the history row
    one: a failed move fails the caller's transaction.
    """
    if to not in ALLOWED.get(request.status, set()):
        raise errors.conflict("illegal_transition", f"A request cannot move from {request.status} to {to}.",
                              from_status=request.status, to_status=to)
    if locked and not transaction.get_connection().in_atomic_block:
        raise RuntimeError("locked=True: the caller's transaction holds the request's row lock")
    with transaction.atomic(savepoint=not locked):
        moved = SubjectRequest.objects.filter(pk=request.pk, status=request.status).update(status=to, **fields)
        if not moved:
            raise errors.conflict("concurrent_transition", "The request moved meanwhile; reload it.",
                                  expected_status=request.status)
        history_add(request=request, action=action or f"move_{to}", actor=actor, note=note,
                    from_status=request.status, to_status=to)
    if not locked or any(hasattr(value, "resolve_expression") for value in fields.values()):
        request.refresh_from_db()
        return request
    request.status = to
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def requests_transition(*, requests: list[SubjectRequest], to: str, actor: str, action: str = "",
                        notes: dict[int, str] | None = None, **fields) -> None:
    """`request_transition(locked=True)` for a group of requests, all in the same status, whose row locks
    the caller's transaction holds (the workflow's grouped steps): one conditional UPDATE for all of them
    and one INSERT of their history rows, each with its own note. `fields` are plain values; the instances
    are updated in place. A request that moved meanwhile fails the whole move (and the caller's transaction):
    under the row locks that is a bug, never a race to recover from."""
    if not requests:
        return
    statuses = {request.status for request in requests}
    if len(statuses) != 1:
        raise ValueError(f"requests_transition moves requests of one status at a time, not {sorted(statuses)}")
    (from_status,) = statuses
    if to not in ALLOWED.get(from_status, set()):
        raise errors.conflict("illegal_transition", f"A request cannot move from {from_status} to {to}.",
                              from_status=from_status, to_status=to)
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("requests_transition: the caller's transaction holds the requests' row locks")
    moved = SubjectRequest.objects.filter(pk__any_of=[r.pk for r in requests], status=from_status).update(status=to,
                                                                                                      **fields)
    if moved != len(requests):
        raise errors.conflict("concurrent_transition", "Some of the requests moved meanwhile; reload them.",
                              expected_status=from_status)
    _histories_insert(requests, action=action or f"move_{to}", actor=actor, notes=notes or {},
                      from_status=from_status, to_status=to)
    for request in requests:
        request.status = to
        for name, value in fields.items():
            setattr(request, name, value)


def histories_add(*, requests: list[SubjectRequest], action: str, actor: str,
                  notes: dict[int, str] | None = None) -> None:
    """`history_add` for a group of requests: one INSERT."""
    _histories_insert(requests, action=action, actor=actor, notes=notes or {})


# A group's history rows, on PostgreSQL: one INSERT of the request ids and notes as parallel arrays, the rest
# shared. `bulk_create` of 50 rows cost ~2 ms of CPU (building and quoting 350 values, reading back the ids nobody
# uses), five times a group (bench_workflow.py).
_HISTORIES_SQL = f"""
    INSERT INTO {RequestTransition._meta.db_table} (request_id, note, from_status, to_status, action, actor, at)
    SELECT v.request_id, v.note, %s, %s, %s, %s, %s FROM unnest(%s::bigint[], %s::text[]) AS v(request_id, note)
"""


def _histories_insert(requests: list[SubjectRequest], *, action: str, actor: str, notes: dict[int, str],
                      from_status: str = "", to_status: str = "") -> None:
    """One history row per request, in their order, each with its own note (elsewhere: `bulk_create`)."""
    if not requests:
        return
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_HISTORIES_SQL, [from_status, to_status, action, actor, now,
                                            array_literal(r.pk for r in requests),
                                            [notes.get(r.pk, "") for r in requests]])
        return
    RequestTransition.objects.bulk_create([
        RequestTransition(request=request, action=action, actor=actor, note=notes.get(request.pk, ""),
                          from_status=from_status, to_status=to_status, at=now)
        for request in requests])
