"""Legal's screens over retention conflicts: the conflicts queue and a conflict's page, where legal upholds,
overrides or defers. Every decision goes through dsr.services.conflicts, which records it in the request's
history; the admin parses, calls and shows what the service answered, refusals included.

Deciding needs `dsr.change_retentionconflict` (legal, dsr/roles.py); everyone with a role may look. Registered
when the dsr app is ready (dsr/apps.py), so dsr/admin.py need not import this module.
"""
from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from config.admin_pages import act_page, page_render
from dsr.admin import DefaultChoiceFilter, actor_of
from dsr.admin_media import MEDIA_CSS
from dsr.dashboard import conflict_page_get
from dsr.models import ConflictStatus, RetentionConflict
from dsr.services.conflicts import conflict_defer, conflict_override, conflict_uphold


class ConflictDecisionForm(forms.Form):
    DECISIONS = [("uphold", "Uphold: keep the record, hidden and restricted; tell the subject why"),
                 ("override", "Override: erase the record after all"),
                 ("defer", "Defer: decide on a later date")]
    decision = forms.ChoiceField(choices=DECISIONS, widget=forms.RadioSelect)
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000,
                                    label="Written justification")
    until = forms.DateField(required=False, label="Defer to", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("decision") == "defer" and not data.get("until"):
            self.add_error("until", "A deferral needs a date.")
        return data



# --- retention conflicts ---------------------------------------------------------------------------------

class ConflictCodeFilter(admin.SimpleListFilter):
    """The refusal codes a conflict can have, listed without a DISTINCT over the table."""

    title = "blocked by"
    parameter_name = "code"

    def lookups(self, request, model_admin):
        return [("retention_lock", "A retention rule"), ("legal_hold", "A legal hold")]

    def queryset(self, request, queryset):
        return queryset.filter(code=self.value()) if self.value() else queryset


class ConflictStateFilter(DefaultChoiceFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("open", "Open"), ("deferred", "Deferred"), ("decided", "Decided"), ("all", "All")]

    def queryset(self, request, queryset):
        if self.effective == "open":
            return queryset.filter(status=ConflictStatus.OPEN)  # the partial index conflict_open_idx
        if self.effective == "deferred":
            return queryset.filter(status=ConflictStatus.DEFERRED)
        if self.effective == "decided":
            return queryset.filter(status__in=[ConflictStatus.UPHELD, ConflictStatus.OVERRIDDEN, ConflictStatus.LAPSED])
        return queryset


@admin.register(RetentionConflict)
class RetentionConflictAdmin(admin.ModelAdmin):
    list_display = ["id", "request_link", "tenant", "record_id", "code", "authority", "locked_until", "status",
                    "deferred_to", "opened_at"]
    list_filter = [ConflictStateFilter, "status", ConflictCodeFilter, "tenant"]
    list_select_related = ["tenant"]
    list_per_page = 50
    show_full_result_count = False
    date_hierarchy = "opened_at"
    ordering = ["opened_at", "pk"]
    search_help_text = "A request id or a record id."
    search_fields = ["=record_id"]
    show_facets = admin.ShowFacets.NEVER

    class Media:
        css = MEDIA_CSS

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Retention conflicts: oldest first",
                                                 **(extra_context or {})})

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        if not (term.isdigit() and len(term) < 19):
            return queryset.none(), False
        return queryset.filter(Q(request_id=int(term)) | Q(record_id=int(term))), False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tenant", "request")

    def has_add_permission(self, request):
        return False  # the workflow opens conflicts

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.display(description="request", ordering="request_id")
    def request_link(self, obj):
        return format_html('<a href="{}">request {}</a>',
                           reverse("admin:dsr_subjectrequest_change", args=[obj.request_id]), obj.request_id)

    def can_decide(self, request, obj) -> bool:
        return self.has_change_permission(request, obj) and obj.status in (ConflictStatus.OPEN,
                                                                           ConflictStatus.DEFERRED)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        return page_render(self, request, "admin/ledger/conflict_page.html", title=str(obj), obj=obj,
                           page=conflict_page_get(conflict=obj),
                           form=ConflictDecisionForm() if self.can_decide(request, obj) else None)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/decide/", wrap(self.decide_view), name="dsr_retentionconflict_decide")] \
            + super().get_urls()

    def decide_view(self, request, object_id):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("No such conflict.")
        if request.method != "POST" and self.has_view_or_change_permission(request, obj):
            return HttpResponseRedirect(reverse("admin:dsr_retentionconflict_change", args=[obj.pk]))

        def act(form):
            data, actor = form.cleaned_data, actor_of(request)
            why = data["justification"]
            if data["decision"] == "uphold":
                conflict_uphold(conflict=obj, actor=actor, justification=why)
                return obj, (f"Upheld: record {obj.record_id} is kept, hidden and restricted; the subject was told "
                             "why and of their right to complain.")
            if data["decision"] == "override":
                conflict_override(conflict=obj, actor=actor, justification=why)
                return obj, f"Overridden: record {obj.record_id} was erased; the request's workflow continues."
            conflict_defer(conflict=obj, actor=actor, justification=why, until=data["until"])
            return obj, f"Deferred to {data['until']:%d %B %Y}: the conflict comes back to legal then."

        return act_page(
            # The permission is checked here; whether the conflict can still be decided, by the service.
            self, request, allowed=self.has_change_permission(request, obj), form_class=ConflictDecisionForm,
            title=str(obj), obj=obj, act=act, template="admin/ledger/conflict_page.html",
            done_url=lambda acted: reverse("admin:dsr_retentionconflict_change", args=[acted.pk]),
            page=conflict_page_get(conflict=obj),
        )
