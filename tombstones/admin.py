"""Read-only admin for tombstones, keys, checkpoints and key history. Private keys are never shown."""
from __future__ import annotations

import json

from django.contrib import admin, messages

from config.admin_pages import ReadOnlyAdmin as SharedReadOnlyAdmin

from .models import Checkpoint, KeyEvent, SigningKey, Tombstone
from .services import key_rotate
from .verification import statement_summary


class ReadOnlyAdmin(SharedReadOnlyAdmin):
    show_full_result_count = False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions


@admin.register(Tombstone)
class TombstoneAdmin(ReadOnlyAdmin):
    list_display = ["id", "tenant", "created_at", "leaf_index", "authority", "records"]
    list_select_related = ["tenant", "key"]
    date_hierarchy = "created_at"
    search_fields = ["=id"]
    fields = ["id", "tenant", "created_at", "leaf_index", "signed_by", "statement"]
    readonly_fields = fields

    def _summary(self, obj) -> dict:
        return statement_summary(json.loads(bytes(obj.payload)), keyid=obj.key.kid)

    @admin.display(description="authority")
    def authority(self, obj) -> str:
        return self._summary(obj)["authority"] or "—"

    @admin.display(description="records")
    def records(self, obj) -> int:
        return self._summary(obj)["records"]

    @admin.display(description="signed by")
    def signed_by(self, obj) -> str:
        return obj.key.kid

    @admin.display(description="statement (as signed)")
    def statement(self, obj) -> str:
        return bytes(obj.payload).decode("utf-8")


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnlyAdmin):
    list_display = ["kid", "purpose", "created_at", "retired_at", "compromised_at"]
    list_filter = ["purpose"]
    fields = ["kid", "purpose", "note_name", "created_at", "retired_at", "compromised_at"]
    readonly_fields = fields
    actions = ["rotate"]

    @admin.action(description="Rotate: retire the current key of each selected purpose, make a new one",
                  permissions=["rotate"])
    def rotate(self, request, queryset):
        for purpose in sorted(set(queryset.values_list("purpose", flat=True))):
            key = key_rotate(purpose=purpose, actor=f"admin:{request.user.get_username()}")
            self.log_addition(request, key, f"rotated the {purpose} key")
            messages.success(request, f"New {purpose} key {key.kid}.")

    def has_rotate_permission(self, request) -> bool:
        return request.user.is_superuser


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ["tree_size", "signed_at", "key"]
    fields = ["tree_size", "signed_at", "key", "note"]
    readonly_fields = fields


@admin.register(KeyEvent)
class KeyEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "action", "key", "actor"]
    list_filter = ["action"]
    list_select_related = ["key"]
    readonly_fields = ["key", "action", "actor", "at", "detail"]


