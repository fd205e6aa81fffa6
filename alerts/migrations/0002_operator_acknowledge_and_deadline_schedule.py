"""Operators may acknowledge alerts (`alerts.acknowledge_alert`, the one change the alerts admin offers: dsr/roles.py
lists it in the operator role; the view permissions come from dsr.roles.roles_complete like every screen's); and
the check for subject requests near their deadline (`dsr.deadline_alerts`) runs hourly, a django-celery-beat
PeriodicTask editable in the admin (an existing task of this name is left as an operator edited it)."""
from django.db import migrations
from django.utils import timezone

SCHEDULE = "alerts: requests near their deadline"


def operator_acknowledges(apps, schema_editor):
    # Permissions are normally made after every migration ran (post_migrate); make this app's now.
    from django.contrib.auth.management import create_permissions

    config = apps.get_app_config("alerts")
    config.models_module = True
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    group, _ = apps.get_model("auth", "Group").objects.get_or_create(name="operator")
    group.permissions.add(Permission.objects.get(content_type__app_label="alerts", codename="acknowledge_alert"))


def operator_acknowledges_undo(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for group in apps.get_model("auth", "Group").objects.filter(name="operator"):
        group.permissions.remove(*Permission.objects.filter(content_type__app_label="alerts",
                                                            codename="acknowledge_alert"))


def schedule_create(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if not PeriodicTask.objects.filter(name=SCHEDULE).exists():
        every, _ = IntervalSchedule.objects.get_or_create(every=60, period="minutes")
        PeriodicTask.objects.create(name=SCHEDULE, task="dsr.deadline_alerts", interval=every, enabled=True,
                                    description="Forgetting Ledger: see dsr/services/failure_alerts.py")
        apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
            ident=1, defaults={"last_update": timezone.now()})


def schedule_remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("alerts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("dsr", "0003_admin_roles"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunPython(operator_acknowledges, operator_acknowledges_undo),
        migrations.RunPython(schedule_create, schedule_remove),
    ]
