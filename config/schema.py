"""The OpenAPI schema (/api/schema/, drf-spectacular) says what the API really answers.

- Every error is the one envelope of `config.errors`, the `Error` component: `{"code", "detail", ...}`
  (extras such as `errors`, `parameter`, `record_ids` depend on the code; README lists the codes).
  `AutoSchema` documents the errors any operation of its kind can give, so that views declare only their
  own (a 409, a 410): 400 everywhere (a malformed body, a bad query parameter, a NUL in any parameter),
  404 everywhere (an unknown id, another tenant's); 401 and 403 where a token is needed, 429 where the
  public rate limit applies; 413 and 415 where a JSON body is read.
- A request body of a `StrictSerializer` refuses unknown fields: its schema says
  `additionalProperties: false`.
- Lists come in an envelope, `{"results": [...]}` (`page_of`).
"""
from __future__ import annotations

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """The error envelope; other members depend on the code."""

    code = serializers.CharField(help_text="A stable code; README.md's Error codes table lists them.")
    detail = serializers.CharField(help_text="What went wrong, for a person.")

    class Meta:
        ref_name = "Error"


def page_of(serializer: type[serializers.Serializer], name: str, **extra: serializers.Field):
    """The schema of a list answer: `{"results": [...], **extra}`."""
    return inline_serializer(name, {"results": serializer(many=True), **extra})


def _is_page(responses) -> bool:
    ok = responses.get(200) if isinstance(responses, dict) else responses
    return isinstance(ok, serializers.Serializer) and isinstance(ok.fields.get("results"), serializers.ListSerializer)


class StrictSerializerExtension(OpenApiSerializerExtension):
    target_class = "config.api.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


class AutoSchema(openapi.AutoSchema):
    def _error_statuses(self) -> list[int]:
        statuses = [400, 404]
        if self.view.get_authenticators():
            statuses += [401, 403]
        else:
            statuses.append(429)
        if self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None:
            statuses += [413, 415]
        return statuses

    def get_operation_id(self) -> str:
        # A list answered in an envelope is still a list (`..._list`, as DRF's own list views), which
        # also keeps `GET /records` apart from `GET /records/{id}` (`..._retrieve`).
        operation_id = super().get_operation_id()
        if self.method == "GET" and operation_id.endswith("_retrieve") and _is_page(self.get_response_serializers()):
            operation_id = operation_id.removesuffix("retrieve") + "list"
        return operation_id

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for status in self._error_statuses():
            if str(status) not in responses:
                responses[str(status)] = self._get_response_for_code(ErrorSerializer, str(status), direction=direction)
        return dict(sorted(responses.items()))
