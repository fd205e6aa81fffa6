"""Legal's screens: content classes, the retention table (rules, and its versions with what each one
changed) and legal holds. Every change goes through retention.services, which versions the table and
recomputes the records' locks; nothing here deletes: rules retire, holds release.

A compliance-mode rule can only be extended, whoever asks (a superuser included): the service refuses a
shorter duration or a retirement, and the page shows its refusal. Permissions: dsr/roles.py.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Callable

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from config.admin_pages import act_page, page_render, refusal_text
from config.errors import ApplicationError
from memory.models import Record, Scope, Tenant
from memory.subjects import subject_find
from retention.models import (
    ContentClass,
    HoldRecord,
    LegalHold,
    RetentionRule,
    RetentionTableVersion,
    RuleKind,
    RuleMode,
    RuleProtects,
)
from retention.services import (
    MAX_DURATION_DAYS,
    content_class_create,
    hold_place,
    hold_preview_count,
    hold_release,
    rule_change_duration,
    rule_create,
    rule_retire,
)
from retention.table_diff import table_diff
from retention.versions import signature_problem
from tombstones.selectors import keys_published

MEDIA_CSS = {"all": ["ledger/admin.css"]}

# Sections other apps add to a hold's page, each a function (hold, request) -> HTML (safe) or "": dsr lists the
# requests and conflicts waiting on the hold. Apps depend one way (dsr imports retention, never the reverse), so
# they register here from their AppConfig.ready() instead of retention importing them.
HOLD_PAGE_SECTIONS: list[Callable[[LegalHold, HttpRequest], str]] = []
MAX_LISTED_RECORDS = 10_000   # a hold on more records than this is a hold on a subject, class or scope
LISTED_SHOWN = 200


def actor_of(request) -> str:
    return f"admin:{request.user.get_username()}"


class NoDeleteAdmin(admin.ModelAdmin):
    class Media:
        css = MEDIA_CSS

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions


class ClassChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.tenant.name} / {obj.name}"


def _classes():
    return ContentClass.objects.select_related("tenant").order_by("tenant__name", "name")


# --- content classes -------------------------------------------------------------------------------------

class ContentClassForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"))
    name = forms.CharField(max_length=100)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)


@admin.register(ContentClass)
class ContentClassAdmin(NoDeleteAdmin):
    list_display = ["name", "tenant", "description", "created_at"]
    list_filter = ["tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name"]

    def has_change_permission(self, request, obj=None):
        return False  # a class is named once; its rules are the retention table

    def add_view(self, request, form_url="", extra_context=None):
        def act(form):
            data = form.cleaned_data
            made = content_class_create(tenant=data["tenant"], name=data["name"], description=data["description"],
                                        actor=actor_of(request))
            return made, f"Content class {made.name} added to {made.tenant}."

        return act_page(self, request, allowed=self.has_add_permission(request), form_class=ContentClassForm,
                        title="Add a content class", act=act, added=True, submit="Add the content class",
                        done_url=lambda made: reverse("admin:retention_contentclass_changelist"))


# --- the retention table ---------------------------------------------------------------------------------

class RuleForm(forms.Form):
    content_class = ClassChoiceField(queryset=_classes())
    kind = forms.ChoiceField(choices=RuleKind.choices)
    duration_days = forms.IntegerField(min_value=1, max_value=MAX_DURATION_DAYS, label="Duration (days)")
    authority = forms.CharField(max_length=200, help_text="The law, pact clause or policy that requires it.")
    mode = forms.ChoiceField(choices=RuleMode.choices, initial=RuleMode.GOVERNANCE,
                             help_text="Compliance: nobody can ever shorten, retire or override it, not even a "
                                       "superuser; it can only be extended.")
    protects = forms.ChoiceField(choices=RuleProtects.choices, initial=RuleProtects.EXISTENCE,
                                 help_text="Content: write-once (SEC 17a-4); only hiding stays permitted.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["content_class"].queryset = _classes()


class DurationForm(forms.Form):
    duration_days = forms.IntegerField(min_value=1, max_value=MAX_DURATION_DAYS, label="New duration (days)")
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)


class JustificationForm(forms.Form):
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)


class ActiveRuleFilter(admin.SimpleListFilter):
    title = "in force"
    parameter_name = "active"

    def lookups(self, request, model_admin):
        return [("yes", "In force"), ("no", "Retired")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(retired_at__isnull=True)
        if self.value() == "no":
            return queryset.filter(retired_at__isnull=False)
        return queryset


@admin.register(RetentionRule)
class RetentionRuleAdmin(NoDeleteAdmin):
    # The retention table is small (rules per content class): its filters need no index of their own.
    list_display = ["id", "content_class", "tenant", "kind", "duration", "authority", "mode_badge", "protects",
                    "retired_at"]
    list_display_links = ["id", "content_class"]
    list_filter = [ActiveRuleFilter, "mode", "kind", "protects", "tenant"]
    list_select_related = ["content_class", "tenant"]
    search_fields = ["authority", "content_class__name"]
    ordering = ["tenant__name", "content_class__name", "pk"]

    @admin.display(description="duration", ordering="duration_days")
    def duration(self, obj):
        return f"{obj.duration_days} days" + (f" (~{obj.duration_days / 365.25:.1f} years)"
                                               if obj.duration_days >= 365 else "")

    @admin.display(description="mode", ordering="mode")
    def mode_badge(self, obj):
        return format_html('<span class="ledger-badge mode-{}">{}</span>', obj.mode, obj.get_mode_display())

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("content_class", "tenant")

    def add_view(self, request, form_url="", extra_context=None):
        def act(form):
            data = form.cleaned_data
            cc = data["content_class"]
            rule = rule_create(tenant=cc.tenant, content_class=cc, kind=data["kind"],
                               duration_days=data["duration_days"], authority=data["authority"], mode=data["mode"],
                               protects=data["protects"], actor=actor_of(request))
            return rule, f"Rule {rule.pk} added: {rule}, {rule.get_mode_display()} mode."

        return act_page(self, request, allowed=self.has_add_permission(request), form_class=RuleForm,
                        title="Add a retention rule", act=act, added=True, submit="Add the rule",
                        intro="The rule applies at once: the locks of every record of its class are recomputed, "
                              "and the retention table gets a new version.",
                        done_url=lambda rule: reverse("admin:retention_retentionrule_change", args=[rule.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        rule = self.get_object(request, unquote(object_id))
        if rule is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_or_change_permission(request, rule):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        can_change = self.has_change_permission(request, rule) and rule.retired_at is None
        versions = list(RetentionTableVersion.objects.filter(tenant_id=rule.tenant_id).order_by("-number")[:10])
        return page_render(
            self, request, "admin/ledger/rule_page.html", title=str(rule), obj=rule, rule=rule, versions=versions,
            duration_form=DurationForm(initial={"duration_days": rule.duration_days}) if can_change else None,
            retire_form=JustificationForm() if can_change and rule.mode == RuleMode.GOVERNANCE else None,
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/duration/", wrap(self.duration_view), name="retention_retentionrule_duration"),
            path("<path:object_id>/retire/", wrap(self.retire_view), name="retention_retentionrule_retire"),
        ] + super().get_urls()

    def _rule(self, request, object_id) -> RetentionRule:
        rule = self.get_object(request, unquote(object_id))
        if rule is None:
            raise Http404("No such rule.")
        return rule

    def duration_view(self, request, object_id):
        rule = self._rule(request, object_id)

        def act(form):
            before = rule.duration_days
            changed = rule_change_duration(rule=rule, duration_days=form.cleaned_data["duration_days"],
                                           actor=actor_of(request), justification=form.cleaned_data["justification"])
            return changed, f"Rule {changed.pk}: duration {before} → {changed.duration_days} days."

        return act_page(self, request, allowed=self.has_change_permission(request, rule), form_class=DurationForm,
                        title=f"Change the duration: {rule}", obj=rule, act=act, submit="Change the duration",
                        intro=("Compliance mode: this rule can only be extended." if rule.mode == RuleMode.COMPLIANCE
                               else "Governance mode: legal may shorten it, with a written justification."),
                        done_url=lambda r: reverse("admin:retention_retentionrule_change", args=[r.pk]))

    def retire_view(self, request, object_id):
        rule = self._rule(request, object_id)

        def act(form):
            retired = rule_retire(rule=rule, actor=actor_of(request), justification=form.cleaned_data["justification"])
            return retired, f"Rule {retired.pk} retired: it no longer applies; it stays on record."

        return act_page(self, request, allowed=self.has_change_permission(request, rule),
                        form_class=JustificationForm, title=f"Retire: {rule}", obj=rule, act=act,
                        submit="Retire the rule",
                        done_url=lambda r: reverse("admin:retention_retentionrule_change", args=[r.pk]))


def _neighbour(direction: int):
    return Subquery(RetentionTableVersion.objects.filter(tenant=OuterRef("tenant"),
                                                         number=OuterRef("number") + direction).values("pk")[:1])


@admin.register(RetentionTableVersion)
class RetentionTableVersionAdmin(NoDeleteAdmin):
    """The retention table's history: each version, and what changed from the one before."""

    list_display = ["tenant", "number", "created_at", "actor", "what_changed", "digest_short"]
    list_display_links = ["number"]
    list_filter = ["tenant"]
    list_select_related = ["tenant"]
    ordering = ["tenant__name", "-number"]

    def get_queryset(self, request):
        # The previous version's rules come with each row: the diff costs no query per row.
        previous = RetentionTableVersion.objects.filter(tenant=OuterRef("tenant"), number=OuterRef("number") - 1)
        return (super().get_queryset(request).select_related("tenant")
                .annotate(previous_rules=Subquery(previous.values("rules")[:1]),
                          previous_pk=_neighbour(-1), next_pk=_neighbour(1)))

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="what changed")
    def what_changed(self, obj):
        changes = table_diff(obj.previous_rules, obj.rules)
        if not changes:
            return obj.change
        return format_html("<br>".join(["{}"] * len(changes)), *[c.describe() for c in changes])

    @admin.display(description="digest")
    def digest_short(self, obj):
        return format_html('<code title="{}">{}…</code>', obj.digest, obj.digest[:12])

    def change_view(self, request, object_id, form_url="", extra_context=None):
        version = self.get_object(request, unquote(object_id))
        if version is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_permission(request, version):
            raise PermissionDenied
        return page_render(self, request, "admin/ledger/version_page.html", title=str(version), obj=version,
                           version=version, changes=table_diff(version.previous_rules, version.rules),
                           signature_problem=signature_problem(version, keys_published()))


# --- legal holds -----------------------------------------------------------------------------------------

class HoldForm(forms.Form):
    TARGETS = [("subject", "A data subject (every record of theirs)"),
               ("content_class", "A content class (every record of the class)"),
               ("scope", "A scope, with its sub-scopes"),
               ("records", "Listed records")]
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"))
    matter = forms.CharField(max_length=200, help_text="The matter the hold is for, e.g. “Doe v. Acme”.")
    authority = forms.CharField(max_length=200, required=False,
                                help_text="What orders it: a court order, a regulator's letter…")
    target = forms.ChoiceField(choices=TARGETS, widget=forms.RadioSelect, initial="subject", label="Covers")
    subject_ref = forms.CharField(max_length=200, required=False, label="Subject reference")
    content_class = ClassChoiceField(queryset=_classes(), required=False)
    scope_path = forms.CharField(max_length=500, required=False, label="Scope path",
                                 help_text="e.g. user:42 (covers user:42/session:7 too)")
    record_ids = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Record ids",
                                 help_text="Separated by commas or spaces.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["content_class"].queryset = _classes()
        self.target_kwargs: dict = {}

    def clean(self):
        data = super().clean()
        tenant, target = data.get("tenant"), data.get("target")
        if tenant is None or not target:
            return data
        if target == "subject":
            try:
                subject = subject_find(tenant=tenant, ref=data.get("subject_ref") or "")
                if subject is None:
                    self.add_error("subject_ref", f"No subject with this reference in {tenant}.")
            except ApplicationError as exc:  # no normal form (empty, control characters)
                subject = None
                self.add_error("subject_ref", exc.detail)
            self.target_kwargs = {"subject": subject}
        elif target == "content_class":
            cc = data.get("content_class")
            if cc is None or cc.tenant_id != tenant.pk:
                self.add_error("content_class", f"Choose a content class of {tenant}.")
            self.target_kwargs = {"content_class": cc}
        elif target == "scope":
            path_ = (data.get("scope_path") or "").strip().strip("/")
            scope = Scope.objects.filter(tenant=tenant, path=path_).first() if path_ else None
            if scope is None:
                self.add_error("scope_path", f"No scope with this path in {tenant}.")
            self.target_kwargs = {"scope": scope}
        else:
            words = [w for w in re.split(r"[\s,;]+", data.get("record_ids") or "") if w]
            if not words or not all(w.isdigit() and len(w) < 19 for w in words):
                self.add_error("record_ids", "List record ids (numbers).")
            elif len(set(words)) > MAX_LISTED_RECORDS:
                self.add_error("record_ids", f"At most {MAX_LISTED_RECORDS:,} records; hold a subject, a class or "
                                             "a scope instead.")
            else:
                self.target_kwargs = {"record_ids": sorted({int(w) for w in words})}
        return data

    def preview_key(self) -> str:
        """What was previewed, so that a confirmation places exactly that hold."""
        data = self.cleaned_data
        described = {k: (v.pk if hasattr(v, "pk") else v) for k, v in self.target_kwargs.items()}
        return hashlib.sha256(json.dumps([data["tenant"].pk, data["matter"], data["authority"], described],
                                         sort_keys=True).encode()).hexdigest()


class ReleaseForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000,
                             label="Why the hold is released")


class ActiveHoldFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "active"

    def lookups(self, request, model_admin):
        return [("yes", "Active"), ("no", "Released")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(released_at__isnull=True)  # the partial index hold_active_idx
        if self.value() == "no":
            return queryset.filter(released_at__isnull=False)
        return queryset


@admin.register(LegalHold)
class LegalHoldAdmin(NoDeleteAdmin):
    """Placing a hold needs `add_legalhold`; releasing it (the only change a hold ever has) `change_legalhold`."""

    list_display = ["matter", "tenant", "covers", "authority", "placed_by", "placed_at", "state"]
    list_filter = [ActiveHoldFilter, "tenant"]
    list_select_related = ["tenant", "subject", "content_class", "scope"]
    search_fields = ["matter", "authority"]
    ordering = ["-placed_at", "-pk"]
    date_hierarchy = "placed_at"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tenant", "subject", "content_class", "scope")

    @admin.display(description="covers")
    def covers(self, obj):
        if obj.subject_id:
            return f"subject {obj.subject.ref}"
        if obj.content_class_id:
            return f"class {obj.content_class.name}"
        if obj.scope_id:
            return f"scope {obj.scope.path}"
        return "listed records"

    @admin.display(description="state", ordering="released_at")
    def state(self, obj):
        if obj.released_at is None:
            return mark_safe('<span class="ledger-badge hold-active">active</span>')
        return format_html('<span class="ledger-badge hold-released">released {}</span>', f"{obj.released_at:%Y-%m-%d}")

    def add_view(self, request, form_url="", extra_context=None):
        """Place a hold in two steps: preview how many records it covers, then confirm that same hold."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        preview, key = None, ""
        if request.method == "POST":
            form = HoldForm(request.POST)
            if form.is_valid():
                key = form.preview_key()
                confirmed = "_confirm" in request.POST
                if confirmed and request.POST.get("preview_key") == key:
                    data = form.cleaned_data
                    try:
                        hold = hold_place(tenant=data["tenant"], matter=data["matter"], authority=data["authority"],
                                          actor=actor_of(request), **form.target_kwargs)
                    except ApplicationError as exc:
                        messages.error(request, refusal_text(exc))
                    else:
                        covered = hold_preview_count(hold=hold)
                        message = f"Hold “{hold.matter}” placed: it covers {covered} record(s)."
                        self.log_addition(request, hold, message)
                        messages.success(request, message)
                        return HttpResponseRedirect(reverse("admin:retention_legalhold_change", args=[hold.pk]))
                elif confirmed:
                    messages.warning(request, "The hold changed since its preview: check the new count, then confirm.")
                preview = self._preview(form)
        else:
            form = HoldForm()
        return page_render(self, request, "admin/ledger/hold_place.html", title="Place a legal hold", form=form,
                           preview=preview, preview_key=key)

    @staticmethod
    def _preview(form: HoldForm) -> int:
        data = form.cleaned_data
        if "record_ids" in form.target_kwargs:
            # hold_preview_count takes a hold; a hold on listed records has no rows to count until it is placed,
            # so count the listed records that exist (hold_place refuses the hold if some do not).
            return Record.objects.filter(tenant=data["tenant"], pk__in=form.target_kwargs["record_ids"]).count()
        return hold_preview_count(hold=LegalHold(tenant=data["tenant"], **form.target_kwargs))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        hold = self.get_object(request, unquote(object_id))
        if hold is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_or_change_permission(request, hold):
            raise PermissionDenied
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        listed = list(HoldRecord.objects.filter(hold=hold).order_by("record_id")
                      .values_list("record_id", flat=True)[:LISTED_SHOWN + 1])
        can_release = self.has_change_permission(request, hold) and hold.released_at is None
        return page_render(self, request, "admin/ledger/hold_page.html", title=str(hold), obj=hold, hold=hold,
                           covered=hold_preview_count(hold=hold), listed=listed[:LISTED_SHOWN],
                           listed_more=len(listed) > LISTED_SHOWN,
                           release_form=ReleaseForm() if can_release else None,
                           sections=[html for section in HOLD_PAGE_SECTIONS if (html := section(hold, request))])

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/release/", wrap(self.release_view), name="retention_legalhold_release")] \
            + super().get_urls()

    def release_view(self, request, object_id):
        hold = self.get_object(request, unquote(object_id))
        if hold is None:
            raise Http404("No such hold.")

        def act(form):
            released = hold_release(hold=hold, actor=actor_of(request), reason=form.cleaned_data["reason"])
            return released, f"Hold “{released.matter}” released: {released.release_reason}"

        return act_page(self, request, allowed=self.has_change_permission(request, hold), form_class=ReleaseForm,
                        title=f"Release the hold: {hold}", obj=hold, act=act, submit="Release the hold",
                        intro="Records this hold alone covered become free of it; the hold stays on record.",
                        done_url=lambda h: reverse("admin:retention_legalhold_change", args=[h.pk]))


from retention import admin_audit  # noqa: E402,F401  (coverage reports and the write ledger, read-only)
