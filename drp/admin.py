"""Authorized agents in the admin: register (the token is shown once, in a message), re-issue a token,
deactivate; their DRP requests, read-only."""
from __future__ import annotations

from django.contrib import admin, messages

from drp import services
from drp.models import Agent, DataRightsRequest


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "tenant", "business_id", "name", "active", "token_prefix", "token_issued_at"]
    list_filter = ["active"]
    list_select_related = ["tenant"]
    search_fields = ["agent_id", "name"]
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
            services.signing.verify_key_load(obj.verify_key)
            super().save_model(request, obj, form, change)
            return
        agent, key = services.agent_register(tenant=obj.tenant, agent_id=obj.agent_id, verify_key=obj.verify_key,
                                             business_id=obj.business_id, name=obj.name,
                                             actor=f"admin:{request.user.username}")
        obj.pk = agent.pk
        obj.__dict__.update({k: v for k, v in agent.__dict__.items() if not k.startswith("_")})
        messages.warning(request, f"The token of {agent.agent_id}, shown once: {key}")

    @admin.action(description="Issue a new token (the old one stops working)")
    def issue_token(self, request, queryset):
        for agent in queryset:
            key = services.agent_token_issue(agent=agent, actor=f"admin:{request.user.username}")
            self.log_change(request, agent, "Issued a new DRP token.")
            messages.warning(request, f"The new token of {agent.agent_id} ({agent.tenant}), shown once: {key}")

    @admin.action(description="Deactivate (its token and requests are refused)")
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
