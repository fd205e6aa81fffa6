"""Done vs needs action: who must act on a subject request next, and what is left.

A request whose status says "partially completed" may be finished for everyone (the subject was told what
was erased and what is kept, and why) or still waiting on legal (an open retention conflict). The status
alone cannot say, so the queue, the dashboard and a request's page ask here:

- `request_next_step(request, open_conflicts=n)`: one request, as a person reads it (pure: no query; the
  caller passes the count of the request's open conflicts, which the queue annotates set-based);
- `requests_needing_action(queryset)`: the same rule as a queryset filter, for the queue's default view and
  the dashboard's counts (tests/dsr/test_next_step.py checks that the two agree for every state).

**The clock stops when the answer is sent.** The law asks for an answer within the period (GDPR Art. 12(3),
CCPA §1798.130): once the subject was told the outcome (`notified_at`) of a finished request, that request
is not overdue, even while legal still reviews a kept record. An override runs the workflow again and
clears `notified_at` (dsr.services.conflicts), and the clock runs again until the new answer is sent.

Models only; no services: the admin, the dashboard and the selectors import this module.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from dsr.models import ConflictStatus, RequestStatus, RetentionConflict, SubjectRequest

OPERATOR, LEGAL, WORKFLOW, NOBODY = "operator", "legal", "workflow", "nobody"

FINISHED = [RequestStatus.COMPLETED.value, RequestStatus.PARTIALLY_COMPLETED.value]
ENDED = [RequestStatus.REFUSED.value, RequestStatus.CLOSED.value]

# The answer was sent: the legal clock no longer runs for this request.
CLOCK_STOPPED = Q(status__in=FINISHED, notified_at__isnull=False)


@dataclass(frozen=True)
class NextStep:
    who: str     # operator | legal | workflow | nobody
    what: str    # what is left, in words

    @property
    def needs_action(self) -> bool:
        return self.who != NOBODY

    def __str__(self) -> str:
        return self.what if self.who == NOBODY else f"{self.who}: {self.what}"


def clock_stopped(request: SubjectRequest) -> bool:
    """The subject has their answer (a finished request, notified): no countdown, never overdue."""
    return request.status in FINISHED and request.notified_at is not None


def request_next_step(request: SubjectRequest, *, open_conflicts: int = 0) -> NextStep:
    """Who must act next on `request`, and what is left (pure). `open_conflicts`: the request's open
    retention conflicts (legal's to decide)."""
    status = request.status
    if status in ENDED:
        return NextStep(NOBODY, "nothing left")
    if status == RequestStatus.RECEIVED:
        return NextStep(OPERATOR, "verify identity")
    if status == RequestStatus.VERIFIED and request.workflow_started_at is None:
        return NextStep(OPERATOR, "start the workflow")
    if open_conflicts:
        return NextStep(LEGAL, f"waiting on legal: {open_conflicts} open conflict{'s' if open_conflicts != 1 else ''}")
    if status == RequestStatus.AWAITING_LEGAL:
        return NextStep(LEGAL, "waiting on legal")
    if status == RequestStatus.EXECUTING and request.gaps:
        return NextStep(OPERATOR, f"check {len(request.gaps)} gap{'s' if len(request.gaps) != 1 else ''} "
                                  "the confirmation found")
    if status in FINISHED:
        return NextStep(NOBODY, "nothing left") if request.notified_at else NextStep(WORKFLOW, "tell the subject")
    return NextStep(WORKFLOW, {RequestStatus.VERIFIED: "plan", RequestStatus.PLANNED: "evaluate"}.get(
        status, "erase and confirm" if request.type != "access" else "export"))


def open_conflicts_exist() -> Exists:
    return Exists(RetentionConflict.objects.filter(request=OuterRef("pk"), status=ConflictStatus.OPEN))


# Nothing left for anyone: ended, or finished with the answer sent and no conflict left open.
NOTHING_LEFT = Q(status__in=ENDED) | (CLOCK_STOPPED & ~open_conflicts_exist())


def requests_needing_action(queryset: QuerySet[SubjectRequest]) -> QuerySet[SubjectRequest]:
    """`queryset`'s requests for which someone (an operator, legal, the workflow) still has something to do:
    `request_next_step(...).needs_action`, set-based (one EXISTS on the conflicts' (request, record) index)."""
    return queryset.exclude(NOTHING_LEFT)


def requests_nothing_left(queryset: QuerySet[SubjectRequest]) -> QuerySet[SubjectRequest]:
    return queryset.filter(NOTHING_LEFT)
