"""Admin for the retention table and holds (the legal screens come with the admin issue). Nothing here
deletes: rules retire, holds release, both through retention.services."""
from django.contrib import admin

from retention.models import ContentClass, LegalHold, RetentionRule, RetentionTableVersion


class NoDeleteAdmin(admin.ModelAdmin):
    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ContentClass)
class ContentClassAdmin(NoDeleteAdmin):
    list_display = ["name", "tenant", "created_at"]
    search_fields = ["name"]


@admin.register(RetentionRule)
class RetentionRuleAdmin(NoDeleteAdmin):
    list_display = ["content_class", "kind", "duration_days", "authority", "mode", "protects", "retired_at"]
    list_filter = ["kind", "mode", "protects"]
    list_select_related = ["content_class"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(LegalHold)
class LegalHoldAdmin(NoDeleteAdmin):
    list_display = ["matter", "tenant", "placed_by", "placed_at", "released_at"]
    list_select_related = ["tenant"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(RetentionTableVersion)
class RetentionTableVersionAdmin(NoDeleteAdmin):
    list_display = ["tenant", "number", "actor", "change", "created_at"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False
