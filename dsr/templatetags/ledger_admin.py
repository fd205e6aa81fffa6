"""The admin index's dashboard (templates/admin/index.html): the work at a glance, for whoever may read
the requests."""
from __future__ import annotations

from django import template

from dsr.dashboard import dashboard_get

register = template.Library()


@register.inclusion_tag("admin/ledger/_dashboard.html", takes_context=True)
def ledger_dashboard(context):
    user = context["request"].user
    if not user.has_perm("dsr.view_subjectrequest"):
        return {"board": None}
    return {"board": dashboard_get(), "show_conflicts": user.has_perm("dsr.view_retentionconflict")}
