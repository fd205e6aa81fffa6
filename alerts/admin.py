"""The alerts in the admin: the list operators land on from the banner (open alerts first), acknowledged with an
action (`alerts.acknowledge_alert`: operators); the webhook endpoints (added and changed by whoever holds
`alerts.add/change_webhookendpoint`: a superuser, no role); every delivery attempt, read-only.

The banner on every admin page is templates/admin/base_site.html → alerts/_banner.html (one count query)."""
from __future__ import annotations

import secrets

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from alerts import services
from alerts.models import Alert, WebhookDelivery, WebhookEndpoint
from alerts.validators import webhook_secret_validate
from config.admin_pages import ReadOnlyAdmin


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("open", "Open, not acknowledged"), ("acknowledged", "Acknowledged, still open"),
                ("resolved", "Resolved")]

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(resolved_at__isnull=True, acknowledged_at__isnull=True)
        if self.value() == "acknowledged":
            return queryset.filter(resolved_at__isnull=True, acknowledged_at__isnull=False)
        if self.value() == "resolved":
            return queryset.filter(resolved_at__isnull=False)
        return queryset


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    # Few, narrow columns: the list fits a 1400 px window with the sidebar open (the first sighting is on the page).
    list_display = ["title", "level", "kind", "tenant", "occurrences", "last_seen_at", "state", "cause_link"]
    list_display_links = ["title"]
    list_filter = [StateFilter, "kind", "level"]
    list_select_related = ["tenant"]
    show_full_result_count = False
    ordering = ["-last_seen_at"]
    search_fields = ["title", "cause"]
    fields = ["kind", "level", "title", "detail", "tenant", "cause", "cause_link", "occurrences", "first_seen_at",
              "last_seen_at", "state", "acknowledged_at", "acknowledged_by", "resolved_at", "resolution", "mailed_at"]
    readonly_fields = fields
    actions = ["acknowledge"]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_acknowledge_permission(self, request):
        return request.user.has_perm("alerts.acknowledge_alert")

    @admin.action(description="Acknowledge the selected alerts (they leave the banner; they close with their cause)",
                  permissions=["acknowledge"])
    def acknowledge(self, request, queryset):
        done = services.alerts_acknowledge(alert_ids=list(queryset.values_list("pk", flat=True)),
                                           actor=f"admin:{request.user.get_username()}")
        for alert in queryset.filter(acknowledged_by=f"admin:{request.user.get_username()}"):
            self.log_change(request, alert, "Acknowledged")
        messages.success(request, f"{done} alert{'s' if done != 1 else ''} acknowledged."
                         if done else "Nothing to acknowledge: the selected alerts were resolved or acknowledged.")

    @admin.display(description="state")
    def state(self, alert: Alert) -> str:
        if alert.resolved_at:
            return "resolved"
        return "acknowledged" if alert.acknowledged_at else "open"

    @admin.display(description="cause")
    def cause_link(self, alert: Alert):
        if alert.link:
            return format_html('<a href="{}">{}</a>', alert.link, alert.cause)
        return alert.cause


class WebhookEndpointForm(forms.ModelForm):
    """The secret is shown once, when the endpoint is made (for the receiver's configuration), never again: a
    change leaves it as it is unless a new one is typed."""

    class Meta:
        model = WebhookEndpoint
        fields = ["tenant", "url", "secret", "active", "description"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "secret" not in self.fields:
            return
        if self.instance.pk:
            self.fields["secret"] = forms.CharField(
                required=False, widget=forms.PasswordInput(render_value=False), validators=[webhook_secret_validate],
                label="New secret", help_text="Leave empty to keep the current secret.")
        else:
            self.fields["secret"].initial = secrets.token_hex(32)
            self.fields["secret"].help_text = ("The HMAC-SHA256 key the receiver checks X-Ledger-Signature with. "
                                               "Copy it now: it is not shown again.")

    def clean_secret(self):
        secret = self.cleaned_data.get("secret")
        if self.instance.pk and not secret:
            return WebhookEndpoint.objects.values_list("secret", flat=True).get(pk=self.instance.pk)
        return secret


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["id", "url", "tenant", "active", "description", "created_at"]
    list_filter = ["active"]
    list_select_related = ["tenant"]

    def get_fields(self, request, obj=None):
        # Whoever may only view (every role, dsr/roles.py) never sees the secret.
        if obj is not None and not self.has_change_permission(request, obj):
            return ["tenant", "url", "active", "description", "created_at"]
        return ["tenant", "url", "secret", "active", "description"]

    def get_readonly_fields(self, request, obj=None):
        return ["created_at"] if obj is not None and not self.has_change_permission(request, obj) else []

    def has_delete_permission(self, request, obj=None):
        return False  # deliveries keep their endpoint; switch it off instead (`active`)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "delivery_id", "attempt", "ok", "status_code", "error", "endpoint", "alert", "started_at",
                    "finished_at"]
    list_filter = ["ok"]
    list_select_related = ["endpoint", "alert"]
    show_full_result_count = False
    ordering = ["-started_at"]
    fields = ["delivery_id", "event", "attempt", "ok", "status_code", "error", "endpoint", "alert", "started_at",
              "finished_at"]
    readonly_fields = fields
