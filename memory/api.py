"""The memory API for agent runtimes: write, read, search, forget, confirm-erasure. Views parse,
call one service or selector, and present; the rules live in memory.services and memory.selectors.

Each operation an agent can ask for is one plain `*_answer` function (token and JSON arguments in, `(HTTP status,
JSON body)` out, `ApplicationError` or DRF's `ValidationError` raised for a refusal of the input): the views
below and the MCP tools (`agents_mcp.tools`) both call these, so an agent gets the same checks and the same
answer whichever way it connects."""
from __future__ import annotations

from drf_spectacular.utils import (OpenApiParameter, PolymorphicProxySerializer, extend_schema, extend_schema_field,
                                   inline_serializer)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import StrictCharField, StrictIntegerField, StrictSerializer, role_required
from config.schema import ErrorSerializer, page_of
from memory import errors, selectors, services
from memory.services import fleet
from memory.services.targets import MAX_TARGET_ITEMS
from memory.models import ArtifactKind, DerivedArtifact, ForgetMode, Record, Tier

AgentOnly = role_required("agent")


def tenant_of_token(token, body_tenant: str | None = None):
    """The tenant an agent token acts for; a body naming another tenant is refused (`tenant_mismatch`)."""
    tenant = token.tenant
    if body_tenant is not None and body_tenant != tenant.name:
        raise errors.MemoryError("tenant_mismatch", "This token belongs to another tenant.",
                                 status_code=status.HTTP_403_FORBIDDEN)
    return tenant


def _tenant_of(request, body_tenant: str | None = None):
    return tenant_of_token(request.auth, body_tenant)


class RecordOut(serializers.ModelSerializer):
    scope = serializers.CharField(source="scope.path")
    subject = serializers.CharField(source="subject.ref", allow_null=True, default=None)
    content_class = serializers.CharField(source="content_class.name")
    locked_until = serializers.DateTimeField(source="retained_until", allow_null=True)

    class Meta:
        model = Record
        fields = ["id", "scope", "subject", "content_class", "content", "commitment", "tier", "created_at",
                  "locked_until", "held"]


class ArtifactOut(serializers.ModelSerializer):
    derived_from = serializers.SerializerMethodField()

    class Meta:
        model = DerivedArtifact
        fields = ["id", "kind", "content", "holder", "created_at", "derived_from"]

    def get_derived_from(self, artifact) -> list[int]:
        return sorted(link.source_id for link in artifact.lineage.all())


class SearchHitOut(serializers.Serializer):
    record = RecordOut()
    score = serializers.FloatField(required=False, help_text="Similarity, in `similar` mode only.")


class HandleOut(serializers.Serializer):
    sequence = serializers.IntegerField()
    tombstone_id = serializers.UUIDField(allow_null=True)


class ForgetRecordOut(serializers.Serializer):
    record_id = serializers.IntegerField()
    outcome = serializers.ChoiceField(choices=["hidden", "redacted", "deleted", "refused"])
    reason = serializers.DictField(required=False, help_text="A refusal's reason: code, detail, authority, "
                                   "locked_until, blocking (rules and holds), permitted_modes.")


class ForgetOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=["forgotten", "partial", "refused"])
    results = ForgetRecordOut(many=True)
    erasure_pending = serializers.BooleanField()
    handle = HandleOut()


class WriteIn(StrictSerializer):
    tenant = StrictCharField(required=False)
    scope = StrictCharField(required=False, max_length=2000)
    subject = StrictCharField(required=False, allow_null=True, max_length=200)
    content_class = StrictCharField(required=False, max_length=100)
    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    tier = serializers.ChoiceField(choices=Tier.choices, required=False, default=Tier.HOT)
    tags = serializers.ListField(child=StrictCharField(max_length=100), required=False, max_length=20)
    derived_from = serializers.ListField(child=StrictIntegerField(min_value=1), required=False, max_length=1000)
    kind = serializers.ChoiceField(choices=ArtifactKind.choices, required=False)
    holder = StrictCharField(required=False, allow_blank=True, max_length=200)

    def validate(self, data):
        if "derived_from" in data:
            if "kind" not in data:
                raise serializers.ValidationError({"kind": ["A derived artifact needs its kind."]})
        else:
            missing = [f for f in ("scope", "content_class") if f not in data]
            if missing:
                raise serializers.ValidationError({f: ["This field is required."] for f in missing})
        return data


def write_answer(*, token, data) -> tuple[int, dict]:
    """Write a record, or a derived artifact when `derived_from` is given: 201 and the written thing."""
    body = WriteIn(data=data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    tenant = tenant_of_token(token, data.get("tenant"))
    if "derived_from" in data:
        artifact = services.artifact_write(tenant=tenant, kind=data["kind"], source_ids=data["derived_from"],
                                           content=data["content"], holder=data.get("holder", ""))
        return status.HTTP_201_CREATED, ArtifactOut(artifact).data
    record = services.record_write(
        tenant=tenant, scope_path=data["scope"], content_class_name=data["content_class"],
        content=data["content"], subject_ref=data.get("subject"), tier=data["tier"], tags=data.get("tags"),
    )
    return status.HTTP_201_CREATED, RecordOut(record).data


def read_answer(*, token, record_id: int) -> tuple[int, dict]:
    """One record of the token's tenant: 200, or 404 `not_found` / 410 `forgotten`."""
    return status.HTTP_200_OK, RecordOut(selectors.record_read(tenant=tenant_of_token(token), record_id=record_id)).data


def search_answer(*, token, q, mode: str = "keyword", limit=10) -> tuple[int, dict]:
    """The token's tenant's visible records matching `q`: by words (`keyword`) or by similarity (`similar`,
    with a score). `q` and `limit` are checked by the selectors (`invalid_query`, `invalid_limit`)."""
    tenant = tenant_of_token(token)
    # One serializer for all the hits (`many=True`): a serializer per record builds its fields each time, which
    # was half of the API's time over the selector's (bench/README.md, "bench_search.py").
    if mode == "keyword":
        records = selectors.records_search(tenant=tenant, q=q, limit=limit)
        hits = [{"record": data} for data in RecordOut(records, many=True).data]
    elif mode == "similar":
        similar = selectors.records_similar(tenant=tenant, q=q, limit=limit)
        hits = [{"record": data, "score": round(h.score, 6)}
                for h, data in zip(similar, RecordOut([h.record for h in similar], many=True).data)]
    else:
        raise errors.invalid("invalid_parameter", "`mode` must be `keyword` or `similar`.", parameter="mode")
    return status.HTTP_200_OK, {"results": hits}


class RecordsView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(request=WriteIn, responses={
        201: PolymorphicProxySerializer("Written", serializers=[RecordOut, ArtifactOut], resource_type_field_name=None),
        409: ErrorSerializer})
    def post(self, request):
        code, body = write_answer(token=request.auth, data=request.data)
        return Response(body, status=code)

    @extend_schema(parameters=[OpenApiParameter("scope", str, required=True),
                               OpenApiParameter("limit", int), OpenApiParameter("after", int)],
                   responses={200: page_of(RecordOut, "RecordPage", next_after=serializers.IntegerField(
                       allow_null=True, help_text="`after` for the next page; null when this one is empty."))})
    def get(self, request):
        params = _Query(request.query_params)
        records = selectors.records_in_scope(tenant=_tenant_of(request), scope_path=params.str("scope"),
                                             limit=params.int("limit", 100), after=params.int("after", None))
        next_after = records[-1].pk if records else None
        return Response({"results": RecordOut(records, many=True).data, "next_after": next_after})


class _Query:
    """Query-string parameters, typed; a bad one is 400 `invalid_parameter`."""

    def __init__(self, params):
        self.params = params

    def str(self, name: str) -> str:
        value = self.params.get(name)
        if value is None:
            raise errors.invalid("invalid_parameter", f"The query parameter `{name}` is required.", parameter=name)
        return value

    def int(self, name: str, default):
        value = self.params.get(name)
        if value is None:
            return default
        if not value.isdigit() or len(value) > 18:
            raise errors.invalid("invalid_parameter", f"`{name}` must be a positive integer.", parameter=name)
        return int(value)


class RecordView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(responses={200: RecordOut, 410: ErrorSerializer})
    def get(self, request, record_id: int):
        code, body = read_answer(token=request.auth, record_id=record_id)
        return Response(body, status=code)


class RecordArtifactsView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(responses={200: page_of(ArtifactOut, "ArtifactPage")})
    def get(self, request, record_id: int):
        artifacts = selectors.artifacts_for_source(tenant=_tenant_of(request), record_id=record_id)
        return Response({"results": ArtifactOut(artifacts, many=True).data})


class SearchView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(parameters=[OpenApiParameter("q", str, required=True),
                               OpenApiParameter("mode", str, enum=["keyword", "similar"]),
                               OpenApiParameter("limit", int)],
                   responses={200: page_of(SearchHitOut, "SearchPage")})
    def get(self, request):
        params = _Query(request.query_params)
        q, limit = params.str("q"), params.int("limit", 10)
        code, body = search_answer(token=request.auth, q=q, mode=request.query_params.get("mode", "keyword"),
                                   limit=limit)
        return Response(body, status=code)


def _one_or_many(item: dict) -> dict:
    return {"oneOf": [item, {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_TARGET_ITEMS}]}


@extend_schema_field({
    "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
    "description": "Exactly one of these.",
    "properties": {
        "record_id": _one_or_many({"type": "integer", "minimum": 1}),
        "scope": {"type": "string", "description": "A scope path such as `user:42/session:7`; its descendants too."},
        "tag": {"type": "string", "minLength": 1, "maxLength": 100},
        "subject": _one_or_many({"type": "string", "minLength": 1, "maxLength": 200}),
    },
})
class TargetField(serializers.JSONField):
    """What a forget aims at; `ForgetTarget.parse` checks it and says why (`invalid_target`)."""


@extend_schema_field({
    "type": "object", "minProperties": 1, "additionalProperties": False,
    "description": "The handle a forget answered, or a part of it.",
    "properties": {"sequence": {"type": "integer", "minimum": 1},
                   "tombstone_id": {"type": "string", "format": "uuid"}},
})
class HandleField(serializers.JSONField):
    """Checked by `forget_event_get` (`invalid_handle`)."""


class ForgetIn(StrictSerializer):
    target = TargetField()
    mode = serializers.ChoiceField(choices=ForgetMode.choices)
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000, default="")
    tenant = StrictCharField(required=False)


class ForgetView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(request=ForgetIn, responses={200: ForgetOut, 409: PolymorphicProxySerializer(
        "ForgetRefused", serializers=[ForgetOut, ErrorSerializer], resource_type_field_name=None)})
    def post(self, request):
        code, body = forget_answer(token=request.auth, data=request.data, path="api")
        return Response(body, status=code)


def forget_answer(*, token, data, path: str) -> tuple[int, dict]:
    """Forget a target's records (the one guarded path): 200 with each record's outcome and the handle, or 409
    when every record was refused, each refusal with its reason. `path` says how it was asked for, on the
    forget event and in the tombstone (`api`, `mcp`)."""
    body = ForgetIn(data=data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    tenant = tenant_of_token(token, data.get("tenant"))
    result = services.records_forget(
        tenant=tenant, target=services.ForgetTarget.parse(data["target"]), mode=data["mode"],
        reason=data["reason"], actor=f"token:{token.prefix}", path=path,
        public_actor=f"token:{token.pk}",  # the token's id: its characters never go in a tombstone
    )
    code = status.HTTP_409_CONFLICT if result.status == "refused" else status.HTTP_200_OK
    return code, result.as_api()


class ConfirmIn(StrictSerializer):
    handle = HandleField()
    tenant = StrictCharField(required=False)


class ConfirmErasureView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(request=ConfirmIn, responses={200: inline_serializer("ConfirmOut", {
        "erased": serializers.BooleanField(),
        "handle": HandleOut(),
        "evidence": serializers.ListField(child=serializers.DictField()),
        "not_covered": serializers.ListField(child=serializers.DictField()),
    }), 409: inline_serializer("ConfirmGapsOut", {
        "code": serializers.CharField(), "detail": serializers.CharField(), "erased": serializers.BooleanField(),
        "handle": HandleOut(),
        "evidence": serializers.ListField(child=serializers.DictField()),
        "not_covered": serializers.ListField(child=serializers.DictField()),
        "gaps": serializers.ListField(child=serializers.DictField()),
    })})
    def post(self, request):
        code, body = confirm_answer(token=request.auth, data=request.data)
        return Response(body, status=code)


def confirm_answer(*, token, data) -> tuple[int, dict]:
    """Read a forget back through every read path: 200 `erased` with the evidence, or 409 with the gaps."""
    body = ConfirmIn(data=data)
    body.is_valid(raise_exception=True)
    tenant = tenant_of_token(token, body.validated_data.get("tenant"))
    result = services.erasure_confirm(tenant=tenant, handle=body.validated_data["handle"])
    return (status.HTTP_200_OK if result.erased else status.HTTP_409_CONFLICT), result.as_api()


class FleetNoticeOut(serializers.Serializer):
    id = serializers.IntegerField()
    artifact_id = serializers.IntegerField()
    holder = serializers.CharField()
    source_ids = serializers.ListField(child=serializers.IntegerField())
    mode = serializers.CharField()
    notified_at = serializers.DateTimeField()
    deadline = serializers.DateTimeField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    # The follow-up tombstone that signed the acknowledgement (null until acknowledged).
    closing_tombstone_id = serializers.UUIDField(allow_null=True)


class FleetNoticesView(APIView):
    """For another agent holding copies: what it must forget (`?holder=`)."""

    permission_classes = [AgentOnly]

    @extend_schema(parameters=[OpenApiParameter("holder", str, required=True)],
                   responses={200: page_of(FleetNoticeOut, "FleetNoticePage")})
    def get(self, request):
        notices = fleet.fleet_notices_pending(tenant=_tenant_of(request), holder=_Query(request.query_params).str("holder"))
        return Response({"results": FleetNoticeOut(notices[:MAX_NOTICES], many=True).data})


class FleetNoticeAckView(APIView):
    permission_classes = [AgentOnly]

    @extend_schema(request=None, responses={200: FleetNoticeOut})
    def post(self, request, notice_id: int):
        notice = fleet.fleet_notice_acknowledge(tenant=_tenant_of(request), notice_id=notice_id,
                                                actor=f"token:{request.auth.pk}")
        return Response(FleetNoticeOut(notice).data)


MAX_NOTICES = 500
