# The admin's roles: the groups operator, legal and auditor with their permissions (dsr/roles.py says what
# each one means). A frozen copy of dsr.roles: a migration must not change when the module does;
# tests/admin/test_roles.py checks that the two agree. Groups that already exist (an API token of that
# role was issued first: memory.services.tokens.token_issue makes the group by name) are completed, not
# replaced; the reverse removes these permissions and leaves the groups (tokens' users belong to them).

from django.db import migrations

VIEWABLE = {
    "memory": ("tenant", "subject", "scope", "record", "derivedartifact", "forgetevent", "apitoken"),
    "retention": ("contentclass", "retentionrule", "retentiontableversion", "legalhold"),
    "dsr": ("subjectrequest", "requesttransition", "requestitem", "retentionconflict", "subjectnotice"),
    "tombstones": ("tombstone", "signingkey", "checkpoint", "keyevent"),
}
CHANGES = {
    "operator": ("dsr.change_subjectrequest",),
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


def _permissions(apps, role):
    Permission = apps.get_model("auth", "Permission")
    names = [f"{app}.view_{model}" for app, models in VIEWABLE.items() for model in models] + list(CHANGES[role])
    found = []
    for name in names:
        app, codename = name.split(".")
        found.append(Permission.objects.get(content_type__app_label=app, codename=codename))
    return found


def roles_create(apps, schema_editor):
    # Permissions are normally made after every migration has run (post_migrate); make them now.
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    for role in CHANGES:
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(*_permissions(apps, role))


def roles_remove(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for group in Group.objects.filter(name__in=list(CHANGES)):
        group.permissions.remove(*_permissions(apps, group.name))


class Migration(migrations.Migration):

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("memory", "0004_archivedeletion_fleetcopynotice"),
        ("retention", "0001_initial"),
        ("tombstones", "0002_permanence"),
        ("dsr", "0002_request_effective_due_date"),
    ]

    operations = [
        migrations.RunPython(roles_create, roles_remove),
    ]
