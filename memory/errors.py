"""The memory app's errors. Codes are stable; README.md lists them."""
from __future__ import annotations

from rest_framework import status

from config.errors import ApplicationError


class MemoryError(ApplicationError):
    code = "memory_error"


def not_found(detail: str = "No such record.", **extra) -> MemoryError:
    return MemoryError("not_found", detail, extra, status_code=status.HTTP_404_NOT_FOUND)


def invalid(code: str, detail: str, **extra) -> MemoryError:
    return MemoryError(code, detail, extra, status_code=status.HTTP_400_BAD_REQUEST)


def conflict(code: str, detail: str, **extra) -> MemoryError:
    return MemoryError(code, detail, extra, status_code=status.HTTP_409_CONFLICT)


def gone(detail: str, **extra) -> MemoryError:
    return MemoryError("forgotten", detail, extra, status_code=status.HTTP_410_GONE)
