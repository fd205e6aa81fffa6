"""The admin's export page: Audit exports on the admin index (`/admin/audit_exports/auditexport/`).

A form (kind, format, period, tenant or every tenant) submitted by GET downloads the export, streamed by the
same selectors and writer as the API. Every role may use it (the view permission of `AuditExport`, given to
every role by dsr.roles); staff see every tenant in the admin, so the export may cover them all.

The request queue offers "Export the selected requests for an audit (CSV)": the `requests` export of the
selection, by the same selector and writer. It needs only the view permission, so it is the one action an
auditor is offered (it reads, it changes nothing). It is added to dsr's admin from here, because this app
depends on dsr and not the other way round.
"""
from __future__ import annotations

import dataclasses
import functools
import logging

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.urls import path

from audit_exports.errors import ExportError
from audit_exports.models import AuditExport
from audit_exports.selectors import EXPORTS, Period, export_get, period_parse, requests_rows
from audit_exports.writers import FORMATS, export_response
from config.admin_pages import page_render
from dsr.admin import SubjectRequestAdmin
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


@admin.action(description="Export the selected requests for an audit (CSV)", permissions=["view"])
def export_selected_requests(modeladmin, request, queryset):
    # The selection as a query of ids ("select all" over 100,000 requests stays one subquery, streamed).
    selected = queryset.order_by().values("pk")
    export = dataclasses.replace(EXPORTS["requests"], rows=functools.partial(requests_rows, request_ids=selected))
    logger.info("audit export requests.csv of the selected requests by admin:%s", request.user.get_username())
    return export_response(export=export, fmt="csv", tenant=None, period=Period())


SubjectRequestAdmin.actions = [*SubjectRequestAdmin.actions, export_selected_requests]
