"""Salts shredding (DESIGN.md invariant 6): the commitment salts are kept only until the data subject's receipt
carries them, then destroyed (their `TombstoneSalts` rows deleted, dsr.services.notify); a forget that no subject
request asked for no longer keeps them at all (memory.services.forget). Nothing changes in this table's shape:
a row is present exactly while its salts are kept.

This migration schedules the sweep that destroys what no receipt awaits (`salts_shredding`, dsr.services.salts)
every hour, as a django-celery-beat PeriodicTask (like memory 0006's sweeps): the backstop for salts kept before
this release, which its first run destroys, and for anything left behind. An existing task of this name is left
as an operator edited it; the reverse removes it.
"""
import json

from django.db import migrations
from django.utils import timezone

NAME = "sweep: salts shredding"


def schedule_create(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if PeriodicTask.objects.filter(name=NAME).exists():
        return
    every, _ = IntervalSchedule.objects.get_or_create(every=60, period="minutes")
    PeriodicTask.objects.create(name=NAME, task="memory.sweep_start", kwargs=json.dumps({"kind": "salts_shredding"}),
                                interval=every, enabled=True, description="Forgetting Ledger: see dsr/services/salts.py")
    # Tell a running beat that its schedule changed.
    apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
        ident=1, defaults={"last_update": timezone.now()})


def schedule_remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("tombstones", "0007_tombstone_rows_inserted_as_they_arrive"),
        ("memory", "0012_tsprivacy_salt_with_content_fleet_ack"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule_create, schedule_remove)]
