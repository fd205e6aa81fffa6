"""The write ledger (retention.WriteLedgerEntry) is filled by the database, not by Python, for PostgreSQL
and SQLite: an AFTER INSERT trigger on memory_record appends one ledger row per record written, whoever
writes it (the service, raw SQL, a bulk load). The coverage audit (retention.audit) trusts it because no
code path can forget to call it.

  - PostgreSQL: a statement-level trigger with a transition table (one INSERT ... SELECT per statement,
    cheap for bulk loads), enabled ALWAYS so that it also fires under `session_replication_role =
    replica`, which bulk loaders use to skip the other triggers.
  - SQLite: a row-level trigger (SQLite has no statement-level triggers). Django's SQLite schema editor
    re-creates a table, dropping its triggers, for many ALTERs: tests/retention/test_write_ledger.py
    migrates a SQLite file from scratch and checks that these triggers are there at the end.

The ledger is append-only: UPDATE and DELETE of its rows are refused (SQLSTATE 23001 on PostgreSQL,
SQLITE_CONSTRAINT on SQLite; both reach Django as IntegrityError, message starting `write_ledger:`).
TRUNCATE is not refused: the test runner flushes tables with it (as for the tombstones' permanence).

The rows already at rest when this migration runs are ledgered from the table, marked `backfilled`.
"""
from django.db import migrations

COLUMNS = "record_id, tenant_id, content_class_id, subject_id, scope_id, created_at, written_at, backfilled"

PG_FORWARD = [
    f"""
CREATE OR REPLACE FUNCTION retention_writeledger_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retention_writeledgerentry ({COLUMNS})
    SELECT id, tenant_id, content_class_id, subject_id, scope_id, created_at, now(), false FROM written;
    RETURN NULL;
END
$$;
""",
    """
CREATE TRIGGER memory_record_write_ledger AFTER INSERT ON memory_record
REFERENCING NEW TABLE AS written
FOR EACH STATEMENT EXECUTE FUNCTION retention_writeledger_append();
""",
    "ALTER TABLE memory_record ENABLE ALWAYS TRIGGER memory_record_write_ledger",
    """
CREATE OR REPLACE FUNCTION retention_writeledger_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
        MESSAGE = 'write_ledger: the write ledger is append-only; ' || TG_OP || ' refused';
END
$$;
""",
    """
CREATE TRIGGER retention_writeledger_append_only BEFORE UPDATE OR DELETE ON retention_writeledgerentry
FOR EACH ROW EXECUTE FUNCTION retention_writeledger_refuse();
""",
    "ALTER TABLE retention_writeledgerentry ENABLE ALWAYS TRIGGER retention_writeledger_append_only",
]

PG_REVERSE = [
    "DROP TRIGGER IF EXISTS retention_writeledger_append_only ON retention_writeledgerentry",
    "DROP FUNCTION IF EXISTS retention_writeledger_refuse()",
    "DROP TRIGGER IF EXISTS memory_record_write_ledger ON memory_record",
    "DROP FUNCTION IF EXISTS retention_writeledger_append()",
]

# Django stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' (naive UTC); '%f' gives SS.SSS, which it reads.
SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"

SQLITE_FORWARD = [
    f"""
CREATE TRIGGER memory_record_write_ledger AFTER INSERT ON memory_record
FOR EACH ROW
BEGIN
    INSERT INTO retention_writeledgerentry ({COLUMNS})
    VALUES (NEW.id, NEW.tenant_id, NEW.content_class_id, NEW.subject_id, NEW.scope_id, NEW.created_at,
            {SQLITE_NOW}, 0);
END
""",
    """
CREATE TRIGGER retention_writeledger_no_update BEFORE UPDATE ON retention_writeledgerentry
FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'write_ledger: the write ledger is append-only; UPDATE refused');
END
""",
    """
CREATE TRIGGER retention_writeledger_no_delete BEFORE DELETE ON retention_writeledgerentry
FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'write_ledger: the write ledger is append-only; DELETE refused');
END
""",
]

SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS retention_writeledger_no_delete",
    "DROP TRIGGER IF EXISTS retention_writeledger_no_update",
    "DROP TRIGGER IF EXISTS memory_record_write_ledger",
]

BACKFILL = {
    "postgresql": f"INSERT INTO retention_writeledgerentry ({COLUMNS}) SELECT id, tenant_id, content_class_id, "
                  "subject_id, scope_id, created_at, now(), true FROM memory_record ORDER BY id",
    "sqlite": f"INSERT INTO retention_writeledgerentry ({COLUMNS}) SELECT id, tenant_id, content_class_id, "
              f"subject_id, scope_id, created_at, {SQLITE_NOW}, 1 FROM memory_record ORDER BY id",
}


def _run(schema_editor, statements):
    for sql in statements:
        schema_editor.execute(sql, params=None)


def ledger_install(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_FORWARD)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_FORWARD)
    else:
        # Fail closed: an audit without a ledger would trust the system's own account of what it wrote.
        raise RuntimeError(f"the write ledger trigger exists for PostgreSQL and SQLite only, not {vendor}")
    schema_editor.execute(BACKFILL[vendor], params=None)


def ledger_remove(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    _run(schema_editor, PG_REVERSE if vendor == "postgresql" else SQLITE_REVERSE)


class Migration(migrations.Migration):

    dependencies = [
        ("retention", "0002_write_ledger_and_coverage_reports"),
        ("memory", "0004_archivedeletion_fleetcopynotice"),
    ]

    operations = [
        migrations.RunPython(ledger_install, ledger_remove),
    ]
