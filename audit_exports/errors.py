"""The audit_exports app's errors. Codes are stable; README.md ("Audit exports") lists them."""
from __future__ import annotations

from rest_framework import status

from config.errors import ApplicationError


class ExportError(ApplicationError):
    code = "export_error"


def invalid(code: str, detail: str, **extra) -> ExportError:
    return ExportError(code, detail, extra, status_code=status.HTTP_400_BAD_REQUEST)


def not_found(code: str, detail: str, **extra) -> ExportError:
    return ExportError(code, detail, extra, status_code=status.HTTP_404_NOT_FOUND)
