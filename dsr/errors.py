"""The dsr app's errors. Codes are stable; README.md lists them."""
from __future__ import annotations

from rest_framework import status

from config.errors import ApplicationError


class RequestError(ApplicationError):
    code = "request_error"


def invalid(code: str, detail: str, **extra) -> RequestError:
    return RequestError(code, detail, extra, status_code=status.HTTP_400_BAD_REQUEST)


def not_found(detail: str = "No such request.", **extra) -> RequestError:
    return RequestError("not_found", detail, extra, status_code=status.HTTP_404_NOT_FOUND)


def conflict(code: str, detail: str, **extra) -> RequestError:
    return RequestError(code, detail, extra, status_code=status.HTTP_409_CONFLICT)
