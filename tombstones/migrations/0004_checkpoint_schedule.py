"""Sign a checkpoint of the tombstone log every minute (a django-celery-beat PeriodicTask, editable in the
admin), so the published log head stays fresh; receipts also sign one on demand. An existing task of
this name is left as an operator edited it."""
from django.db import migrations
from django.utils import timezone

NAME = "tombstone log: sign checkpoint"


def schedule_create(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if not PeriodicTask.objects.filter(name=NAME).exists():
        every, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
        PeriodicTask.objects.create(name=NAME, task="tombstones.checkpoint_sign", interval=every, enabled=True,
                                    description="Forgetting Ledger: see tombstones/services/log.py")
        apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
            ident=1, defaults={"last_update": timezone.now()})


def schedule_remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("tombstones", "0003_salts_per_tombstone"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule_create, schedule_remove)]
