"""Two indexes of `memory_record` that repeated others: `record_scope_idx` and `record_class_idx` indexed the
same columns as the foreign keys' own indexes (`scope_id`, `content_class_id`), so every write of a record, and
every hide (never a HOT update: bench/README.md), wrote an entry into each twice. Reads use the foreign keys'
indexes, as they could before. DROP INDEX holds the table's lock for an instant only: nothing is rebuilt."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0016_similarity_hnsw_index"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="record", name="record_scope_idx"),
        migrations.RemoveIndex(model_name="record", name="record_class_idx"),
    ]
