"""`GET /api/v1/audit/exports/<kind>.<csv|json>?from=YYYY-MM-DD&to=YYYY-MM-DD`: an audit export of the
token's tenant, streamed.

Readers: auditor tokens, and operator and legal tokens too (every role reads every screen of the admin, where
the same rows are shown; dsr.roles); agent tokens are refused (403 `permission_denied`). A token sees only its
tenant's rows, as everywhere in the API.
"""
from __future__ import annotations

import logging

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from audit_exports import errors
from audit_exports.selectors import EXPORTS, export_get, period_parse
from audit_exports.writers import FORMATS, export_response
from config.api import role_required

logger = logging.getLogger(__name__)

Readers = role_required("auditor", "operator", "legal")
PARAMETERS = {"from", "to"}
# Two dates and their names fit in 40 characters; anything much longer is not a request for an export.
MAX_QUERY_CHARS = 1024


def _one(query, name: str) -> str | None:
    values = query.getlist(name)
    if len(values) > 1:
        raise errors.invalid("invalid_period", f"`{name}` is given more than once.", parameter=name)
    return values[0] if values else None


class ExportView(APIView):
    permission_classes = [Readers]

    @extend_schema(
        operation_id="audit_export",
        summary="An audit export (CSV or JSON), streamed",
        description=("`name` is `<kind>.<format>`: kinds " + ", ".join(f"`{k}`" for k in EXPORTS)
                     + "; formats `csv`, `json`. `from` and `to` are UTC dates, both inclusive."),
        parameters=[
            OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="e.g. requests.csv"),
            OpenApiParameter("from", OpenApiTypes.DATE, OpenApiParameter.QUERY, required=False),
            OpenApiParameter("to", OpenApiTypes.DATE, OpenApiParameter.QUERY, required=False),
        ],
        responses={(200, "text/csv"): OpenApiTypes.STR, (200, "application/json"): OpenApiTypes.OBJECT},
    )
    def get(self, request, name: str):
        kind, dot, fmt = name.rpartition(".")
        export = export_get(kind if dot else name)
        if fmt not in FORMATS or not dot:
            raise errors.not_found("unknown_format", "The formats are: csv, json (e.g. requests.csv).")
        if len(request.META.get("QUERY_STRING", "")) > MAX_QUERY_CHARS:
            raise errors.invalid("query_too_long", f"The query string is over {MAX_QUERY_CHARS} characters.")
        query = request.query_params
        unknown = sorted(set(query) - PARAMETERS)
        if unknown:
            raise errors.invalid("unknown_parameter", "Only `from` and `to` are read.", parameters=unknown[:10])
        period = period_parse(start=_one(query, "from"), end=_one(query, "to"))
        tenant = request.auth.tenant
        logger.info("audit export %s.%s of tenant %s (%s..%s) by token %s", export.kind, fmt, tenant.pk,
                    period.start, period.end, request.auth.prefix)
        return export_response(export=export, fmt=fmt, tenant=tenant, period=period)
