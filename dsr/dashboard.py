"""Reads behind the admin's screens: the dashboard, a request's page, a conflict's page.

Each one runs a fixed number of queries whatever the number of rows (tests/admin/test_queries.py), each
answered by an index (dsr.models): the open-requests partial index for the queues' counts, the
confirmed-at index for the weekly chart, the deferred-items index for what comes due.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncWeek
from django.utils import timezone

from dsr.charts import Bar, stacked_bars_svg, week_label
from dsr.models import (
    DONE_STATUSES,
    ConflictStatus,
    RequestItem,
    RequestStatus,
    RequestTransition,
    RequestType,
    RetentionConflict,
    SubjectNotice,
    SubjectRequest,
)
from dsr.next_step import NextStep, clock_stopped, request_next_step, requests_needing_action
from dsr.selectors import RequestProgress, request_progress, requests_due_within, requests_overdue
from dsr.services.deferred import records_kept_by_requests
from memory.models import DeletedRecord, Record
from retention.models import LegalHold, RetentionRule

SOON_DAYS = 7           # "due this week" in the queue and on the dashboard
WEEKS = 12              # the chart's width
DEFERRED_HORIZON = 30   # deferred erasures coming due within this many days are listed
DEFERRED_LISTED = 10
ITEMS_PER_PAGE = 100    # a request page lists its plan in pages of this many
HISTORY_SHOWN = 500     # a request's history is short; this bounds a pathological one

OPEN_ORDER = [s for s in RequestStatus.values if s not in DONE_STATUSES]


def today_utc() -> date:
    # Due dates are UTC dates (dsr.deadlines), and so is today.
    return timezone.now().astimezone(UTC).date()


def days_left(due: date, today: date | None = None) -> int:
    return (due - (today or today_utc())).days


# --- the dashboard ---------------------------------------------------------------------------------------

@dataclass
class Dashboard:
    open_by_status: list[tuple[str, str, int]]
    open_total: int
    needs_action: int
    due_soon: int
    overdue: int
    conflicts_open: int
    conflicts_deferred_due: int
    weeks: list[tuple[date, int, int]]
    deferred_due: int
    deferred_next: list[RequestItem]
    today: date
    chart: str = ""
    soon_days: int = SOON_DAYS
    horizon_days: int = DEFERRED_HORIZON


def dashboard_get(*, now: datetime | None = None) -> Dashboard:
    """The work at a glance (9 queries): open requests by status, those that need someone's action, due within
    a week and overdue (only requests whose answer was not sent: dsr.next_step), open conflicts and deferred
    decisions come back, erasures completed per week, deferred erasures coming due."""
    now = now or timezone.now()
    today = now.astimezone(UTC).date()
    counts = dict(SubjectRequest.objects.exclude(status__in=DONE_STATUSES).values_list("status")
                  .annotate(n=Count("pk")).order_by())
    by_status = [(s, RequestStatus(s).label, counts.get(s, 0)) for s in OPEN_ORDER]
    conflicts = RetentionConflict.objects.aggregate(
        open=Count("pk", filter=Q(status=ConflictStatus.OPEN)),
        deferred_due=Count("pk", filter=Q(status=ConflictStatus.DEFERRED,
                                          deferred_to__lte=today + timedelta(days=SOON_DAYS))),
    )
    # Deferred erasures: records an erasure request keeps hidden until their lock ends (dsr.services.deferred).
    deferred = records_kept_by_requests().filter(request__type=RequestType.ERASURE, deferred_until__isnull=False,
                                                 deferred_until__lte=now + timedelta(days=DEFERRED_HORIZON))
    board = Dashboard(
        open_by_status=by_status,
        open_total=sum(counts.values()),
        needs_action=requests_needing_action(SubjectRequest.objects.all()).count(),
        due_soon=requests_due_within(days=SOON_DAYS, today=today).count(),
        overdue=requests_overdue(today=today).count(),
        conflicts_open=conflicts["open"],
        conflicts_deferred_due=conflicts["deferred_due"],
        weeks=erasures_per_week(now=now),
        deferred_due=deferred.count(),
        deferred_next=list(deferred.select_related("request").order_by("deferred_until", "pk")[:DEFERRED_LISTED]),
        today=today,
    )
    board.chart = stacked_bars_svg(
        [Bar(week_label(monday), f"week of {monday:%d %B %Y}: {full} completed, {partial} partially completed "
             "(records kept under a lock or a hold)", (full, partial)) for monday, full, partial in board.weeks],
        series=(("completed", "#2e7d32"), ("partially completed", "#f9a825")),
        title=f"Erasure requests completed per week, last {WEEKS} weeks",
    )
    return board


def erasures_per_week(*, now: datetime, weeks: int = WEEKS) -> list[tuple[date, int, int]]:
    """(Monday, completed, partially completed) for the last `weeks` weeks, oldest first, by the week the
    erasure was confirmed (one query on the confirmed-at index)."""
    this_monday = now.astimezone(UTC).date() - timedelta(days=now.astimezone(UTC).weekday())
    first = this_monday - timedelta(weeks=weeks - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    rows = (SubjectRequest.objects.filter(type=RequestType.ERASURE, confirmed_at__gte=start)
            .annotate(week=TruncWeek("confirmed_at", tzinfo=UTC)).values("week")
            .annotate(full=Count("pk", filter=~Q(status=RequestStatus.PARTIALLY_COMPLETED)),
                      partial=Count("pk", filter=Q(status=RequestStatus.PARTIALLY_COMPLETED)))
            .order_by())
    found = {row["week"].date(): (row["full"], row["partial"]) for row in rows}
    return [(monday, *found.get(monday, (0, 0))) for monday in (first + timedelta(weeks=i) for i in range(weeks))]


# --- a request's page ------------------------------------------------------------------------------------

@dataclass
class RequestPage:
    request: SubjectRequest
    progress: RequestProgress
    items: list[RequestItem]
    items_page: int
    items_pages: int
    conflicts: list[RetentionConflict]
    history: list[RequestTransition]
    history_truncated: bool
    notices: list[SubjectNotice]
    days_left: int
    open_conflicts: list[RetentionConflict] = field(default_factory=list)

    @property
    def next_step(self) -> NextStep:
        return request_next_step(self.request, open_conflicts=len(self.open_conflicts))

    @property
    def clock_stopped(self) -> bool:
        return clock_stopped(self.request)

    @property
    def overdue_days(self) -> int:
        return -self.days_left

    @property
    def done(self) -> bool:
        return self.request.status in DONE_STATUSES

    @property
    def bar(self) -> dict[str, float]:
        return progress_bar(self.progress.as_api())


def progress_bar(counts: dict) -> dict[str, float]:
    """Widths (percent) of the progress bar's segments: done, kept (hidden under a lock or a hold), waiting
    (copies told to other agents, awaiting their acknowledgement), pending."""
    planned = counts["planned"]
    if not planned:
        return {"done": 0.0, "kept": 0.0, "waiting": 0.0, "pending": 0.0}
    waiting = max(planned - counts["done"] - counts["refused"] - counts["pending"], 0)
    return {name: round(100 * n / planned, 2) for name, n in
            (("done", counts["done"]), ("kept", counts["refused"]), ("waiting", waiting),
             ("pending", counts["pending"]))}


def request_page_get(*, request: SubjectRequest, items_page: int = 1) -> RequestPage:
    """Everything a request's page shows (6 queries, whatever the size of the plan): progress, one page of
    the plan with each item's outcome and reason, the conflicts, the history, the notices sent."""
    progress = request_progress(request)
    pages = max(1, -(-progress.planned // ITEMS_PER_PAGE))
    items_page = min(max(1, items_page), pages)
    items = list(RequestItem.objects.filter(request=request).order_by("-kind", "pk")  # records, then artifacts
                 [(items_page - 1) * ITEMS_PER_PAGE:items_page * ITEMS_PER_PAGE])
    conflicts = list(RetentionConflict.objects.filter(request=request).order_by("opened_at", "pk"))
    history = list(RequestTransition.objects.filter(request=request).order_by("-at", "-pk")[:HISTORY_SHOWN + 1])
    notices = list(SubjectNotice.objects.filter(request=request).order_by("created_at", "pk")
                   .only("pk", "request_id", "kind", "to", "subject_line", "sent_at", "created_at"))
    return RequestPage(
        request=request, progress=progress, items=items, items_page=items_page, items_pages=pages,
        conflicts=conflicts, open_conflicts=[c for c in conflicts if c.status == ConflictStatus.OPEN],
        history=list(reversed(history[:HISTORY_SHOWN])), history_truncated=len(history) > HISTORY_SHOWN,
        notices=notices, days_left=days_left(request.effective_due_date),
    )


RUNNING = {RequestStatus.VERIFIED, RequestStatus.PLANNED, RequestStatus.EXECUTING, RequestStatus.AWAITING_LEGAL}


def workflow_running(request: SubjectRequest) -> bool:
    """Whether the workflow may still move this request (a verified one: once started)."""
    return request.status in RUNNING or (
        request.status in (RequestStatus.COMPLETED, RequestStatus.PARTIALLY_COMPLETED) and not request.notified_at)


def progress_json(request: SubjectRequest) -> dict:
    """What the request page's progress bar polls (2 queries besides the request)."""
    progress = request_progress(request)
    return {"id": request.pk, "status": request.status, "status_display": request.get_status_display(),
            "running": workflow_running(request), "notified": request.notified_at is not None,
            **progress.as_api(), "bar": progress_bar(progress.as_api()),
            "tombstones": [str(t) for t in progress.tombstone_ids]}


# --- a conflict's page -----------------------------------------------------------------------------------

RECORD_FIELDS = ("id", "tenant_id", "tier", "created_at", "forgotten_at", "redacted_at", "erasure_pending",
                 "retained_until", "held", "lock_protects_content", "scope__path", "content_class__name",
                 "subject__ref")


@dataclass
class Blocker:
    """One rule or hold that blocked the erasure (as the workflow found it), and where it stands now."""

    type: str
    authority: str
    until: str | None
    detail: dict
    rule: RetentionRule | None = None
    hold: LegalHold | None = None

    @property
    def still_blocks(self) -> bool:
        if self.hold is not None:
            return self.hold.released_at is None
        if self.rule is not None:
            return self.rule.retired_at is None
        return False

    @property
    def forbids_override(self) -> bool:
        """Whether the service will refuse an override because of this one (it decides; this only warns)."""
        if self.hold is not None:
            return self.hold.released_at is None
        return self.rule is not None and self.rule.mode == "compliance" and self.rule.retired_at is None


@dataclass
class ConflictPage:
    conflict: RetentionConflict
    record: Record | None
    deleted: DeletedRecord | None
    blockers: list[Blocker]
    decisions: list[RequestTransition]

    @property
    def override_forbidden(self) -> list[Blocker]:
        return [b for b in self.blockers if b.forbids_override]


def conflict_page_get(*, conflict: RetentionConflict) -> ConflictPage:
    """The conflict, its record's metadata (never its content), every blocking rule or hold with its
    authority and end date and whether it still stands, and the decisions taken (at most 5 queries)."""
    record = (Record.objects.filter(pk=conflict.record_id, tenant_id=conflict.tenant_id)
              .select_related("scope", "content_class", "subject").only(*RECORD_FIELDS).first())
    deleted = None if record is not None else DeletedRecord.objects.filter(record_id=conflict.record_id).first()
    entries = conflict.blocking or []
    hold_ids = [b["hold_id"] for b in entries if b.get("type") == "hold" and "hold_id" in b]
    rule_ids = [b["rule_id"] for b in entries if b.get("type") == "rule" and "rule_id" in b]
    holds = {h.pk: h for h in LegalHold.objects.filter(pk__in=hold_ids)} if hold_ids else {}
    rules = {r.pk: r for r in RetentionRule.objects.filter(pk__in=rule_ids)} if rule_ids else {}
    blockers = [Blocker(type=b.get("type", "?"), authority=b.get("authority") or "", until=b.get("until"),
                        detail=b, rule=rules.get(b.get("rule_id")), hold=holds.get(b.get("hold_id")))
                for b in entries]
    decisions = list(RequestTransition.objects.filter(
        request_id=conflict.request_id, action__startswith="conflict_",
        note__startswith=f"record {conflict.record_id} ").order_by("at", "pk"))
    return ConflictPage(conflict=conflict, record=record, deleted=deleted, blockers=blockers, decisions=decisions)
