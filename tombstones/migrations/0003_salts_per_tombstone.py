"""Salts in one row per tombstone (fewer rows to write per append); no single-column indexes on the
tombstone's foreign keys. SQLite rebuilds the tombstone table to drop them, and a rebuilt table has lost
its triggers: they are installed again here (on PostgreSQL, dropped and re-created: the same triggers)."""
import importlib

import django.db.models.deletion
from django.db import migrations, models


permanence = importlib.import_module("tombstones.migrations.0002_permanence")


def _salts_copy(apps, schema_editor):
    old, new = apps.get_model("tombstones", "TombstoneSalt"), apps.get_model("tombstones", "TombstoneSalts")
    grouped: dict = {}
    for tombstone_id, record_id, salt in old.objects.values_list("tombstone_id", "record_id", "salt"):
        grouped.setdefault(tombstone_id, {})[record_id] = salt
    new.objects.bulk_create([new(tombstone_id=t, salts=s) for t, s in grouped.items()], batch_size=1000)


def _triggers_reinstall(apps, schema_editor):
    permanence._drop(apps, schema_editor)
    permanence._create(apps, schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0001_initial'),
        ('tombstones', '0002_permanence'),
    ]

    operations = [
        migrations.CreateModel(
            name='TombstoneSalts',
            fields=[
                ('tombstone', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, primary_key=True, related_name='salts', serialize=False, to='tombstones.tombstone')),
                ('salts', models.JSONField()),
            ],
        ),
        migrations.RunPython(_salts_copy, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='tombstone',
            name='key',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='tombstones', to='tombstones.signingkey'),
        ),
        migrations.AlterField(
            model_name='tombstone',
            name='tenant',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='tombstones', to='memory.tenant'),
        ),
        migrations.DeleteModel(
            name='TombstoneSalt',
        ),
        migrations.RunPython(_triggers_reinstall, migrations.RunPython.noop),
    ]
