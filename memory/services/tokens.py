"""API tokens: a tenant and a role, held by a service user of that tenant and role."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from memory import errors
from memory.auth import token_hash, token_key_new
from memory.models import ApiToken, Tenant


def tenant_get_or_create(*, name: str) -> Tenant:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise errors.invalid("invalid_tenant", "A tenant name has 1 to 100 characters.")
    tenant, _ = Tenant.objects.get_or_create(name=name)
    return tenant


def token_issue(*, tenant_name: str, role: str) -> tuple[ApiToken, str]:
    """Create the tenant if needed and a new token for `role`; returns the token and its key (shown once)."""
    if role not in ApiToken.Role.values:
        raise errors.invalid("invalid_role", f"role must be one of {ApiToken.Role.values}.")
    key = token_key_new()
    with transaction.atomic():
        tenant = tenant_get_or_create(name=tenant_name)
        user, created = get_user_model().objects.get_or_create(username=f"{role}@{tenant.name}"[:150])
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        group, _ = Group.objects.get_or_create(name=role)
        user.groups.add(group)
        token = ApiToken.objects.create(tenant=tenant, role=role, user=user, key_hash=token_hash(key), prefix=key[:8])
    return token, key
