"""The sweeps' partial index over hidden and redacted rows is on `id`, not `forgotten_at`: a claim takes the
next N eligible rows past its cursor (`ORDER BY id LIMIT N FOR UPDATE SKIP LOCKED`), which this index
returns in order without visiting the live rows in between (bench/bench_compaction.py). Nothing filters or
sorts on ranges of `forgotten_at`; `forgotten_at IS NOT NULL` still uses the index through its predicate.
Plain CREATE/DROP INDEX on both databases (SQLite does not re-create the table, so the guard triggers stay).
"""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0007_forget_event_permanent"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="record",
            name="record_forgotten_idx",
        ),
        migrations.AddIndex(
            model_name="record",
            index=models.Index(condition=models.Q(("forgotten_at__isnull", False)), fields=["id"],
                               name="record_forgotten_id_idx"),
        ),
    ]
