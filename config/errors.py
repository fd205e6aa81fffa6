"""Errors as the API shows them: JSON with a stable `code` and a human `detail`.

Every app raises its own subclass of `ApplicationError` (see `<app>/errors.py`); this module maps
those and DRF's own exceptions to one JSON shape in one place. Codes are stable strings and are
listed in README.md.
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response


class ApplicationError(Exception):
    """A refusal or failure with a stable code, a human detail and machine-readable extras."""

    code = "error"
    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, code: str | None = None, detail: str = "", extra: dict[str, Any] | None = None,
                 *, status_code: int | None = None):
        self.code = code or self.code
        self.detail = detail or self.code
        self.extra = extra or {}
        if status_code is not None:
            self.status_code = status_code
        super().__init__(f"{self.code}: {self.detail}")

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, **self.extra}


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (drf_exceptions.ParseError, "malformed_json"),
    (drf_exceptions.NotAuthenticated, "not_authenticated"),
    (drf_exceptions.AuthenticationFailed, "authentication_failed"),
    (drf_exceptions.PermissionDenied, "permission_denied"),
    (drf_exceptions.NotFound, "not_found"),
    (drf_exceptions.MethodNotAllowed, "method_not_allowed"),
    (drf_exceptions.NotAcceptable, "not_acceptable"),
    (drf_exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (drf_exceptions.Throttled, "throttled"),
    (drf_exceptions.ValidationError, "invalid"),
]


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {"code": "payload_too_large", "detail": "The request body is larger than this service accepts."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    if not isinstance(exc, drf_exceptions.APIException):
        return None
    code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), "error")
    body: dict[str, Any] = {"code": code}
    if isinstance(exc, drf_exceptions.ValidationError):
        body["detail"] = "The request is not valid; see `errors` for each field."
        body["errors"] = exc.detail
    else:
        body["detail"] = str(exc.detail)
    response = Response(body, status=exc.status_code)
    if getattr(exc, "auth_header", None):
        response["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        response["Retry-After"] = str(int(exc.wait))
    return response


def json_not_found(request, exception=None) -> JsonResponse:
    return JsonResponse({"code": "not_found", "detail": "No such resource."}, status=404)


def json_server_error(request) -> JsonResponse:
    return JsonResponse({"code": "server_error", "detail": "The server failed; nothing was changed."}, status=500)
