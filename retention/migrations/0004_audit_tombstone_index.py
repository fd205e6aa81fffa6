"""The coverage audit's index of the tombstones' deletions (retention.TombstonedDeletion): each signed
statement is parsed once, when the audit first meets it, instead of at every audit; the audit keeps how far
the log is indexed on its report (`tombstones_indexed_to`). Append-only, like the write ledger: UPDATE and
DELETE are refused by the database (message starting `write_ledger:`), enabled ALWAYS on PostgreSQL;
TRUNCATE is not (the test runner flushes with it; an emptied index makes the audit report more, not less).
"""
from django.db import migrations, models

PG_FORWARD = [
    """
CREATE OR REPLACE FUNCTION retention_tombstoneddeletion_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
        MESSAGE = 'write_ledger: the audit''s tombstone index is append-only; ' || TG_OP || ' refused';
END
$$;
""",
    """
CREATE TRIGGER retention_tombstoneddeletion_append_only BEFORE UPDATE OR DELETE ON retention_tombstoneddeletion
FOR EACH ROW EXECUTE FUNCTION retention_tombstoneddeletion_refuse();
""",
    "ALTER TABLE retention_tombstoneddeletion ENABLE ALWAYS TRIGGER retention_tombstoneddeletion_append_only",
]
PG_REVERSE = [
    "DROP TRIGGER IF EXISTS retention_tombstoneddeletion_append_only ON retention_tombstoneddeletion",
    "DROP FUNCTION IF EXISTS retention_tombstoneddeletion_refuse()",
]
SQLITE_FORWARD = [
    f"""
CREATE TRIGGER retention_tombstoneddeletion_no_{op.lower()} BEFORE {op} ON retention_tombstoneddeletion
FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'write_ledger: the audit''s tombstone index is append-only; {op} refused');
END
""" for op in ("UPDATE", "DELETE")
]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS retention_tombstoneddeletion_no_{op}" for op in ("update", "delete")]


def index_protect(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        raise RuntimeError(f"the audit's tombstone index is protected on PostgreSQL and SQLite only, not {vendor}")
    for sql in PG_FORWARD if vendor == "postgresql" else SQLITE_FORWARD:
        schema_editor.execute(sql, params=None)


def index_unprotect(apps, schema_editor) -> None:
    for sql in PG_REVERSE if schema_editor.connection.vendor == "postgresql" else SQLITE_REVERSE:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ("retention", "0003_write_ledger_trigger"),
    ]

    operations = [
        migrations.AddField(
            model_name="coveragereport",
            name="tombstones_indexed_to",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="TombstonedDeletion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tombstone_id", models.UUIDField()),
                ("leaf_index", models.BigIntegerField()),
                ("tenant_id", models.BigIntegerField()),
                ("record_id", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["record_id"], name="tombstoned_record_idx")],
            },
        ),
        migrations.RunPython(index_protect, index_unprotect),
    ]
