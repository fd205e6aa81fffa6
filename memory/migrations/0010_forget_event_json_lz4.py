"""A forget event's JSON (target, outcomes, artifacts) is compressed with lz4 instead of PostgreSQL's default, pglz.

The three go out of line (TOAST) once past ~2 kB, compressed when they are written. A sweep batch's event lists
its 5,000 records twice (the target and the outcomes) and its 10,000 artifacts (~165 kB of JSON): pglz took ~4 ms
of the server's CPU to compress them, lz4 ~0.5 ms, to ~25% more bytes (68 kB -> 84 kB an event; measured on
bench_compaction's store). Per 100,000 purged records that is ~0.08 s of the server's CPU (bench/README.md,
bench_compaction.py), as migration tombstones 0006 did for the statements. Small events (an API forget's) stay
inline and uncompressed either way.

Only new values are compressed with lz4; stored ones keep pglz, and PostgreSQL reads both. On a server built
without lz4 (`default_toast_compression` offers no `lz4`) and on SQLite nothing changes.

The two functions below repeat tombstones 0006's on purpose: a migration does not import another app's
migration module (it may be squashed or edited), nor code that may change after it is applied.
"""
from django.db import migrations

COLUMNS = [("memory_forgetevent", "target"), ("memory_forgetevent", "outcomes"), ("memory_forgetevent", "artifacts")]


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
        ("memory", "0009_deleted_record_no_fk_checks"),
    ]

    operations = [
        migrations.RunPython(_compression_set("lz4"), _compression_set("DEFAULT")),
    ]
