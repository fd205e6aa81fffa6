"""The drp app's reads: an agent's request by its DRP id, and its status as DRP 0.9.4 section 3.03 shows it.

The status mapping (README "Authorized agents (Data Rights Protocol)" has the table):

| subject request (dsr)                                  | DRP status   | reason               |
| ------------------------------------------------------ | ------------ | -------------------- |
| received (identity not yet verified)                   | in_progress  |                      |
| verified, planned, executing, awaiting_legal           | in_progress  |                      |
| partially_completed (erasures deferred by a lock)      | in_progress  |                      |
| completed (or closed after it)                         | fulfilled    |                      |
| closed after partially_completed (the rest kept by law) | fulfilled    |                      |
| refused (or closed after it)                           | denied       | other                |
| closed: identity rejected                              | denied       | insuf_verification   |
| closed: revoked through DRP                            | revoked      |                      |
| closed otherwise (by an operator, with a reason)       | denied       | other                |
| none: a right not fulfilled here                       | denied       | claim_not_covered    |
| none: no subject reference                             | denied       | no_match             |

`open` is never shown: this service is the business itself, so a request is acknowledged when it is
received (section 3.03 note 1: "requests SHOULD pass immediately from open to in_progress"). `expired` is
never shown either: a request whose `expires-at` has passed is refused at intake (400 `request_expired`),
and a received request does not expire here.
"""
from __future__ import annotations

import uuid
from datetime import date

from drp import errors
from drp.models import Agent, DataRightsRequest
from dsr.models import RequestStatus as S
from dsr.models import RequestTransition, RequestType

IN_PROGRESS_DETAILS = {
    S.RECEIVED: "Received; the business is verifying the identity of the person the request is for.",
    S.VERIFIED: "Identity verified; the request is waiting to be carried out.",
    S.PLANNED: "Being carried out.",
    S.EXECUTING: "Being carried out.",
    S.AWAITING_LEGAL: "Being carried out; part of the data is under review against a retention obligation.",
    S.PARTIALLY_COMPLETED: "Partly completed: some data must be kept under a retention obligation or legal hold "
                           "for now; its erasure is deferred and the request stays open.",
}


def request_for_agent(*, agent: Agent, request_id: str) -> DataRightsRequest:
    """The request `request_id` of this agent: unknown is 404 `unknown_request`; another agent's (of this tenant or
    another) is 403 `not_your_request`, as section 2.02.1 asks."""
    try:
        parsed = uuid.UUID(request_id) if isinstance(request_id, str) and len(request_id) <= 64 else None
    except ValueError:
        parsed = None
    row = None
    if parsed is not None:
        row = (DataRightsRequest.objects.select_related("subject_request", "agent")
               .filter(request_id=parsed).first())
    if row is None:
        raise errors.not_found()
    if row.agent_id != agent.pk:
        raise errors.forbidden("not_your_request", "This request is managed by another agent.")
    return row


def _timestamp(day: date) -> str:
    # `expected_by` is a date in dsr (the legal due date); the end of that day in UTC is when it falls due.
    return f"{day.isoformat()}T23:59:59Z"


def _closed_how(subject_request) -> tuple[str, str | None]:
    """(DRP status, reason) of a closed request, from the move that closed it."""
    last = (RequestTransition.objects.filter(request=subject_request, to_status=S.CLOSED)
            .order_by("-at", "-pk").values_list("action", "from_status").first())
    action, from_status = last if last else ("close", "")
    if action == "reject_identity":
        return "denied", "insuf_verification"
    if from_status in (S.COMPLETED, S.PARTIALLY_COMPLETED):
        # Closed after the workflow ran: what the law lets the business keep is kept (a lock, a hold), the rest
        # is done. The protocol has no partial outcome; the details say what was kept.
        return "fulfilled", None
    return "denied", "other"


def _closed_partially(subject_request) -> bool:
    return RequestTransition.objects.filter(request=subject_request, to_status=S.CLOSED,
                                            from_status=S.PARTIALLY_COMPLETED).exists()


def status_of(row: DataRightsRequest) -> dict:
    """The Exercise Status object (section 3.03) of a request."""
    status: dict = {"request_id": str(row.request_id), "received_at": row.received_at.isoformat().replace(
        "+00:00", "Z")}
    if row.agent_request_id:
        status["agent_request_id"] = row.agent_request_id
    subject_request = row.subject_request
    if subject_request is None:
        status.update(status="denied", reason=row.denied_reason or "other", processing_details=row.processing_details)
        return status
    sr = subject_request
    details, reason = "", None
    if row.revoked_at is not None:
        state = "revoked"
    elif sr.status == S.COMPLETED:
        state = "fulfilled"
    elif sr.status == S.REFUSED:
        state, reason, details = "denied", "other", sr.closing_reason
    elif sr.status == S.CLOSED:
        state, reason = _closed_how(sr)
        details = sr.closing_reason
    else:
        state, details = "in_progress", IN_PROGRESS_DETAILS.get(sr.status, "Being carried out.")
    if state == "fulfilled":
        details = ("Completed: the data was erased." if sr.type == RequestType.ERASURE else
                   "Completed: the business sends the result to the person's contact address.")
        if sr.status == S.CLOSED and details and sr.closing_reason and _closed_partially(sr):
            details = ("Completed, except data the business must keep under a retention obligation or legal hold: "
                       f"{sr.closing_reason}")
    if state == "in_progress":
        status["expected_by"] = _timestamp(sr.extended_due_date or sr.due_date)
        if sr.extended_due_date is not None:
            # Section 3.03: an extended `expected_by` comes with the reason in `processing_details`.
            details = f"{details} The due date was extended to {sr.extended_due_date.isoformat()}: " \
                      f"{sr.extension_reason}"
    status["status"] = state
    if reason:
        status["reason"] = reason
    if details:
        status["processing_details"] = details
    return status
