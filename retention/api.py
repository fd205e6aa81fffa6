"""Legal's levers over the API: content classes, retention rules, legal holds."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api import StrictCharField, StrictIntegerField, StrictSerializer, role_required
from config.schema import ErrorSerializer, page_of
from memory.models import Scope
from memory.services.scopes import scope_path_parse
from memory.subjects import subject_find
from retention import errors, services
from retention.models import ContentClass, LegalHold, RetentionRule, RuleKind, RuleMode, RuleProtects

LegalOnly = role_required("legal")
LegalOrReader = role_required("legal", "operator", "auditor")
MAX_ID = 2**63 - 1


def _actor(request) -> str:
    return f"token:{request.auth.prefix}:{request.auth.role}"


class _LegalView(APIView):
    def get_permissions(self):
        return [(LegalOrReader if self.request.method == "GET" else LegalOnly)()]


def _owned(model, tenant, pk, what: str):
    obj = model.objects.filter(tenant=tenant, pk=pk).first() if 0 < pk <= MAX_ID else None
    if obj is None:
        raise errors.not_found(f"No such {what}.")
    return obj


class ContentClassOut(serializers.ModelSerializer):
    class Meta:
        model = ContentClass
        fields = ["id", "name", "description", "created_at"]


class ContentClassIn(StrictSerializer):
    name = StrictCharField(max_length=100)
    description = StrictCharField(required=False, allow_blank=True, max_length=2000, default="")


class ContentClassesView(_LegalView):
    @extend_schema(responses={200: page_of(ContentClassOut, "ContentClassPage")})
    def get(self, request):
        classes = ContentClass.objects.filter(tenant=request.auth.tenant).order_by("name")
        return Response({"results": ContentClassOut(classes, many=True).data})

    @extend_schema(request=ContentClassIn, responses={201: ContentClassOut, 409: ErrorSerializer})
    def post(self, request):
        body = ContentClassIn(data=request.data)
        body.is_valid(raise_exception=True)
        created = services.content_class_create(tenant=request.auth.tenant, actor=_actor(request),
                                                **body.validated_data)
        return Response(ContentClassOut(created).data, status=status.HTTP_201_CREATED)


class RuleOut(serializers.ModelSerializer):
    content_class = serializers.CharField(source="content_class.name")

    class Meta:
        model = RetentionRule
        fields = ["id", "content_class", "kind", "duration_days", "authority", "mode", "protects", "created_at",
                  "retired_at"]


class RuleIn(StrictSerializer):
    content_class = StrictCharField(max_length=100)
    kind = serializers.ChoiceField(choices=RuleKind.choices)
    duration_days = StrictIntegerField(min_value=1, max_value=services.MAX_DURATION_DAYS)
    authority = StrictCharField(max_length=200)
    mode = serializers.ChoiceField(choices=RuleMode.choices, default=RuleMode.GOVERNANCE)
    protects = serializers.ChoiceField(choices=RuleProtects.choices, default=RuleProtects.EXISTENCE)


class RulesView(_LegalView):
    @extend_schema(responses={200: page_of(RuleOut, "RulePage")})
    def get(self, request):
        rules = RetentionRule.objects.filter(tenant=request.auth.tenant).select_related("content_class").order_by("pk")
        return Response({"results": RuleOut(rules, many=True).data})

    @extend_schema(request=RuleIn, responses={201: RuleOut})
    def post(self, request):
        body = RuleIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        tenant = request.auth.tenant
        content_class = ContentClass.objects.filter(tenant=tenant, name=data.pop("content_class")).first()
        if content_class is None:
            raise errors.invalid("unknown_content_class", "No such content class.")
        rule = services.rule_create(tenant=tenant, content_class=content_class, actor=_actor(request), **data)
        return Response(RuleOut(rule).data, status=status.HTTP_201_CREATED)


class RuleChangeIn(StrictSerializer):
    duration_days = StrictIntegerField(min_value=1, max_value=services.MAX_DURATION_DAYS)
    justification = StrictCharField(max_length=2000)


class RuleView(_LegalView):
    @extend_schema(responses={200: RuleOut})
    def get(self, request, rule_id: int):
        return Response(RuleOut(_owned(RetentionRule, request.auth.tenant, rule_id, "rule")).data)

    @extend_schema(request=RuleChangeIn, responses={200: RuleOut, 409: ErrorSerializer})
    def patch(self, request, rule_id: int):
        rule = _owned(RetentionRule, request.auth.tenant, rule_id, "rule")
        body = RuleChangeIn(data=request.data)
        body.is_valid(raise_exception=True)
        rule = services.rule_change_duration(rule=rule, actor=_actor(request), **body.validated_data)
        return Response(RuleOut(rule).data)


class JustificationIn(StrictSerializer):
    justification = StrictCharField(max_length=2000)


class RuleRetireView(_LegalView):
    @extend_schema(request=JustificationIn, responses={200: RuleOut, 409: ErrorSerializer})
    def post(self, request, rule_id: int):
        rule = _owned(RetentionRule, request.auth.tenant, rule_id, "rule")
        body = JustificationIn(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(RuleOut(services.rule_retire(rule=rule, actor=_actor(request), **body.validated_data)).data)


class HoldOut(serializers.ModelSerializer):
    subject = serializers.CharField(source="subject.ref", default=None, allow_null=True)
    content_class = serializers.CharField(source="content_class.name", default=None, allow_null=True)
    scope = serializers.CharField(source="scope.path", default=None, allow_null=True)
    record_ids = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active")

    class Meta:
        model = LegalHold
        fields = ["id", "matter", "authority", "placed_by", "placed_at", "subject", "content_class", "scope",
                  "record_ids", "active", "released_at", "released_by", "release_reason"]

    def get_record_ids(self, hold) -> list[int]:
        return sorted(link.record_id for link in hold.listed_records.all())


class HoldIn(StrictSerializer):
    matter = StrictCharField(max_length=200)
    authority = StrictCharField(required=False, allow_blank=True, max_length=200, default="")
    subject = StrictCharField(required=False, max_length=200)
    content_class = StrictCharField(required=False, max_length=100)
    scope = StrictCharField(required=False, max_length=2000)
    record_ids = serializers.ListField(child=StrictIntegerField(min_value=1, max_value=MAX_ID), required=False,
                                       max_length=10_000, allow_empty=False)


class HoldsView(_LegalView):
    def _holds(self, request):
        return (LegalHold.objects.filter(tenant=request.auth.tenant)
                .select_related("subject", "content_class", "scope").prefetch_related("listed_records"))

    @extend_schema(responses={200: page_of(HoldOut, "HoldPage")})
    def get(self, request):
        return Response({"results": HoldOut(self._holds(request).order_by("pk"), many=True).data})

    @extend_schema(request=HoldIn, responses={201: HoldOut})
    def post(self, request):
        body = HoldIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = request.auth.tenant
        lookups = {
            "subject": lambda v: subject_find(tenant=tenant, ref=v),
            "content_class": lambda v: ContentClass.objects.filter(tenant=tenant, name=v).first(),
            "scope": lambda v: Scope.objects.filter(tenant=tenant, path="/".join(scope_path_parse(v))).first(),
        }
        targets = {}
        for name, lookup in lookups.items():
            if name in data:
                targets[name] = lookup(data[name])
                if targets[name] is None:
                    raise errors.not_found(f"No such {name.replace('_', ' ')}.", **{name: data[name]})
        hold = services.hold_place(tenant=tenant, matter=data["matter"], authority=data["authority"],
                                   actor=_actor(request), record_ids=data.get("record_ids"), **targets)
        return Response(HoldOut(self._holds(request).get(pk=hold.pk)).data, status=status.HTTP_201_CREATED)


class ReleaseIn(StrictSerializer):
    reason = StrictCharField(max_length=2000)


class HoldReleaseView(_LegalView):
    @extend_schema(request=ReleaseIn, responses={200: HoldOut, 409: ErrorSerializer})
    def post(self, request, hold_id: int):
        hold = _owned(LegalHold, request.auth.tenant, hold_id, "hold")
        body = ReleaseIn(data=request.data)
        body.is_valid(raise_exception=True)
        services.hold_release(hold=hold, actor=_actor(request), reason=body.validated_data["reason"])
        return Response(HoldOut(LegalHold.objects.prefetch_related("listed_records").get(pk=hold.pk)).data)
