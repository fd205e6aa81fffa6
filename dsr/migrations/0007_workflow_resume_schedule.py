"""Run `dsr.workflow_resume` every five minutes (a django-celery-beat PeriodicTask, editable in the admin): it
re-enqueues the next step of every workflow that stands still between steps, started requests not yet
planned included, so a lost message (a broker restart, a dispatch that never arrived) delays a request by
minutes instead of stranding it. Harmless when the step is queued anyway: steps are idempotent. An existing
task of this name is left as an operator edited it."""
from django.db import migrations
from django.utils import timezone

NAME = "erasure workflow: resume stalled requests"


def schedule_create(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if not PeriodicTask.objects.filter(name=NAME).exists():
        every, _ = IntervalSchedule.objects.get_or_create(every=5, period="minutes")
        PeriodicTask.objects.create(name=NAME, task="dsr.workflow_resume", interval=every, enabled=True,
                                    description="Forgetting Ledger: see dsr/tasks.py")
        apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
            ident=1, defaults={"last_update": timezone.now()})


def schedule_remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("dsr", "0006_request_workflow_started_at"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule_create, schedule_remove)]
