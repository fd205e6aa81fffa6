"""No table of its own: the exports read dsr, retention and memory's rows (audit_exports.selectors).

`AuditExport` is a proxy model only so that the admin has a screen to hang the export page on (a ModelAdmin's
`get_urls()`, behind `admin_site.admin_view()`), listed on the admin index, with a view permission that
dsr.roles gives every role (VIEWABLE). Only "view" is declared: nothing here is added, changed or deleted.
"""
from __future__ import annotations

from dsr.models import SubjectRequest


class AuditExport(SubjectRequest):
    class Meta:
        proxy = True
        verbose_name = "audit export"
        verbose_name_plural = "audit exports"
        default_permissions = ("view",)
