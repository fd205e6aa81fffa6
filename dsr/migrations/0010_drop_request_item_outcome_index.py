"""Drop `request_item_outcome_idx` (request, outcome): `request_item_unique` (request, kind, object_id) finds a
request's items as well, and the steps read them by request and kind (the pending ones of a kind are a few
dozen rows to filter). Every item insert and every item update (none is HOT) wrote the dropped index's entry
too: the erasure workflow writes each item two or three times (bench_workflow.py, bench/README.md)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('dsr', '0009_drop_duplicate_fk_indexes'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='requestitem',
            name='request_item_outcome_idx',
        ),
    ]
