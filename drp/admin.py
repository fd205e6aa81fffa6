"""Authorized agents in the admin: register (the token is shown once, in a message), re-issue a token,
deactivate; their DRP requests, read-only."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from config.errors import ApplicationError
from drp import services, signing
from drp.models import Agent, DataRightsRequest


class AgentForm(forms.ModelForm):
    """The service's checks as form errors (a bad key is a message on the field, not a 500)."""

    business_id = forms.CharField(max_length=64, required=False,
                                  help_text="The business-id its requests must name (empty: LEDGER_DRP_BUSINESS_ID).")

    class Meta:
        model = Agent
        fields = ["agent_id", "tenant", "business_id", "name", "verify_key", "active"]

    def _checked(self, name, check):
        value = self.cleaned_data.get(name)
        try:
            check(value)
        except ApplicationError as exc:
            raise forms.ValidationError(exc.detail) from None
        return value

    def clean_agent_id(self):
        return self._checked("agent_id", services.agent_id_valid)

    def clean_verify_key(self):
        return self._checked("verify_key", signing.verify_key_load)

    def clean_business_id(self):
        self.cleaned_data["business_id"] = self.cleaned_data.get("business_id") or services.conf.business_id()
        return self._checked("business_id", services.agent_id_valid)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "tenant", "business_id", "name", "active", "token_prefix", "token_issued_at"]
    list_filter = ["active"]
    list_select_related = ["tenant"]
    search_fields = ["agent_id", "name"]
    form = AgentForm
    readonly_fields = ["token_prefix", "token_issued_at", "created_at"]
    fields = ["agent_id", "tenant", "business_id", "name", "verify_key", "active", *readonly_fields]
    actions = ["issue_token", "deactivate"]

    def get_readonly_fields(self, request, obj=None):
        # The identity of a registration does not change; register another agent instead.
        return [*self.readonly_fields, "agent_id", "tenant"] if obj else self.readonly_fields

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # its requests refer to it; deactivate instead

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        agent, key = services.agent_register(tenant=obj.tenant, agent_id=obj.agent_id, verify_key=obj.verify_key,
                                             business_id=obj.business_id, name=obj.name,
                                             actor=f"admin:{request.user.username}")
        obj.pk = agent.pk
        obj.__dict__.update({k: v for k, v in agent.__dict__.items() if not k.startswith("_")})
        messages.warning(request, f"The token of {agent.agent_id}, shown once: {key}")

    @admin.action(description="Issue a new token (the old one stops working)", permissions=["change"])
    def issue_token(self, request, queryset):
        for agent in queryset:
            key = services.agent_token_issue(agent=agent, actor=f"admin:{request.user.username}")
            self.log_change(request, agent, "Issued a new DRP token.")
            messages.warning(request, f"The new token of {agent.agent_id} ({agent.tenant}), shown once: {key}")

    @admin.action(description="Deactivate (its token and requests are refused)", permissions=["change"])
    def deactivate(self, request, queryset):
        for agent in queryset:
            services.agent_deactivate(agent=agent, actor=f"admin:{request.user.username}")
            self.log_change(request, agent, "Deactivated.")


@admin.register(DataRightsRequest)
class DataRightsRequestAdmin(admin.ModelAdmin):
    list_display = ["request_id", "agent", "exercise", "regime", "subject_request", "denied_reason", "received_at",
                    "revoked_at"]
    list_select_related = ["agent", "agent__tenant", "subject_request"]
    list_filter = ["exercise", "denied_reason"]
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
