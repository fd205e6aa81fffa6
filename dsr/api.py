"""The subject-request API for operators (and, read-only, for auditors and legal): receive a request,
verify or reject the subject's identity, extend the due date, read where a request stands.

Views parse, call one service or selector, and present; the rules live in dsr.services and dsr.selectors.
"""
from __future__ import annotations

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import StrictCharField, StrictSerializer, role_required
from config.schema import ErrorSerializer
from dsr import errors, selectors, services
from dsr.services import workflow
from dsr.models import Channel, ConflictStatus, Regulation, RequestStatus, RequestTransition, RequestType

OperatorOnly = role_required("operator")
Readers = role_required("operator", "auditor", "legal")


def _actor(request) -> str:
    return f"token:{request.auth.prefix}:{request.auth.role}"


class StrictDateTimeField(serializers.DateTimeField):
    """An ISO 8601 string with its UTC offset: a deadline must not depend on a guessed time zone."""

    def to_internal_value(self, value):
        if not isinstance(value, str):
            raise serializers.ValidationError("Expected an ISO 8601 date and time string.")
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
        if parsed is None:
            raise serializers.ValidationError("Expected an ISO 8601 date and time, e.g. 2026-01-31T09:30:00Z.")
        if parsed.utcoffset() is None:
            raise serializers.ValidationError("Give the UTC offset (Z or +hh:mm).")
        return parsed


class StrictEmailField(serializers.EmailField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class RequestIn(StrictSerializer):
    subject = StrictCharField(max_length=200)
    type = serializers.ChoiceField(choices=RequestType.choices)
    regulation = serializers.ChoiceField(choices=Regulation.choices)
    channel = serializers.ChoiceField(choices=Channel.choices)
    received_at = StrictDateTimeField(required=False)
    contact_email = StrictEmailField(required=False, allow_blank=True, max_length=254, default="")


class MethodIn(StrictSerializer):
    method = StrictCharField(max_length=200)


class ReasonIn(StrictSerializer):
    reason = StrictCharField(max_length=2000)


class ExtensionOut(serializers.Serializer):
    extended_due_date = serializers.DateField()
    reason = serializers.CharField()
    notified_at = serializers.DateTimeField()


class IdentityOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=["pending", "verified", "rejected"])
    verified_by = serializers.CharField(allow_blank=True)
    method = serializers.CharField(allow_blank=True)
    verified_at = serializers.DateTimeField(allow_null=True)


class ProgressOut(serializers.Serializer):
    planned = serializers.IntegerField()
    done = serializers.IntegerField()
    refused = serializers.IntegerField()
    deferred = serializers.IntegerField()
    pending = serializers.IntegerField()


class HistoryOut(serializers.ModelSerializer):
    class Meta:
        model = RequestTransition
        fields = ["action", "from_status", "to_status", "actor", "note", "at"]


class RequestOut(serializers.Serializer):
    id = serializers.IntegerField()
    subject = serializers.CharField()
    type = serializers.ChoiceField(choices=RequestType.choices)
    regulation = serializers.ChoiceField(choices=Regulation.choices)
    channel = serializers.ChoiceField(choices=Channel.choices)
    contact_email = serializers.EmailField(allow_blank=True)
    status = serializers.ChoiceField(choices=RequestStatus.choices)
    received_at = serializers.DateTimeField()
    due_date = serializers.DateField(help_text="The date that holds now: the extended one, if extended.")
    original_due_date = serializers.DateField()
    extension = ExtensionOut(allow_null=True)
    identity_verification = IdentityOut()
    closing_reason = serializers.CharField(allow_blank=True)
    progress = ProgressOut()
    tombstone_ids = serializers.ListField(child=serializers.UUIDField())
    open_conflicts = serializers.IntegerField()
    history = HistoryOut(many=True)
    created_at = serializers.DateTimeField()


def _present(subject_request) -> dict:
    r = subject_request
    history = list(r.history.all())
    progress = selectors.request_progress(r)
    if r.identity_verified_at is not None:
        identity = "verified"
    elif any(row.action == "reject_identity" for row in history):
        identity = "rejected"
    else:
        identity = "pending"
    return {
        "id": r.pk, "subject": r.subject.ref, "type": r.type, "regulation": r.regulation, "channel": r.channel,
        "contact_email": r.contact_email, "status": r.status, "received_at": r.received_at,
        "due_date": r.effective_due_date, "original_due_date": r.due_date,
        "extension": None if r.extended_due_date is None else {
            "extended_due_date": r.extended_due_date, "reason": r.extension_reason,
            "notified_at": r.extension_notified_at},
        "identity_verification": {"status": identity, "verified_by": r.identity_verified_by,
                                  "method": r.identity_method, "verified_at": r.identity_verified_at},
        "closing_reason": r.closing_reason,
        "progress": progress.as_api(),
        "tombstone_ids": progress.tombstone_ids,
        "open_conflicts": r.conflicts.filter(status=ConflictStatus.OPEN).count(),
        "history": history,
        "created_at": r.created_at,
    }


def _answer(request, subject_request, code=status.HTTP_200_OK) -> Response:
    fresh = selectors.request_get(tenant=request.auth.tenant, request_id=subject_request.pk)
    return Response(RequestOut(_present(fresh)).data, status=code)


class RequestsView(APIView):
    permission_classes = [OperatorOnly]

    @extend_schema(request=RequestIn, responses={201: RequestOut})
    def post(self, request):
        body = RequestIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        created = services.request_create(
            tenant=request.auth.tenant, subject_ref=data["subject"], type=data["type"],
            regulation=data["regulation"], channel=data["channel"], received_at=data.get("received_at"),
            contact_email=data["contact_email"], actor=_actor(request),
        )
        return _answer(request, created, status.HTTP_201_CREATED)


class RequestView(APIView):
    permission_classes = [Readers]

    @extend_schema(responses={200: RequestOut})
    def get(self, request, request_id: int):
        subject_request = selectors.request_get(tenant=request.auth.tenant, request_id=request_id)
        return Response(RequestOut(_present(subject_request)).data)


class _RequestActionView(APIView):
    """POST /requests/{id}/<action>: look the request up (404 for another tenant's), validate, act."""

    permission_classes = [OperatorOnly]
    body_class: type[StrictSerializer]

    def act(self, subject_request, actor: str, **body):
        raise NotImplementedError

    def post(self, request, request_id: int):
        subject_request = selectors.request_get(tenant=request.auth.tenant, request_id=request_id)
        body = self.body_class(data=request.data)
        body.is_valid(raise_exception=True)
        return _answer(request, self.act(subject_request, _actor(request), **body.validated_data))


class VerifyIdentityView(_RequestActionView):
    body_class = MethodIn

    @extend_schema(request=MethodIn, responses={200: RequestOut, 409: ErrorSerializer})
    def post(self, request, request_id: int):
        return super().post(request, request_id)

    def act(self, subject_request, actor, *, method):
        return services.request_verify_identity(request=subject_request, actor=actor, method=method)


class RejectIdentityView(_RequestActionView):
    body_class = ReasonIn

    @extend_schema(request=ReasonIn, responses={200: RequestOut, 409: ErrorSerializer})
    def post(self, request, request_id: int):
        return super().post(request, request_id)

    def act(self, subject_request, actor, *, reason):
        return services.request_reject_identity(request=subject_request, actor=actor, reason=reason)


class ExtendView(_RequestActionView):
    body_class = ReasonIn

    @extend_schema(request=ReasonIn, responses={200: RequestOut, 409: ErrorSerializer, 503: ErrorSerializer})
    def post(self, request, request_id: int):
        return super().post(request, request_id)

    def act(self, subject_request, actor, *, reason):
        return services.request_extend(request=subject_request, actor=actor, reason=reason)


class EmptyIn(StrictSerializer):
    """No fields: an action with nothing to say."""


class StartView(_RequestActionView):
    """Start the erasure (or access, restriction) workflow of a verified request; it runs on a worker."""

    body_class = EmptyIn

    @extend_schema(request=EmptyIn, responses={200: RequestOut, 409: ErrorSerializer})
    def post(self, request, request_id: int):
        return super().post(request, request_id)

    def act(self, subject_request, actor):
        return workflow.workflow_start(request=subject_request, actor=actor)


class ExportView(APIView):
    """The JSON export of an access request: the subject's live data, never forgotten data."""

    permission_classes = [Readers]

    @extend_schema(responses={200: dict})
    def get(self, request, request_id: int):
        subject_request = selectors.request_get(tenant=request.auth.tenant, request_id=request_id)
        if subject_request.export is None:
            raise errors.RequestError("no_export", "This request has no export (not an access request, or not ready).",
                                      status_code=status.HTTP_404_NOT_FOUND)
        response = Response(subject_request.export)
        response["Content-Disposition"] = f'attachment; filename="access-request-{subject_request.pk}.json"'
        return response
