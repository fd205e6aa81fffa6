"""The drp app's errors. Codes are stable; README.md's "Authorized agents" section lists them.

A DRP client reads `code` (the HTTP status as a string, DRP 0.9.4 section 3.06) and `message`; the stable
string code of this service is `error`. `detail` repeats `message`, so the body is also this service's
error envelope (`config.errors`).
"""
from __future__ import annotations

from rest_framework import status

from config.errors import ApplicationError


class DrpError(ApplicationError):
    code = "drp_error"


def invalid(code: str, detail: str, **extra) -> DrpError:
    return DrpError(code, detail, extra, status_code=status.HTTP_400_BAD_REQUEST)


def forbidden(code: str, detail: str, **extra) -> DrpError:
    return DrpError(code, detail, extra, status_code=status.HTTP_403_FORBIDDEN)


def not_found(detail: str = "No such data rights request.", **extra) -> DrpError:
    return DrpError("unknown_request", detail, extra, status_code=status.HTTP_404_NOT_FOUND)


def conflict(code: str, detail: str, **extra) -> DrpError:
    return DrpError(code, detail, extra, status_code=status.HTTP_409_CONFLICT)
