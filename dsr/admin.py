"""The operators' and legal's screens: the request queue and a request's page, the conflicts queue and a
conflict's page. Every act goes through one service (dsr.services, dsr.services.workflow,
dsr.services.conflicts), which records it in the request's history; the admin parses, calls, logs
(`log_change`) and shows what the service answered, refusals included.

Who may do what is dsr/roles.py: acting on a request needs `dsr.change_subjectrequest` (operators),
deciding a conflict `dsr.change_retentionconflict` (legal); everyone with a role may look. Nothing here
is ever deleted, and nothing is edited as raw fields: a request moves only through its state machine.
"""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponseNotAllowed, JsonResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from config.admin_pages import act_page, page_render
from config.errors import ApplicationError
from dsr.dashboard import (
    SOON_DAYS,
    days_left,
    progress_json,
    request_page_get,
    today_utc,
    workflow_running,
)
from dsr.models import DONE_STATUSES, RequestStatus, SubjectRequest
from dsr.admin_media import MEDIA_CSS
from dsr.selectors import requests_due_within, requests_overdue
from dsr.services import request_extend, request_reject_identity, request_verify_identity
from dsr.services.states import OPEN
from dsr.services.workflow import workflow_start, workflows_start
from memory.models import Subject
from memory.subjects import subject_ref_normalize


admin.site.site_header = "Forgetting Ledger"
admin.site.site_title = "Forgetting Ledger"
admin.site.index_title = "The work at a glance"


def actor_of(request) -> str:
    return f"admin:{request.user.get_username()}"


class DefaultChoiceFilter(admin.SimpleListFilter):
    """A filter with a default choice (the open work), dropped to "all" when the user searches or picks a
    status: a search for a request id must find it whatever its state."""

    default = "open"
    widened_by = ("q", "status__exact")

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        chosen = super().value()
        widened = any(key in request.GET for key in self.widened_by)
        self.effective = chosen if chosen is not None else ("all" if widened else self.default)

    def value(self):
        return self.effective

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {"selected": self.effective == lookup, "display": title,
                   "query_string": changelist.get_query_string({self.parameter_name: lookup})}


class QueueFilter(DefaultChoiceFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        return [("open", "Open"), ("overdue", "Overdue"), ("soon", f"Due within {SOON_DAYS} days"),
                ("done", "Done"), ("all", "All")]

    def queryset(self, request, queryset):
        # The same predicates as dsr.selectors, so the open-requests partial index answers them.
        if self.effective == "open":
            return queryset.exclude(status__in=DONE_STATUSES)
        if self.effective == "overdue":
            return queryset & requests_overdue()
        if self.effective == "soon":
            return queryset & requests_due_within(days=SOON_DAYS)
        if self.effective == "done":
            return queryset.filter(status__in=DONE_STATUSES)
        return queryset


def countdown_html(obj: SubjectRequest):
    if obj.status in DONE_STATUSES:
        return format_html('<span class="ledger-countdown done">{}</span>', obj.get_status_display())
    days = days_left(obj.effective_due_date)
    if days < 0:
        return format_html('<span class="ledger-countdown overdue" data-days="{}">overdue by {} day{}</span>',
                           days, -days, "" if days == -1 else "s")
    if days == 0:
        return mark_safe('<span class="ledger-countdown overdue" data-days="0">due today</span>')
    return format_html('<span class="ledger-countdown {}" data-days="{}">{} day{} left</span>',
                       "soon" if days <= SOON_DAYS else "later", days, days, "" if days == 1 else "s")


# --- forms -----------------------------------------------------------------------------------------------

class VerifyIdentityForm(forms.Form):
    method = forms.CharField(max_length=200, label="How the identity was verified",
                             help_text="e.g. “signed-in account”, “copy of ID checked by phone”.")


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)


class ExtendForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000,
                             label="Reason (sent to the subject)")


class ConfirmForm(forms.Form):
    pass


# --- requests --------------------------------------------------------------------------------------------

@admin.register(SubjectRequest)
class SubjectRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "countdown", "due", "status", "type", "regulation", "tenant", "subject_ref",
                    "received_at"]
    list_display_links = ["id"]
    # Indexes behind the filters (dsr.models): the queue's choices use the open-requests partial index or
    # (effective_due_date, id); status uses (status, effective_due_date, id); tenant (tenant, status). Type and
    # regulation (3 values each) narrow one of those ordered scans, which stops at a page of rows.
    list_filter = [QueueFilter, "status", "type", "regulation", "tenant"]
    list_select_related = ["tenant", "subject"]
    list_per_page = 50
    show_full_result_count = False
    date_hierarchy = "received_at"
    ordering = ["effective_due_date", "pk"]
    search_fields = ["subject__ref"]
    search_help_text = "A request id, or a subject's reference (exact)."
    actions = ["workflow_start_selected"]
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice, over the whole table: not here

    class Media:
        css = MEDIA_CSS

    def get_queryset(self, request):
        requests = super().get_queryset(request).select_related("tenant", "subject")
        if request.resolver_match and request.resolver_match.url_name == "dsr_subjectrequest_changelist":
            requests = requests.defer("export", "gaps")  # an access request's export can be large; not listed
        return requests

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        # The subject first (one query), so that the search is two index lookups ORed, not a join of the
        # whole table with an OR across it.
        try:
            refs = [subject_ref_normalize(term)]  # as requests store it: "José  Müller" finds "José Müller"
        except ApplicationError:
            refs = []  # a term with no normal form (control characters) is no subject's reference
        match = Q(subject_id__in=list(Subject.objects.filter(ref__in=refs, merged_into__isnull=True)
                                      .values_list("pk", flat=True)[:1000]))
        if term.isdigit() and len(term) < 19:
            match |= Q(pk=int(term))
        return queryset.filter(match), False

    def has_add_permission(self, request):
        return False  # requests arrive through the API (dsr.api), with their legal receipt time

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Request queue: most urgent first", **(extra_context or {})})

    @admin.display(description="time left", ordering="effective_due_date")
    def countdown(self, obj):
        return countdown_html(obj)

    @admin.display(description="due", ordering="effective_due_date")
    def due(self, obj):
        return f"{obj.effective_due_date:%Y-%m-%d}"

    @admin.display(description="subject", ordering="subject__ref")
    def subject_ref(self, obj):
        return obj.subject.ref

    @admin.action(description="Start the workflow of the selected verified requests", permissions=["change"])
    def workflow_start_selected(self, request, queryset):
        result = workflows_start(requests=list(queryset.order_by("pk")), actor=actor_of(request))
        for obj in result.started:
            self.log_change(request, obj, "started the workflow")
        if result.started:
            messages.success(request, f"Workflow started for {len(result.started)} request(s): "
                                      f"{', '.join(str(obj.pk) for obj in result.started)}.")
        if result.refused:
            messages.error(request, "Not started (only verified requests run): "
                                    f"{', '.join(f'{obj.pk} (not_verified)' for obj in result.refused)}.")

    # The request page replaces the raw change form: a request changes only through its actions.
    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        try:
            items_page = int(request.GET.get("items", "1"))
        except ValueError:
            items_page = 1
        page = request_page_get(request=obj, items_page=items_page)
        return page_render(self, request, "admin/ledger/request_page.html", title=str(obj), obj=obj, page=page,
                           **self._request_actions(request, obj, page))

    def _request_actions(self, request, obj, page) -> dict:
        can_act = self.has_change_permission(request, obj)
        started = any(h.action == "workflow_started" for h in page.history)
        today = today_utc()
        extendable = (obj.status in OPEN and obj.extended_due_date is None and today < obj.due_date)
        return {
            "can_act": can_act,
            "polling": workflow_running(obj) and (obj.status != RequestStatus.VERIFIED or started),
            "verify_form": VerifyIdentityForm() if can_act and obj.status == RequestStatus.RECEIVED else None,
            "reject_form": ReasonForm() if can_act and obj.status == RequestStatus.RECEIVED else None,
            "extend_form": ExtendForm() if can_act and extendable and obj.contact_email else None,
            "extend_blocked": can_act and extendable and not obj.contact_email,
            "start_form": ConfirmForm() if can_act and obj.status == RequestStatus.VERIFIED and not started else None,
            "started": started,
        }

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/progress/", wrap(self.progress_view), name="dsr_subjectrequest_progress"),
            path("<path:object_id>/verify/", wrap(self.verify_view), name="dsr_subjectrequest_verify"),
            path("<path:object_id>/reject/", wrap(self.reject_view), name="dsr_subjectrequest_reject"),
            path("<path:object_id>/extend/", wrap(self.extend_view), name="dsr_subjectrequest_extend"),
            path("<path:object_id>/start/", wrap(self.start_view), name="dsr_subjectrequest_start"),
            path("<path:object_id>/export/", wrap(self.export_view), name="dsr_subjectrequest_export"),
        ] + super().get_urls()

    def _object(self, request, object_id) -> SubjectRequest:
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("No such request.")
        return obj

    def progress_view(self, request, object_id):
        obj = self._object(request, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        return JsonResponse(progress_json(obj))

    def export_view(self, request, object_id):
        """An access request's export (the subject's live data, made by the workflow), to send to them."""
        obj = self._object(request, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        if obj.export is None:
            raise Http404("This request has no export.")
        return JsonResponse(obj.export, json_dumps_params={"indent": 2}, headers={
            "Content-Disposition": f'attachment; filename="request-{obj.pk}-export.json"'})

    def _act(self, request, object_id, *, form_class, title, act, intro="", submit="Confirm"):
        obj = self._object(request, object_id)
        return act_page(
            self, request, allowed=self.has_change_permission(request, obj), form_class=form_class,
            title=f"{title}: {obj}", obj=obj, intro=intro, submit=submit, act=lambda form: act(obj, form),
            done_url=lambda acted: reverse("admin:dsr_subjectrequest_change", args=[acted.pk]),
        )

    def verify_view(self, request, object_id):
        def act(obj, form):
            method = form.cleaned_data["method"]
            obj = request_verify_identity(request=obj, actor=actor_of(request), method=method)
            return obj, f"Identity verified ({method}): the request may run."
        return self._act(request, object_id, form_class=VerifyIdentityForm, title="Verify the subject's identity",
                         act=act, submit="Verify identity")

    def reject_view(self, request, object_id):
        def act(obj, form):
            obj = request_reject_identity(request=obj, actor=actor_of(request), reason=form.cleaned_data["reason"])
            return obj, "Identity rejected: the request is closed with that reason."
        return self._act(request, object_id, form_class=ReasonForm, title="Reject the subject's identity",
                         act=act, submit="Reject identity")

    def extend_view(self, request, object_id):
        def act(obj, form):
            obj = request_extend(request=obj, actor=actor_of(request), reason=form.cleaned_data["reason"])
            return obj, (f"Extended to {obj.extended_due_date:%d %B %Y}; the subject was told why "
                         f"({obj.contact_email}).")
        return self._act(request, object_id, form_class=ExtendForm, title="Extend the deadline", act=act,
                         intro="The law allows one extension, told to the subject with its reason before the "
                               "first due date. The notice is e-mailed when you confirm.",
                         submit="Extend and tell the subject")

    def start_view(self, request, object_id):
        def act(obj, form):
            workflow_start(request=obj, actor=actor_of(request))
            return obj, "Workflow started: it runs on a worker; the page shows its progress."
        return self._act(request, object_id, form_class=ConfirmForm, title="Start the workflow", act=act,
                         intro="Plans every record of the subject, decides each one against the retention "
                               "table and the holds, erases, confirms and tells the subject.",
                         submit="Start the workflow")


from dsr import admin_logins  # noqa: E402,F401  (the admin login's failed attempts and log)
