"""Subject requests: receive, verify the subject's identity (or reject it), extend, refuse, close.

Every status move goes through `dsr.services.states.request_transition` (a conditional UPDATE and a
history row in one transaction); acts that are not moves (receipt, extension) write their history row
in the same transaction as the change. `actor` is who acted, as the caller names them
(`token:<prefix>:<role>`, `admin:<username>`, `task:<name>`).
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from dsr import deadlines, errors
from dsr.models import Channel, Regulation, RequestStatus, RequestType, SubjectNotice, SubjectRequest
from dsr.services.states import OPEN, history_add, request_transition
from memory.models import Tenant
from memory.services import subject_get_or_create

MAX_REASON_CHARS = 2000
MAX_METHOD_CHARS = 200
# A receipt time may be this far ahead of our clock (the sender's clock runs fast); more is a mistake.
RECEIPT_CLOCK_SKEW = timedelta(minutes=5)
NOTICE_EXTENSION = "extension"

LAWS = {
    Regulation.GDPR: "Article 12(3) of the GDPR",
    Regulation.CCPA: "the CCPA (Cal. Civ. Code §1798.130(a)(2))",
    Regulation.OTHER: "the law that applies to your request",
}


def _text(value: object, *, name: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise errors.invalid(f"invalid_{name}", f"{name} must be a non-empty string.")
    value = value.strip()
    if len(value) > max_chars:
        raise errors.invalid(f"invalid_{name}", f"{name} is limited to {max_chars} characters.")
    return value


def _other_days() -> int:
    return settings.LEDGER_DSR_OTHER_DAYS


def request_create(
    *,
    tenant: Tenant,
    subject_ref: str,
    type: str,  # noqa: A002 - the field's name in the model and the API
    regulation: str,
    channel: str,
    received_at: datetime | None = None,
    contact_email: str = "",
    actor: str,
) -> SubjectRequest:
    """Record a request received at `received_at` (now by default), with its legal due date; the subject
    is created if the tenant does not know them yet. The request waits for identity verification."""
    for name, value, choices in (("type", type, RequestType), ("regulation", regulation, Regulation),
                                 ("channel", channel, Channel)):
        if value not in choices.values:
            raise errors.invalid(f"invalid_{name}", f"{name} must be one of {choices.values}.")
    now = timezone.now()
    received_at = now if received_at is None else received_at
    if not isinstance(received_at, datetime) or timezone.is_naive(received_at):
        raise errors.invalid("invalid_received_at", "received_at must be a date and time with its UTC offset.")
    try:
        # Deadlines count in UTC, and the instant is stored in UTC: PostgreSQL takes offsets up to 15:59,
        # Python up to 23:59 (-17:39 is a DataError). 0001-01-01T00:00+14:00 is a day before year 1 in UTC,
        # which Python cannot hold.
        received_at = received_at.astimezone(UTC)
    except OverflowError:
        raise errors.invalid("invalid_received_at", "received_at is out of range in UTC.") from None
    if received_at > now + RECEIPT_CLOCK_SKEW:
        raise errors.invalid("invalid_received_at", "received_at is in the future.")
    if not isinstance(contact_email, str):
        raise errors.invalid("invalid_contact_email", "contact_email must be a string.")
    if contact_email:
        try:
            validate_email(contact_email)
        except ValidationError:
            raise errors.invalid("invalid_contact_email", "contact_email is not an e-mail address.") from None
    due = deadlines.due_date(regulation=regulation, received_at=received_at, other_days=_other_days())
    with transaction.atomic():
        subject = subject_get_or_create(tenant=tenant, ref=subject_ref)
        request = SubjectRequest.objects.create(
            tenant=tenant, subject=subject, type=type, regulation=regulation, channel=channel,
            contact_email=contact_email, received_at=received_at, due_date=due, status=RequestStatus.RECEIVED,
        )
        history_add(request=request, action="received", actor=actor, to_status=RequestStatus.RECEIVED,
                    note=f"{type} request under {regulation} by {channel}; due {due.isoformat()}")
    return request


def request_verify_identity(*, request: SubjectRequest, actor: str, method: str) -> SubjectRequest:
    """The subject's identity is verified (by `actor`, by `method`, now): the request may be executed."""
    method = _text(method, name="method", max_chars=MAX_METHOD_CHARS)
    return request_transition(
        request=request, to=RequestStatus.VERIFIED, actor=actor, action="verify_identity", note=method,
        identity_verified_by=actor[:200], identity_method=method, identity_verified_at=timezone.now(),
    )


def request_reject_identity(*, request: SubjectRequest, actor: str, reason: str) -> SubjectRequest:
    """The subject's identity could not be verified: the request is closed with `reason`."""
    reason = _text(reason, name="reason", max_chars=MAX_REASON_CHARS)
    if request.status != RequestStatus.RECEIVED:
        # received -> closed is the only rejection; verified -> closed is an ordinary close.
        raise errors.conflict("illegal_transition", "Identity can be rejected only while it awaits verification.",
                              from_status=request.status, to_status=RequestStatus.CLOSED)
    return request_transition(request=request, to=RequestStatus.CLOSED, actor=actor, action="reject_identity",
                              note=reason, closing_reason=reason)


def request_refuse(*, request: SubjectRequest, actor: str, reason: str) -> SubjectRequest:
    """Refuse the request (manifestly unfounded or excessive, Art. 12(5); an exemption applies) with `reason`."""
    reason = _text(reason, name="reason", max_chars=MAX_REASON_CHARS)
    return request_transition(request=request, to=RequestStatus.REFUSED, actor=actor, action="refuse",
                              note=reason, closing_reason=reason)


def request_close(*, request: SubjectRequest, actor: str, reason: str = "") -> SubjectRequest:
    """Close the request. A reason is needed unless it was completed or refused (which already say why)."""
    done = request.status in (RequestStatus.COMPLETED, RequestStatus.REFUSED)
    if reason or not done:
        reason = _text(reason, name="reason", max_chars=MAX_REASON_CHARS)
    fields = {"closing_reason": reason} if reason and not request.closing_reason else {}
    return request_transition(request=request, to=RequestStatus.CLOSED, actor=actor, action="close", note=reason,
                              **fields)


def _extension_notice(request: SubjectRequest, new_due, reason: str) -> EmailMessage:
    received = deadlines.receipt_date(request.received_at)
    body = (
        f"We received your {request.get_type_display().lower()} request (reference {request.pk}) on "
        f"{received:%d %B %Y}.\n\n"
        f"Under {LAWS[request.regulation]}, we had to answer by {request.due_date:%d %B %Y}. We are extending "
        f"this period once, as the law allows, to {new_due:%d %B %Y}, for this reason:\n\n"
        f"{reason}\n\n"
        f"You will have our answer by {new_due:%d %B %Y} at the latest.\n"
    )
    return EmailMessage(subject=f"Your request {request.pk}: we need more time, until {new_due:%d %B %Y}",
                        body=body, to=[request.contact_email])


def request_extend(*, request: SubjectRequest, actor: str, reason: str) -> SubjectRequest:
    """Extend the due date once (dsr.deadlines), telling the subject why; only while the request is open and
    before its original due date. The notice is e-mailed and kept (`SubjectNotice(kind="extension")`): the
    extension is recorded only if the notice was handed to the mail server."""
    reason = _text(reason, name="reason", max_chars=MAX_REASON_CHARS)
    if request.status not in OPEN:
        raise errors.conflict("request_not_open", f"A {request.status} request cannot be extended.",
                              status=request.status)
    if not request.contact_email:
        raise errors.conflict("no_contact_email", "An extension must be told to the subject, and this request "
                              "has no contact e-mail.")
    now = timezone.now()
    deadlines.extension_check(due_date=request.due_date, already_extended=request.extended_due_date is not None,
                              at=now)
    new_due = deadlines.extended_due_date(regulation=request.regulation, received_at=request.received_at,
                                          other_days=_other_days())
    message = _extension_notice(request, new_due, reason)
    with transaction.atomic():
        # The claim: one extension, even when two operators click at once.
        claimed = SubjectRequest.objects.filter(pk=request.pk, extended_due_date__isnull=True, status__in=OPEN).update(
            extended_due_date=new_due, extension_reason=reason, extension_notified_at=now)
        if not claimed:
            raise errors.conflict("already_extended", "This request was extended, or moved, meanwhile; reload it.")
        SubjectNotice.objects.create(request=request, kind=NOTICE_EXTENSION, to=request.contact_email,
                                     subject_line=message.subject, body=message.body, sent_at=now)
        history_add(request=request, action="extend", actor=actor,
                    note=f"due {request.due_date.isoformat()} -> {new_due.isoformat()}: {reason}")
        # Last, inside the transaction: if the mail server refuses, nothing is recorded and the subject was
        # not told; the operator can try again while the first period runs.
        try:
            message.send(fail_silently=False)
        except OSError as exc:  # smtplib.SMTPException is an OSError
            raise errors.RequestError("notice_not_sent", "The notice to the subject could not be sent; the "
                                      "request was not extended.", {"error": type(exc).__name__},
                                      status_code=503) from exc
    request.refresh_from_db()
    return request
