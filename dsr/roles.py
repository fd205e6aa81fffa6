"""The admin's three roles, as groups of permissions (made by dsr migration 0003_admin_roles).

Every role reads every screen of the ledger; what differs is what a role may change:

- **operator** triages and runs subject requests. `dsr.change_subjectrequest` is the right to act on a
  request: verify or reject the subject's identity, extend the deadline, start the workflow.
- **legal** resolves retention conflicts (`dsr.change_retentionconflict`: uphold, override, defer), places
  and releases legal holds (`retention.add_legalhold`, `retention.change_legalhold`) and edits the
  retention table (`retention.add_retentionrule`, `retention.change_retentionrule`: add, extend or
  shorten, retire; `retention.add_contentclass`).
- **auditor** reads everything and changes nothing: view permissions only.

No role has a delete permission, and the admin refuses every delete of these models whoever asks: a
request, a conflict, a hold, a rule, a version or a history row is never deleted (records are forgotten
through the one guarded path, `memory.admin`). API tokens of a role (`memory.services.tokens.token_issue`)
join the group of the same name; the API itself checks the token's role, these permissions are the admin's.

The migration holds a frozen copy of this table (migrations must not change when this module does);
screens added later become readable by every role when migrations run (`roles_complete`, a post_migrate
receiver); `tests/admin/test_roles.py` checks that the database agrees with this module.
"""
from __future__ import annotations

# The models each role may view: the screens of the ledger (internal tables such as the scope closure,
# the lock-recompute grant, the log's nodes or the tombstone salts are not screens and are not listed).
VIEWABLE: dict[str, tuple[str, ...]] = {
    "memory": ("tenant", "subject", "scope", "record", "derivedartifact", "forgetevent", "apitoken"),
    "retention": ("contentclass", "retentionrule", "retentiontableversion", "legalhold"),
    "dsr": ("subjectrequest", "requesttransition", "requestitem", "retentionconflict", "subjectnotice"),
    "tombstones": ("tombstone", "signingkey", "checkpoint", "keyevent"),
    "drp": ("agent", "datarightsrequest"),
    "alerts": ("alert", "webhookdelivery"),
    "audit_exports": ("auditexport",),
}

CHANGES: dict[str, tuple[str, ...]] = {
    "operator": ("dsr.change_subjectrequest", "alerts.acknowledge_alert"),
    "legal": (
        "dsr.change_retentionconflict",
        "retention.add_legalhold",
        "retention.change_legalhold",
        "retention.add_retentionrule",
        "retention.change_retentionrule",
        "retention.add_contentclass",
    ),
    "auditor": (),
}

ROLES = tuple(CHANGES)
LEDGER_APPS = tuple(VIEWABLE)


def screens(app_label: str | None = None) -> set[str]:
    """`app.view_model` for every admin screen of the ledger's apps (or of one of them): a screen added
    later (a sweep's runs, the audit's reports) is readable by every role without a new table here."""
    from django.contrib import admin

    return {f"{m._meta.app_label}.view_{m._meta.model_name}" for m in admin.site._registry
            if m._meta.app_label in LEDGER_APPS and (app_label is None or m._meta.app_label == app_label)}


def role_permissions(role: str) -> set[str]:
    """`app_label.codename` of every permission the role's group holds."""
    views = {f"{app}.view_{model}" for app, models in VIEWABLE.items() for model in models}
    return views | screens() | set(CHANGES[role])


def _permissions(names):
    from django.contrib.auth.models import Permission
    from django.db.models import Q

    wanted = Q(pk__in=[])
    for name in names:
        app, codename = name.split(".")
        wanted |= Q(content_type__app_label=app, codename=codename)
    return Permission.objects.filter(wanted)


def roles_sync() -> None:
    """Make the three groups hold exactly their permissions (what the migration does, for a database whose
    data was flushed, as transactional tests do; not needed in production)."""
    from django.contrib.auth.models import Group

    for role in ROLES:
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.set(_permissions(role_permissions(role)))


def roles_complete(sender, app_config=None, using="default", **kwargs) -> None:
    """post_migrate (dsr.apps): every role may read the screens of a ledger app added since the groups were
    made. Only view permissions are added, to groups that exist; nothing is removed, no change is granted
    (what a role may change is decided by a migration, not by deploying)."""
    from django.contrib.auth.models import Group

    if app_config is None or app_config.label not in LEDGER_APPS:
        return
    views = list(_permissions(screens(app_config.label)).using(using))
    if not views:
        return
    for group in Group.objects.using(using).filter(name__in=ROLES):
        group.permissions.add(*views)
