"""A tombstone's statement and its salts are compressed with lz4 instead of PostgreSQL's default, pglz.

Both go out of line (TOAST) once past ~2 kB, compressed when they are written. A sweep batch's statement lists
5,000 records and 10,000 artifacts (~1.4 MB): pglz took ~20-30 ms of the server's CPU to compress it, lz4 ~3 ms,
to about the same size (measured on bench_compaction's store: 20 statements, 18 MB either way). Per 100,000
purged records that was ~0.45 s of the server's ~4-5 s (bench/README.md, bench_compaction.py). Small
statements (an API forget's) stay inline and uncompressed either way.

Only new values are compressed with lz4; stored ones keep pglz, and PostgreSQL reads both. The signed bytes
are unchanged (compression is below the value). On a server built without lz4 (`default_toast_compression`
offers no `lz4`) and on SQLite nothing changes.
"""
from django.db import migrations

COLUMNS = [("tombstones_tombstone", "payload"), ("tombstones_tombstonesalts", "salts")]


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
        ("tombstones", "0005_foreign_keys_checked_by_the_issuer"),
    ]

    operations = [
        migrations.RunPython(_compression_set("lz4"), _compression_set("DEFAULT")),
    ]
