"""The database half of invariant 1: a guard trigger on `memory_record`, for PostgreSQL and SQLite.

The Python half is the one guarded forget path in `memory.services`; this trigger is what stops every
path that forgets to call it (raw SQL, `QuerySet._raw_delete`, a stale `save()`, a bulk `.update()`).

A record is *locked* while `held` is true or `retained_until` is in the future. The trigger refuses:
  - DELETE of a locked row;
  - on a locked row, an UPDATE of id, tenant_id, scope_id, subject_id, content_class_id, created_at,
    commitment or salt (the row's identity and evidence), and clearing forgotten_at or redacted_at;
  - on a locked row that is held or whose lock protects content, an UPDATE of content (write-once:
    redact is refused, soft stays permitted; on an existence-only lock, redact stays permitted);
  - on a locked row, shortening the lock (lowering retained_until or setting it to NULL, clearing held
    or lock_protects_content) unless `retention_lockrecomputegrant` holds a row visible to this
    transaction: `retention.services` inserts one at the start of its recompute transaction and deletes
    it before commit, so no other transaction ever sees it. Extending a lock is always allowed;
  - on any row, locked or not, clearing redacted_at: the content is gone, and a row that says otherwise
    (a stale `save()` writing back old content, say) would resurrect erased data.

Every refusal is an integrity error (PostgreSQL SQLSTATE 23001 restrict_violation, SQLite
SQLITE_CONSTRAINT: both reach Python as `django.db.IntegrityError`) whose message starts with a stable
code: `legal_hold:` when the row is held (a hold wins), else `retention_lock:`; `redaction_final:` for
clearing redacted_at on an unlocked row; `lock_grant:` (PostgreSQL) when a grant row would be committed.

PostgreSQL only, also here:
  - the cheap part of each test sits in the trigger's WHEN clause, so an UPDATE or DELETE that cannot be
    refused (an unlocked row, a soft forget of a locked row) never enters PL/pgSQL (PERFORMANCE.md);
  - a deferred constraint trigger refuses to commit a `retention_lockrecomputegrant` row, so a stray
    committed grant cannot unlock every record for everyone afterwards;
  - `fillfactor = 90` on memory_record, so the hide UPDATE is a HOT update (PERFORMANCE.md);
  - the foreign keys memory_lineage -> memory_record, memory_lineage -> memory_derivedartifact and
    memory_recordtag -> memory_record become ON DELETE CASCADE in the database, so one set-based DELETE
    of records takes their lineage and tags with it. Django 5.2 cannot declare that on the model: a later
    migration that alters one of these fields re-creates its constraint without the cascade
    (tests/memory/test_guard_trigger.py checks the catalog and will notice).
SQLite: foreign keys stay as Django declares them (no database cascade; Django's collector handles
children there); the grant commit check has no SQLite equivalent (no deferred triggers). SQLite keeps
datetimes as text ('YYYY-MM-DD HH:MM:SS[.ffffff]', naive UTC, as Django writes them): the trigger
compares with julianday(), which also parses the 'T' separator and a UTC offset, and treats a
retained_until it cannot parse as locked (fail closed). Django's SQLite schema editor re-creates a table
(dropping its triggers) for many ALTERs: tests/memory/test_guard_sqlite.py migrates from scratch and
proves the triggers are still there at the end.
"""
from django.db import migrations

# A locked row's identity and evidence: never updated while the lock lasts.
PROTECTED_COLUMNS = ["id", "tenant_id", "scope_id", "subject_id", "content_class_id", "created_at", "commitment",
                     "salt"]

# --- PostgreSQL ---------------------------------------------------------------------------------

PG_LOCKED = "(OLD.held OR OLD.retained_until > now())"
PG_PROTECTED_CHANGED = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in PROTECTED_COLUMNS)
PG_SHORTENS = (
    "(OLD.held AND NOT NEW.held)"
    " OR (OLD.lock_protects_content AND NOT NEW.lock_protects_content)"
    " OR (OLD.retained_until IS NOT NULL AND (NEW.retained_until IS NULL OR NEW.retained_until < OLD.retained_until))"
)
# A superset of the rows the function refuses: anything else never reaches PL/pgSQL.
PG_UPDATE_WHEN = f"""
    (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL)
    OR ({PG_LOCKED} AND (
        {PG_PROTECTED_CHANGED}
        OR (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL)
        OR ((OLD.held OR OLD.lock_protects_content) AND NEW.content IS DISTINCT FROM OLD.content)
        OR {PG_SHORTENS}
    ))
"""

PG_PROTECTED_CHECKS = "\n".join(
    f"    IF NEW.{c} IS DISTINCT FROM OLD.{c} THEN refused := refused || '{c}'::text; END IF;"
    for c in PROTECTED_COLUMNS
)

PG_FORWARD = [
    f"""
CREATE OR REPLACE FUNCTION memory_record_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    locked boolean := OLD.held OR coalesce(OLD.retained_until > now(), false);
    lock_text text;
    refused text[] := '{{}}';
    shortened text[] := '{{}}';
BEGIN
    IF OLD.held THEN
        lock_text := format('legal_hold: record %s is under legal hold', OLD.id);
    ELSE
        lock_text := format('retention_lock: record %s is retained until %s', OLD.id,
            to_char(OLD.retained_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
    END IF;

    IF TG_OP = 'DELETE' THEN
        IF locked THEN
            RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = lock_text || '; DELETE refused';
        END IF;
        RETURN OLD;
    END IF;

    IF NOT locked THEN
        IF OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
                'redaction_final: record %s was redacted; clearing redacted_at refused', OLD.id);
        END IF;
        RETURN NEW;
    END IF;

{PG_PROTECTED_CHECKS}
    IF OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL THEN
        refused := refused || 'forgotten_at (cleared)'::text;
    END IF;
    IF OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL THEN
        refused := refused || 'redacted_at (cleared)'::text;
    END IF;
    IF (OLD.held OR OLD.lock_protects_content) AND NEW.content IS DISTINCT FROM OLD.content THEN
        refused := refused || 'content (the lock protects content)'::text;
    END IF;
    IF cardinality(refused) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = lock_text || '; UPDATE of ' || array_to_string(refused, ', ') || ' refused';
    END IF;

    IF OLD.held AND NOT NEW.held THEN
        shortened := shortened || 'held'::text;
    END IF;
    IF OLD.lock_protects_content AND NOT NEW.lock_protects_content THEN
        shortened := shortened || 'lock_protects_content'::text;
    END IF;
    IF OLD.retained_until IS NOT NULL
       AND (NEW.retained_until IS NULL OR NEW.retained_until < OLD.retained_until) THEN
        shortened := shortened || 'retained_until'::text;
    END IF;
    -- Only the retention engine's recompute transaction holds a grant row, and only it can see it.
    IF cardinality(shortened) > 0 AND NOT EXISTS (SELECT 1 FROM retention_lockrecomputegrant) THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = lock_text || '; shortening the lock (' || array_to_string(shortened, ', ')
                      || ') refused outside a lock recomputation';
    END IF;
    RETURN NEW;
END
$$;
""",
    f"""
CREATE TRIGGER memory_record_guard_delete BEFORE DELETE ON memory_record
FOR EACH ROW WHEN {PG_LOCKED}
EXECUTE FUNCTION memory_record_guard();
""",
    f"""
CREATE TRIGGER memory_record_guard_update BEFORE UPDATE ON memory_record
FOR EACH ROW WHEN ({PG_UPDATE_WHEN})
EXECUTE FUNCTION memory_record_guard();
""",
    """
CREATE OR REPLACE FUNCTION retention_lockrecomputegrant_uncommitted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM retention_lockrecomputegrant WHERE id = NEW.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'lock_grant: lock recompute grant %s must be deleted before its transaction commits', NEW.id);
    END IF;
    RETURN NULL;
END
$$;
""",
    """
CREATE CONSTRAINT TRIGGER retention_lockrecomputegrant_uncommitted
AFTER INSERT ON retention_lockrecomputegrant
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION retention_lockrecomputegrant_uncommitted();
""",
    "ALTER TABLE memory_record SET (fillfactor = 90)",
]

PG_REVERSE = [
    "ALTER TABLE memory_record RESET (fillfactor)",
    "DROP TRIGGER IF EXISTS retention_lockrecomputegrant_uncommitted ON retention_lockrecomputegrant",
    "DROP FUNCTION IF EXISTS retention_lockrecomputegrant_uncommitted()",
    "DROP TRIGGER IF EXISTS memory_record_guard_update ON memory_record",
    "DROP TRIGGER IF EXISTS memory_record_guard_delete ON memory_record",
    "DROP FUNCTION IF EXISTS memory_record_guard()",
]

# (table, column, referenced table): the foreign keys that cascade in the database on PostgreSQL.
CASCADED_FKS = [
    ("memory_lineage", "source_id", "memory_record"),
    ("memory_lineage", "artifact_id", "memory_derivedartifact"),
    ("memory_recordtag", "record_id", "memory_record"),
]

FK_QUERY = """
SELECT con.conname, ref_col.attname, con.condeferrable, con.condeferred
FROM pg_constraint con
JOIN pg_attribute col ON col.attrelid = con.conrelid AND col.attnum = con.conkey[1]
JOIN pg_attribute ref_col ON ref_col.attrelid = con.confrelid AND ref_col.attnum = con.confkey[1]
WHERE con.contype = 'f'
  AND con.conrelid = to_regclass(%s)
  AND con.confrelid = to_regclass(%s)
  AND cardinality(con.conkey) = 1
  AND col.attname = %s
"""


def _pg_set_fk_cascade(schema_editor, cascade: bool) -> None:
    q = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        for table, column, ref_table in CASCADED_FKS:
            cursor.execute(FK_QUERY, [table, ref_table, column])
            rows = cursor.fetchall()
            if not rows:
                raise RuntimeError(f"no foreign key {table}.{column} -> {ref_table} to alter")
            for name, ref_column, deferrable, deferred in rows:
                timing = ""
                if deferrable:
                    timing = " DEFERRABLE INITIALLY DEFERRED" if deferred else " DEFERRABLE INITIALLY IMMEDIATE"
                on_delete = " ON DELETE CASCADE" if cascade else ""
                schema_editor.execute(f"ALTER TABLE {q(table)} DROP CONSTRAINT {q(name)}", params=None)
                schema_editor.execute(
                    f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} FOREIGN KEY ({q(column)}) "
                    f"REFERENCES {q(ref_table)} ({q(ref_column)}){on_delete}{timing}",
                    params=None,
                )


# --- SQLite -------------------------------------------------------------------------------------
# SQLite's RAISE takes a literal message, so the messages cannot carry the record id or the lock end.

SQLITE_LOCKED = (
    "(OLD.held OR (OLD.retained_until IS NOT NULL AND ("
    "julianday(OLD.retained_until) IS NULL OR julianday(OLD.retained_until) > julianday('now'))))"
)
SQLITE_PROTECTED_CHANGED = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in PROTECTED_COLUMNS)
SQLITE_SHORTENS = (
    "(OLD.held AND NOT NEW.held)"
    " OR (OLD.lock_protects_content AND NOT NEW.lock_protects_content)"
    " OR (OLD.retained_until IS NOT NULL AND NEW.retained_until IS NOT OLD.retained_until AND ("
    "NEW.retained_until IS NULL"
    " OR coalesce(julianday(NEW.retained_until) < julianday(OLD.retained_until), 1)))"
)


def _sqlite_refuse(what: str) -> str:
    return (
        f"CASE WHEN OLD.held THEN RAISE(ABORT, 'legal_hold: the record is under legal hold; {what} refused')"
        f" ELSE RAISE(ABORT, 'retention_lock: the record is under a retention lock; {what} refused') END"
    )


SQLITE_FORWARD = [
    f"""
CREATE TRIGGER memory_record_guard_delete BEFORE DELETE ON memory_record
FOR EACH ROW WHEN {SQLITE_LOCKED}
BEGIN
    SELECT {_sqlite_refuse("DELETE")};
END
""",
    f"""
CREATE TRIGGER memory_record_guard_update BEFORE UPDATE ON memory_record
FOR EACH ROW WHEN (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL) OR {SQLITE_LOCKED}
BEGIN
    SELECT CASE
        WHEN NOT {SQLITE_LOCKED} THEN
            RAISE(ABORT, 'redaction_final: the record was redacted; clearing redacted_at refused')
        WHEN {SQLITE_PROTECTED_CHANGED} THEN
            {_sqlite_refuse("UPDATE of id, tenant, scope, subject, content class, created_at, commitment or salt")}
        WHEN (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL)
          OR (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL) THEN
            {_sqlite_refuse("clearing forgotten_at or redacted_at")}
        WHEN (OLD.held OR OLD.lock_protects_content) AND NEW.content IS NOT OLD.content THEN
            {_sqlite_refuse("UPDATE of content (the lock protects content)")}
        WHEN ({SQLITE_SHORTENS}) AND NOT EXISTS (SELECT 1 FROM retention_lockrecomputegrant) THEN
            {_sqlite_refuse("shortening the lock outside a lock recomputation")}
    END;
END
""",
]

SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS memory_record_guard_update",
    "DROP TRIGGER IF EXISTS memory_record_guard_delete",
]


def _run(schema_editor, statements: list[str]) -> None:
    for sql in statements:
        # params=None: the PL/pgSQL bodies contain format() placeholders that are not query parameters.
        schema_editor.execute(sql, params=None)


def _unsupported(schema_editor):
    # Fail closed: a database without the guard would let raw SQL destroy locked records.
    vendor = schema_editor.connection.vendor
    return RuntimeError(f"the guard trigger exists for PostgreSQL and SQLite only, not {vendor}")


def guard_install(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_FORWARD)
        _pg_set_fk_cascade(schema_editor, cascade=True)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_FORWARD)
    else:
        raise _unsupported(schema_editor)


def guard_remove(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _pg_set_fk_cascade(schema_editor, cascade=False)
        _run(schema_editor, PG_REVERSE)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_REVERSE)
    else:
        raise _unsupported(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0002_initial"),
        ("retention", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(guard_install, guard_remove),
    ]
