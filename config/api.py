"""Shared API pieces: strict JSON field types and role permissions.

DRF's CharField turns 42 into "42" and its IntegerField turns "42" into 42; a compliance API must not
guess, so wrong JSON types are refused (400 `invalid`).
"""
from __future__ import annotations

from rest_framework import permissions, serializers


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictSerializer(serializers.Serializer):
    """Unknown fields are an error, not silently dropped: a typo must not change what gets forgotten."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown[:20]})
        return super().to_internal_value(data)


def role_required(*roles: str) -> type[permissions.BasePermission]:
    """A permission class admitting tokens of these roles (`memory.models.ApiToken.role`)."""

    class HasRole(permissions.BasePermission):
        message = f"This endpoint needs a token with one of the roles: {', '.join(roles)}."

        def has_permission(self, request, view) -> bool:
            token = getattr(request, "auth", None)
            return getattr(token, "role", None) in roles

    HasRole.__name__ = f"HasRole_{'_'.join(roles)}"
    return HasRole
