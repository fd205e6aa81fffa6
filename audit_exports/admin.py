"""The admin's export page: Audit exports on the admin index (`/admin/audit_exports/auditexport/`).

A form (kind, format, period, tenant or every tenant) submitted by GET downloads the export, streamed by the
same selectors and writer as the API. Every role may use it (the view permission of `AuditExport`, given to
every role by dsr.roles); staff see every tenant in the admin, so the export may cover them all.

No "Export selected" action on the request queue: an action there would be offered to auditors, whose screens
offer none (an action column reads as a lever; tests/admin/test_roles.py), and it would have dsr's admin
depend on this app, which depends on dsr. The page exports a period instead, which is what an audit asks for.
"""
from __future__ import annotations

import logging

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.urls import path

from audit_exports.errors import ExportError
from audit_exports.models import AuditExport
from audit_exports.selectors import EXPORTS, export_get, period_parse
from audit_exports.writers import FORMATS, export_response
from config.admin_pages import page_render
from memory.models import Tenant

logger = logging.getLogger(__name__)


class ExportForm(forms.Form):
    kind = forms.ChoiceField(choices=[(e.kind, e.title) for e in EXPORTS.values()], label="Export")
    format = forms.ChoiceField(choices=[(f, f.upper()) for f in FORMATS], initial="csv")
    start = forms.CharField(required=False, max_length=10, label="From (UTC date, inclusive)",
                            widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.CharField(required=False, max_length=10, label="To (UTC date, inclusive)",
                          widget=forms.DateInput(attrs={"type": "date"}))
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"), required=False,
                                    empty_label="Every tenant")

    def clean(self):
        data = super().clean()
        try:
            data["period"] = period_parse(start=data.get("start"), end=data.get("end"))
        except ExportError as exc:
            self.add_error("end" if exc.extra.get("parameter") == "to" else "start", f"{exc.detail} ({exc.code})")
        return data


@admin.register(AuditExport)
class AuditExportAdmin(admin.ModelAdmin):
    actions = None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        # One page: the "changelist" URL, which the admin index links to.
        opts = self.model._meta
        return [path("", self.admin_site.admin_view(self.export_view),
                     name=f"{opts.app_label}_{opts.model_name}_changelist")]

    def export_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = ExportForm(request.GET if "kind" in request.GET else None)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            export = export_get(data["kind"])
            logger.info("audit export %s.%s of %s (%s..%s) by admin:%s", export.kind, data["format"],
                        data["tenant"].pk if data["tenant"] else "every tenant", data["period"].start,
                        data["period"].end, request.user.get_username())
            return export_response(export=export, fmt=data["format"], tenant=data["tenant"], period=data["period"])
        return page_render(self, request, "admin/ledger/audit_export.html", title="Audit exports", form=form,
                           exports=EXPORTS.values())
