"""Legal's screens over retention conflicts: the conflicts queue and a conflict's page, where legal upholds,
overrides or defers. Every decision goes through dsr.services.conflicts, which records it in the request's
history; the admin parses, calls and shows what the service answered, refusals included.

Deciding needs `dsr.change_retentionconflict` (legal, dsr/roles.py); everyone with a role may look. Registered
when the dsr app is ready (dsr/apps.py), so dsr/admin.py need not import this module.
"""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from config.admin_pages import act_page, page_render, refusal_text
from config.errors import ApplicationError
from dsr.admin import DefaultChoiceFilter, actor_of, countdown_html
from dsr.admin_media import MEDIA_CSS
from dsr.dashboard import conflict_page_get
from dsr.models import ConflictStatus, RetentionConflict
from dsr.selectors import hold_waiting
from dsr.services.conflicts import (
    MAX_SELECTION,
    conflict_defer,
    conflict_override,
    conflict_uphold,
    decide_conflicts,
    override_refusal,
    selection_check,
)

# The conflicts queue has more columns than the request queue: its own sheet lets it fit (conflicts.css).
CONFLICTS_CSS = {"all": [*MEDIA_CSS["all"], "ledger/conflicts.css"]}


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
    # Dates as short ISO values (the default "Dec. 5, 2026, 11 p.m." is twice as wide): with the request's due
    # date the queue has eleven columns, and they must all fit at 1400 px with the sidebar open (conflicts.css).
    list_display = ["id", "request_link", "request_due", "tenant", "record_id", "code", "authority", "locked_until_day",
                    "status", "deferred_to_day", "opened_at_minute"]
    list_filter = [ConflictStateFilter, "status", ConflictCodeFilter, "tenant"]
    list_select_related = ["tenant"]
    list_per_page = 50
    show_full_result_count = False
    date_hierarchy = "opened_at"
    # Most urgent first: the subject's request whose deadline comes first (overdue ones at the top).
    ordering = ["request__effective_due_date", "opened_at", "pk"]
    search_help_text = "A request id or a record id."
    search_fields = ["=record_id"]
    show_facets = admin.ShowFacets.NEVER

    actions = ["decide_selected"]

    class Media:
        css = CONFLICTS_CSS

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Retention conflicts: most urgent request first",
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

    @admin.display(description="locked until", ordering="locked_until")
    def locked_until_day(self, obj):
        return f"{timezone.localtime(obj.locked_until):%Y-%m-%d}" if obj.locked_until else "-"

    @admin.display(description="deferred to", ordering="deferred_to")
    def deferred_to_day(self, obj):
        return f"{obj.deferred_to:%Y-%m-%d}" if obj.deferred_to else "-"

    @admin.display(description="opened at", ordering="opened_at")
    def opened_at_minute(self, obj):
        return f"{timezone.localtime(obj.opened_at):%Y-%m-%d %H:%M}"

    @admin.display(description="request due", ordering="request__effective_due_date")
    def request_due(self, obj):
        return countdown_html(obj.request)

    def response_action(self, request, queryset):
        # Django filters the selection with pk__in before any action runs: an id that is not a number would be a
        # 500 there. Refused here instead, as the service refuses it.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if not all(x.isdigit() and len(x) < 19 for x in selected):
            try:
                selection_check(selected)  # not ids: refused (invalid_selection)
            except ApplicationError as exc:
                messages.error(request, refusal_text(exc))
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)

    @admin.action(description="Decide the selected conflicts", permissions=["change"])
    def decide_selected(self, request, queryset):
        """One decision and one justification over the selection, each conflict decided on its own by the
        service; all or nothing. First a page with the form; its submission (`apply`) decides."""
        if request.POST.get("select_across") == "1":
            ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:MAX_SELECTION + 1])
        else:
            # The ids as selected, not as the queue's filter finds them now: one decided meanwhile must be
            # named in the refusal, not dropped silently.
            ids = [int(x) for x in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)]  # digits: response_action
        try:
            ids = selection_check(ids)
        except ApplicationError as exc:
            messages.error(request, refusal_text(exc))
            return None
        refused = []
        if "apply" in request.POST:
            form = ConflictDecisionForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    decided = decide_conflicts(conflict_ids=ids, decision=data["decision"],
                                               actor=actor_of(request), justification=data["justification"],
                                               until=data["until"])
                except ApplicationError as exc:
                    messages.error(request, refusal_text(exc))
                    refused = exc.extra.get("refused", [])
                else:
                    for conflict in decided:
                        self.log_change(request, conflict, f"{conflict.get_status_display()} (with {len(decided)} "
                                                           "selected conflicts)")
                    done = {"uphold": "upheld", "override": "overridden", "defer": "deferred"}[data["decision"]]
                    messages.success(request, f"{len(decided)} conflict{'' if len(decided) == 1 else 's'} {done}, "
                                              "each recorded on its own with your justification.")
                    return None  # back to the queue
        else:
            form = ConflictDecisionForm()
        why = {r["conflict_id"]: r for r in refused}
        conflicts = list(RetentionConflict.objects.filter(pk__in=ids).select_related("request", "tenant")
                         .order_by("request__effective_due_date", "opened_at", "pk"))
        return page_render(self, request, "admin/ledger/conflicts_decide.html",
                           title=f"Decide {len(ids)} conflict{'' if len(ids) == 1 else 's'}", form=form,
                           rows=[(c, countdown_html(c.request), why.get(c.pk)) for c in conflicts],
                           missing=[r for r in refused if r["code"] == "not_found"], ids=ids,
                           action_name="decide_selected", limit=MAX_SELECTION)

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
        decidable = self.can_decide(request, obj)
        return page_render(self, request, "admin/ledger/conflict_page.html", title=str(obj), obj=obj,
                           page=conflict_page_get(conflict=obj), form=ConflictDecisionForm() if decidable else None,
                           override_refused=override_refusal(obj) if decidable else None)

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
            # The same check the service makes when asked to override: the button is disabled for its reason.
            override_refused=override_refusal(obj) if self.can_decide(request, obj) else None,
        )


# --- a legal hold's page: what waits on it ----------------------------------------------------------------

def hold_waiting_section(hold, request) -> str:
    """The section of a hold's page (retention/admin.py's HOLD_PAGE_SECTIONS, registered in dsr/apps.py)
    that lists the subject requests and the conflicts waiting on the hold, with links to each."""
    if not request.user.has_perm("dsr.view_retentionconflict"):
        return ""
    waiting = hold_waiting(hold)
    return render_to_string("admin/ledger/_hold_waiting.html", {
        "hold": hold, "waiting": waiting,
        "requests": [(r, countdown_html(r)) for r in waiting.requests],
        "conflicts_url": reverse("admin:dsr_retentionconflict_changelist"),
    }, request=request)
