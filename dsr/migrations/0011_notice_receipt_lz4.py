"""A notice's receipt (jsonb, ~7 kB: the subject's signed tombstones, their proofs, the checkpoint and the salts)
is compressed with lz4 instead of PostgreSQL's default, pglz.

Receipts go out of line (TOAST) and are compressed as they are written, one per notice. Measured on
bench_workflow's store (3,000 receipts inserted again by INSERT ... SELECT): pglz 0.13 ms of the server's time a
notice, lz4 0.06 ms, and the table smaller with lz4 (pglz barely compresses jsonb's binary form: 5.5 kB of 7.1).
That is a tenth of the database's share of an erasure request's time (bench/README.md, bench_workflow.py).

Only new values are compressed with lz4; stored ones keep pglz, and PostgreSQL reads both. On a server built
without lz4 (`default_toast_compression` offers no `lz4`) and on SQLite nothing changes.

The two functions below repeat tombstones 0006's on purpose: a migration does not import another app's
migration module (it may be squashed or edited), nor code that may change after it is applied.
"""
from django.db import migrations

COLUMNS = [("dsr_subjectnotice", "receipt")]


def _lz4_available(schema_editor) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and row[0])


def _compression_set(method: str):
    def apply(apps, schema_editor):
        if _lz4_available(schema_editor):
            for table, column in COLUMNS:
                schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")
    return apply


class Migration(migrations.Migration):

    dependencies = [
        ("dsr", "0010_drop_request_item_outcome_index"),
    ]

    operations = [
        migrations.RunPython(_compression_set("lz4"), _compression_set("DEFAULT")),
    ]
