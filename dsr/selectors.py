"""Reads of subject requests: the due-date queues, one request with its progress.

The queues filter on `effective_due_date` (the extended date when there is one, else the original: a
stored generated column) and exclude the finished statuses exactly as the partial index
`request_open_effective_due_idx` does, so PostgreSQL answers them with one range scan of that index.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, timedelta
from uuid import UUID

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from dsr import errors
from dsr.models import DONE_STATUSES, ConflictStatus, ItemOutcome, RequestItem, RetentionConflict, SubjectRequest
from dsr.next_step import CLOCK_STOPPED
from memory.models import Tenant
from retention.models import LegalHold

MAX_ID = 2**63 - 1
MAX_DUE_WITHIN_DAYS = 366

# What an item's outcome means for the subject (DESIGN.md: an erasure is complete when the content is gone).
# For an access request, done is exported; an item excluded from its export (not live data) is not counted.
DONE_OUTCOMES = [ItemOutcome.DELETED, ItemOutcome.REDACTED, ItemOutcome.GONE, ItemOutcome.LOGGED,
                 ItemOutcome.EXPORTED]
KEPT_OUTCOMES = [ItemOutcome.HIDDEN]


def _today(today: date | None) -> date:
    # Due dates are UTC dates (dsr.deadlines), and so is today.
    return today if today is not None else timezone.now().astimezone(UTC).date()


def _open_requests(tenant: Tenant | None) -> QuerySet[SubjectRequest]:
    # The same predicate as the partial index's condition, written the same way, so that it is implied; and
    # the clock stops once the subject has their answer (dsr.next_step): such a request is never overdue.
    requests = SubjectRequest.objects.exclude(status__in=DONE_STATUSES).exclude(CLOCK_STOPPED)
    return requests.filter(tenant=tenant) if tenant is not None else requests


def requests_overdue(*, today: date | None = None, tenant: Tenant | None = None) -> QuerySet[SubjectRequest]:
    """Open requests whose (effective) due date has passed and whose answer was not sent yet, most overdue
    first."""
    return _open_requests(tenant).filter(effective_due_date__lt=_today(today)).order_by("effective_due_date", "pk")


def requests_due_within(*, days: int, today: date | None = None,
                        tenant: Tenant | None = None) -> QuerySet[SubjectRequest]:
    """Open requests due from today to `days` days from now (both included), soonest first; overdue ones
    are `requests_overdue`."""
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_DUE_WITHIN_DAYS:
        raise errors.invalid("invalid_days", f"days must be an integer from 0 to {MAX_DUE_WITHIN_DAYS}.")
    start = _today(today)
    return (_open_requests(tenant).filter(effective_due_date__gte=start,
                                          effective_due_date__lte=start + timedelta(days=days))
            .order_by("effective_due_date", "pk"))


def request_get(*, tenant: Tenant, request_id: int) -> SubjectRequest:
    """The tenant's request `request_id`; another tenant's, or none, is `not_found` alike."""
    request = None
    if isinstance(request_id, int) and 0 < request_id <= MAX_ID:
        request = SubjectRequest.objects.select_related("subject").filter(tenant=tenant, pk=request_id).first()
    if request is None:
        raise errors.not_found()
    return request


@dataclass(frozen=True)
class RequestProgress:
    """Counts of the request's plan items. `done`: the content is gone (deleted, redacted, already gone,
    archive copy logged for deletion); `refused`: kept, hidden and restricted, because a lock or a hold
    forbids erasure; `deferred`: items with a deferred erasure date, or copies held by other agents that
    were told and have not acknowledged. A kept record with a deferred erasure counts in both."""

    planned: int = 0
    done: int = 0
    refused: int = 0
    deferred: int = 0
    pending: int = 0
    tombstone_ids: list[UUID] = field(default_factory=list)

    def as_api(self) -> dict:
        return {"planned": self.planned, "done": self.done, "refused": self.refused, "deferred": self.deferred,
                "pending": self.pending}


def request_progress(request: SubjectRequest) -> RequestProgress:
    """Where the request's plan stands (two queries)."""
    items = RequestItem.objects.filter(request=request)
    counts = items.aggregate(
        planned=Count("pk", filter=~Q(outcome=ItemOutcome.EXCLUDED)),
        done=Count("pk", filter=Q(outcome__in=DONE_OUTCOMES)),
        refused=Count("pk", filter=Q(outcome__in=KEPT_OUTCOMES)),
        deferred=Count("pk", filter=Q(deferred_until__isnull=False) | Q(outcome=ItemOutcome.NOTIFIED)),
        pending=Count("pk", filter=Q(outcome=ItemOutcome.PENDING)),
    )
    tombstone_ids = list(items.exclude(tombstone_id=None).order_by("tombstone_id")
                         .values_list("tombstone_id", flat=True).distinct())
    return RequestProgress(tombstone_ids=tombstone_ids, **counts)


# --- what waits on a legal hold ----------------------------------------------------------------------------

HOLD_WAITING_SHOWN = 200  # a hold's page lists this many conflicts; the count is of them all


@dataclass(frozen=True)
class HoldWaiting:
    """The undecided retention conflicts (open or deferred) that name the hold among what blocked their
    erasure, most urgent request first, and their requests (each once, in the same order)."""

    conflicts: list[RetentionConflict]
    requests: list[SubjectRequest]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.conflicts)


def hold_waiting(hold: LegalHold) -> HoldWaiting:
    """The subject requests and conflicts waiting on `hold` (two queries, whatever their number).

    A conflict waits on the hold when its recorded `blocking` names the hold: the workflow records every rule
    and hold that refused the erasure (memory.services.forget). Only the hold's tenant's undecided conflicts
    opened since the hold was placed can (the hold blocked nothing before); the JSON is read here rather than
    queried, so that the embedded SQLite default answers as PostgreSQL does."""
    undecided = [ConflictStatus.OPEN, ConflictStatus.DEFERRED]
    candidates = (RetentionConflict.objects.filter(tenant_id=hold.tenant_id, status__in=undecided,
                                                   opened_at__gte=hold.placed_at)
                  .values_list("request__effective_due_date", "request_id", "pk", "blocking"))
    waiting = sorted((row[:3] for row in candidates.iterator(chunk_size=2000)
                      if any(isinstance(b, dict) and b.get("type") == "hold" and b.get("hold_id") == hold.pk
                             for b in (row[3] if isinstance(row[3], list) else []))),
                     key=lambda row: (row[0] is None, row[0] or date.min, row[1], row[2]))
    if not waiting:
        return HoldWaiting(conflicts=[], requests=[], total=0)
    shown = [pk for _, _, pk in waiting[:HOLD_WAITING_SHOWN]]
    conflicts = list(RetentionConflict.objects.filter(pk__in=shown).select_related("request", "request__subject")
                     .order_by("request__effective_due_date", "request_id", "pk"))
    requests = list({c.request_id: c.request for c in conflicts}.values())
    return HoldWaiting(conflicts=conflicts, requests=requests, total=len(waiting))
