"""The sweeps' and the coverage audit's schedules, as django-celery-beat PeriodicTasks (the beat scheduler
is `django_celery_beat.schedulers:DatabaseScheduler`), so operators edit them in the admin. Created
enabled, with these defaults; a task that already exists under one of these names is left as it is (an
operator's edits win over a re-run of the migration). The reverse removes them.
"""
import json

from django.db import migrations
from django.utils import timezone

# name -> (task, kwargs, interval in minutes or a daily "HH:MM" UTC)
SCHEDULES = {
    "sweep: pact TTL expiry": ("memory.sweep_start", {"kind": "pact_expiry"}, 60),
    "sweep: compaction": ("memory.sweep_start", {"kind": "compaction"}, 60),
    "sweep: deferred erasures": ("memory.sweep_start", {"kind": "deferred_erasures"}, 60),
    "sweep: pending confirmations": ("memory.sweep_start", {"kind": "confirmations"}, 15),
    "coverage audit": ("retention.coverage_audit", {}, "03:15"),
}


def schedules_create(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    for name, (task, kwargs, every) in SCHEDULES.items():
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        if isinstance(every, int):
            schedule, _ = IntervalSchedule.objects.get_or_create(every=every, period="minutes")
            when = {"interval": schedule}
        else:
            hour, minute = every.split(":")
            schedule, _ = CrontabSchedule.objects.get_or_create(
                minute=str(int(minute)), hour=str(int(hour)), day_of_week="*", day_of_month="*", month_of_year="*",
                timezone="UTC")
            when = {"crontab": schedule}
        PeriodicTask.objects.create(name=name, task=task, kwargs=json.dumps(kwargs), enabled=True,
                                    description="Forgetting Ledger: see memory/sweeps and retention/audit.py", **when)
    # Tell a running beat that its schedule changed.
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def schedules_remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name__in=list(SCHEDULES)).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0005_sweep_runs"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunPython(schedules_create, schedules_remove),
    ]
