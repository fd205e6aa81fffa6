"""The alerts app's errors. Codes are stable; README.md ("Failure alerts") lists them."""
from __future__ import annotations

from rest_framework import status

from config.errors import ApplicationError


class AlertsError(ApplicationError):
    code = "alerts_error"


def invalid(code: str, detail: str, **extra) -> AlertsError:
    return AlertsError(code, detail, extra, status_code=status.HTTP_400_BAD_REQUEST)
