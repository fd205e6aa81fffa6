"""The subject requests' failure alerts (alerts.services): a workflow step that failed for good, and a request
near its deadline with work left. dsr raises and resolves them where the cause is known; the alerts app knows
nothing of requests.

- `workflow_failed`, cause `request:<id>`: raised by the workflow's Celery tasks when a step fails past its
  retries (dsr.tasks.WorkflowTask.on_failure); resolved when a later run of that request's steps goes through
  (on_success: `workflow_resume` re-enqueues a stalled request every five minutes, or an operator starts it).
- `deadline_near`, cause `request:<id>`: a request due within LEDGER_ALERT_DEADLINE_DAYS days (or overdue) for
  which someone still has something to do (dsr.next_step); resolved by the next check once the request is
  answered, ended or no longer needs action (`deadline_alerts_check`, hourly: alerts migration 0002).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from alerts.models import AlertKind, AlertLevel
from alerts.services import alert_raise, alerts_resolve, alerts_resolve_except
from dsr.models import DONE_STATUSES, ConflictStatus, SubjectRequest
from dsr.next_step import request_next_step, requests_needing_action

logger = logging.getLogger(__name__)


def _link(request_id: int) -> str:
    return reverse("admin:dsr_subjectrequest_change", args=[request_id])


def workflow_failure_alert(*, request_id: int | None, step: str | None, error: BaseException,
                           retries: int = 0) -> None:
    """The request's workflow stopped at `step` on `error`, past its retries: one alert per request while it
    stays unresolved (a repeat only counts)."""
    if request_id is None:
        return
    tenant_id = SubjectRequest.objects.filter(pk=request_id).values_list("tenant_id", flat=True).first()
    if tenant_id is None:
        return
    where = f"the {step} step" if step else "a step"
    alert_raise(kind=AlertKind.WORKFLOW_FAILED, cause=f"request:{request_id}", tenant_id=tenant_id,
                title=f"Erasure workflow of request {request_id} failed at {where}",
                detail=(f"{type(error).__name__}: {error}"[:2000] + f"\n\nRetries before giving up: {retries}. The "
                        "request stays where it stood; its workflow is resumed every five minutes "
                        "(dsr.workflow_resume), and this alert closes when a step of it goes through."),
                link=_link(request_id))


def workflow_failure_resolve(*, request_ids: list[int]) -> int:
    """Steps of these requests went through: their `workflow_failed` alerts (if any) close. One UPDATE on the
    open alerts' (kind, cause) index, which finds nothing in the common case."""
    return alerts_resolve(kind=AlertKind.WORKFLOW_FAILED, causes=[f"request:{pk}" for pk in request_ids],
                          any_tenant=True, resolution="a later run of the workflow's steps went through")


@dataclass(frozen=True)
class DeadlineCheck:
    raised: int       # alerts raised or counted again (requests near their deadline with work left)
    resolved: int


def deadline_alerts_check(*, days: int | None = None) -> DeadlineCheck:
    """Raise a `deadline_near` alert for every open request due within `days` (LEDGER_ALERT_DEADLINE_DAYS) days,
    or overdue, for which someone still has work; resolve those of requests no longer in that set."""
    days = settings.LEDGER_ALERT_DEADLINE_DAYS if days is None else days
    today = timezone.now().astimezone(UTC).date()
    # The open requests' partial index (request_open_effective_due_idx) serves the date range.
    near = requests_needing_action(SubjectRequest.objects.exclude(status__in=DONE_STATUSES)
                                   .filter(effective_due_date__lte=today + timedelta(days=days)))
    near = near.annotate(open_conflicts=Count("conflicts", filter=Q(conflicts__status=ConflictStatus.OPEN)))
    keep: set[tuple[int, str]] = set()
    for request in near.order_by("effective_due_date", "pk").iterator(chunk_size=500):
        step = request_next_step(request, open_conflicts=request.open_conflicts)
        if not step.needs_action:
            continue
        left = (request.effective_due_date - today).days
        when = (f"overdue by {-left} day{'s' if left != -1 else ''}" if left < 0 else
                "due today" if left == 0 else f"due in {left} day{'s' if left != 1 else ''}")
        cause = f"request:{request.pk}"
        keep.add((request.tenant_id, cause))
        alert_raise(kind=AlertKind.DEADLINE_NEAR, cause=cause, tenant_id=request.tenant_id,
                    level=AlertLevel.ERROR if left < 0 else AlertLevel.WARNING,
                    title=f"{request} {when} ({request.effective_due_date:%Y-%m-%d}), work left",
                    detail=f"Next: {step}. Status: {request.status}.", link=_link(request.pk))
    resolved = alerts_resolve_except(kind=AlertKind.DEADLINE_NEAR, keep=keep,
                                     resolution="the request was answered, ended or needs no more action")
    return DeadlineCheck(len(keep), resolved)
