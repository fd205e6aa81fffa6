"""The retention table and the holds are append-only in the database, for PostgreSQL and SQLite, like the write
ledger: a client with the application's own credentials (raw SQL, `QuerySet.delete()`, `.update()`) cannot weaken
a rule, drop a version or a hold, and then forget what they protected with lawful-looking tombstones.

Refused, whoever asks (an integrity error whose message starts with `retention_table:`; PostgreSQL SQLSTATE 23001
restrict_violation, SQLite SQLITE_CONSTRAINT: both reach Django as IntegrityError):
  - `retention_retentionrule`: DELETE. An UPDATE of id, tenant, content_class, kind, authority, mode, protects or
    created_at; shortening a compliance rule (`duration_days` may only grow) or retiring it; clearing or moving
    `retired_at` once set, or any change to a retired rule. A governance rule's duration may change and it may be
    retired, once.
  - `retention_retentiontableversion`: DELETE, any UPDATE but one, and an INSERT without a signature. The one
    UPDATE is the late signing of a version made before this migration (retention/versions.py): from no
    signature to one, setting only `signature`, `kid`, `previous_digest` and `signed_late`. Since every version
    inserted from here on carries a signature, only the rows already at rest can ever be signed late: a row
    forged later is never signed by the service, whatever it says.
  - `retention_legalhold`: DELETE. An UPDATE that is not the release: released_at set once (from NULL), with
    released_by and release_reason; every other column, and a released hold, never change.
  - `retention_holdrecord`: UPDATE and DELETE (append-only).
  - `retention_contentclass`: DELETE, and an UPDATE of id, tenant_id or name (a rename would remap the rules of a
    signed version, which name their class, to another class).
Updates compare values, not the columns listed: `save()` of a whole row writes every column, most unchanged.
TRUNCATE is not refused by a trigger (the test runner flushes tables with it, as for the write ledger and the
tombstones); the application role has no TRUNCATE privilege (memory/dbroles.py, tested as that role).
On PostgreSQL the triggers are enabled ALWAYS, so `session_replication_role = replica` does not skip them.

This migration also adds what signs a table version (retention/versions.py): `signature`, `kid`,
`previous_digest` (the hash chain), `signed_late`; and `created_at` becomes a default rather than auto_now_add,
so that the time is known before the row is written, since the signature covers it. It adds the fields before
installing the triggers: Django's SQLite schema editor re-creates a table for many ALTERs, dropping its
triggers (tests/retention/test_append_only.py migrates SQLite from scratch and checks they are all there).
"""
import django.utils.timezone
from django.db import migrations, models

# The columns a rule is: never changed (a rule with another kind, authority, mode or class is another rule).
RULE_IDENTITY = ["id", "tenant_id", "content_class_id", "kind", "authority", "mode", "protects", "created_at"]
HOLD_IDENTITY = ["id", "tenant_id", "matter", "authority", "placed_by", "placed_at", "subject_id",
                 "content_class_id", "scope_id"]
HOLD_RELEASE = ["released_at", "released_by", "release_reason"]
VERSION_IDENTITY = ["id", "tenant_id", "number", "actor", "change", "rules", "digest", "created_at"]
CLASS_IDENTITY = ["id", "tenant_id", "name"]

# --- PostgreSQL ---------------------------------------------------------------------------------


def _pg_distinct(columns: list[str]) -> str:
    return " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)


def _pg_collect(columns: list[str]) -> str:
    return "\n".join(f"    IF NEW.{c} IS DISTINCT FROM OLD.{c} THEN refused := refused || '{c}'::text; END IF;"
                     for c in columns)


PG_REFUSE = """
CREATE OR REPLACE FUNCTION retention_table_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
        'retention_table: %s is append-only; %s refused', TG_TABLE_NAME, TG_OP);
END
$$;
"""

PG_RULE = f"""
CREATE OR REPLACE FUNCTION retention_rule_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text[] := '{{}}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: retention rule %s is never deleted (retire a governance rule instead); DELETE refused',
            OLD.id);
    END IF;
{_pg_collect(RULE_IDENTITY)}
    IF OLD.retired_at IS NOT NULL AND (NEW.retired_at IS DISTINCT FROM OLD.retired_at
                                      OR NEW.duration_days IS DISTINCT FROM OLD.duration_days) THEN
        refused := refused || 'a retired rule'::text;
    END IF;
    IF OLD.mode = 'compliance' AND NEW.duration_days < OLD.duration_days THEN
        refused := refused || 'shortening a compliance rule'::text;
    END IF;
    IF OLD.mode = 'compliance' AND OLD.retired_at IS NULL AND NEW.retired_at IS NOT NULL THEN
        refused := refused || 'retiring a compliance rule'::text;
    END IF;
    IF cardinality(refused) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: retention rule %s (%s); UPDATE of %s refused', OLD.id, OLD.mode,
            array_to_string(refused, ', '));
    END IF;
    RETURN NEW;
END
$$;
"""

PG_VERSION = f"""
CREATE OR REPLACE FUNCTION retention_version_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF coalesce(octet_length(NEW.signature), 0) = 0 OR coalesce(NEW.kid, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
                'retention_table: retention table version %s of tenant %s has no signature; INSERT refused',
                NEW.number, NEW.tenant_id);
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND octet_length(OLD.signature) = 0 AND octet_length(NEW.signature) > 0
       AND NEW.kid <> '' AND NEW.signed_late AND NOT ({_pg_distinct(VERSION_IDENTITY)}) THEN
        RETURN NEW;  -- the late signing of a version made before the versions were signed
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
        'retention_table: retention table version %s of tenant %s is append-only; %s refused',
        OLD.number, OLD.tenant_id, TG_OP);
END
$$;
"""

PG_HOLD = f"""
CREATE OR REPLACE FUNCTION retention_hold_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text[] := '{{}}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: legal hold %s is never deleted (release it instead); DELETE refused', OLD.id);
    END IF;
    IF OLD.released_at IS NOT NULL THEN
        IF {_pg_distinct(HOLD_IDENTITY + HOLD_RELEASE)} THEN
            RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
                'retention_table: legal hold %s was released; a released hold never changes; UPDATE refused',
                OLD.id);
        END IF;
        RETURN NEW;
    END IF;
{_pg_collect(HOLD_IDENTITY)}
    IF NEW.released_at IS NULL AND ({_pg_distinct(HOLD_RELEASE[1:])}) THEN
        refused := refused || 'released_by or release_reason without a release'::text;
    END IF;
    IF cardinality(refused) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: legal hold %s changes only by its release; UPDATE of %s refused', OLD.id,
            array_to_string(refused, ', '));
    END IF;
    RETURN NEW;
END
$$;
"""

PG_CLASS = f"""
CREATE OR REPLACE FUNCTION retention_class_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: content class %s is never deleted; DELETE refused', OLD.id);
    END IF;
    IF {_pg_distinct(CLASS_IDENTITY)} THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation', MESSAGE = format(
            'retention_table: content class %s is named once (the signed table versions name it); '
            'UPDATE of id, tenant_id or name refused', OLD.id);
    END IF;
    RETURN NEW;
END
$$;
"""

# (trigger, table, events, function)
PG_TRIGGERS = [
    ("retention_retentionrule_guard", "retention_retentionrule", "UPDATE OR DELETE", "retention_rule_guard"),
    ("retention_retentiontableversion_guard", "retention_retentiontableversion", "INSERT OR UPDATE OR DELETE",
     "retention_version_guard"),
    ("retention_legalhold_guard", "retention_legalhold", "UPDATE OR DELETE", "retention_hold_guard"),
    ("retention_holdrecord_append_only", "retention_holdrecord", "UPDATE OR DELETE", "retention_table_refuse"),
    ("retention_contentclass_guard", "retention_contentclass", "UPDATE OR DELETE", "retention_class_guard"),
]
PG_FUNCTIONS = ["retention_table_refuse", "retention_rule_guard", "retention_version_guard", "retention_hold_guard",
                "retention_class_guard"]

PG_FORWARD = [PG_REFUSE, PG_RULE, PG_VERSION, PG_HOLD, PG_CLASS] + [
    sql for name, table, events, function in PG_TRIGGERS for sql in (
        f"CREATE TRIGGER {name} BEFORE {events} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()",
        f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}",
    )
]
PG_REVERSE = [f"DROP TRIGGER IF EXISTS {name} ON {table}" for name, table, _e, _f in PG_TRIGGERS] + [
    f"DROP FUNCTION IF EXISTS {function}()" for function in PG_FUNCTIONS]

# --- SQLite -------------------------------------------------------------------------------------
# SQLite's RAISE takes a literal message: the messages cannot carry the row's id.


def _sqlite_distinct(columns: list[str]) -> str:
    return " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)


def _sqlite_trigger(name: str, event: str, table: str, body: str, when: str = "") -> str:
    return (f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW {f'WHEN {when}' if when else ''}\n"
            f"BEGIN\n    {body};\nEND")


def _abort(message: str) -> str:
    return f"RAISE(ABORT, 'retention_table: {message}')"


SQLITE_FORWARD = [
    _sqlite_trigger("retention_retentionrule_no_delete", "DELETE", "retention_retentionrule",
                    f"SELECT {_abort('a retention rule is never deleted (retire a governance rule instead); DELETE refused')}"),
    _sqlite_trigger("retention_retentionrule_guard", "UPDATE", "retention_retentionrule", f"""SELECT CASE
        WHEN {_sqlite_distinct(RULE_IDENTITY)} THEN
            {_abort('UPDATE of a retention rule id, tenant, content class, kind, authority, mode, protects or created_at refused')}
        WHEN OLD.retired_at IS NOT NULL AND (NEW.retired_at IS NOT OLD.retired_at
                                            OR NEW.duration_days IS NOT OLD.duration_days) THEN
            {_abort('a retired retention rule never changes; UPDATE refused')}
        WHEN OLD.mode = 'compliance' AND NEW.duration_days < OLD.duration_days THEN
            {_abort('a compliance rule is never shortened; UPDATE refused')}
        WHEN OLD.mode = 'compliance' AND OLD.retired_at IS NULL AND NEW.retired_at IS NOT NULL THEN
            {_abort('a compliance rule is never retired; UPDATE refused')}
    END"""),
    _sqlite_trigger("retention_retentiontableversion_signed", "INSERT", "retention_retentiontableversion",
                    f"SELECT {_abort('a retention table version without a signature; INSERT refused')}",
                    when="coalesce(length(NEW.signature), 0) = 0 OR coalesce(NEW.kid, '') = ''"),
    _sqlite_trigger("retention_retentiontableversion_no_update", "UPDATE", "retention_retentiontableversion",
                    f"SELECT {_abort('a retention table version is append-only; UPDATE refused')}",
                    when=f"NOT (coalesce(length(OLD.signature), 0) = 0 AND coalesce(length(NEW.signature), 0) > 0 "
                         f"AND coalesce(NEW.kid, '') <> '' AND coalesce(NEW.signed_late, 0) "
                         f"AND NOT ({_sqlite_distinct(VERSION_IDENTITY)}))"),
    _sqlite_trigger("retention_retentiontableversion_no_delete", "DELETE", "retention_retentiontableversion",
                    f"SELECT {_abort('a retention table version is append-only; DELETE refused')}"),
    _sqlite_trigger("retention_legalhold_no_delete", "DELETE", "retention_legalhold",
                    f"SELECT {_abort('a legal hold is never deleted (release it instead); DELETE refused')}"),
    _sqlite_trigger("retention_legalhold_guard", "UPDATE", "retention_legalhold", f"""SELECT CASE
        WHEN OLD.released_at IS NOT NULL AND ({_sqlite_distinct(HOLD_IDENTITY + HOLD_RELEASE)}) THEN
            {_abort('a released legal hold never changes; UPDATE refused')}
        WHEN {_sqlite_distinct(HOLD_IDENTITY)} THEN
            {_abort('a legal hold changes only by its release; UPDATE refused')}
        WHEN NEW.released_at IS NULL AND ({_sqlite_distinct(HOLD_RELEASE[1:])}) THEN
            {_abort('a legal hold changes only by its release; UPDATE refused')}
    END"""),
    _sqlite_trigger("retention_holdrecord_no_update", "UPDATE", "retention_holdrecord",
                    f"SELECT {_abort('retention_holdrecord is append-only; UPDATE refused')}"),
    _sqlite_trigger("retention_holdrecord_no_delete", "DELETE", "retention_holdrecord",
                    f"SELECT {_abort('retention_holdrecord is append-only; DELETE refused')}"),
    _sqlite_trigger("retention_contentclass_no_delete", "DELETE", "retention_contentclass",
                    f"SELECT {_abort('a content class is never deleted; DELETE refused')}"),
    _sqlite_trigger("retention_contentclass_named_once", "UPDATE", "retention_contentclass",
                    f"SELECT {_abort('a content class is named once; UPDATE of id, tenant_id or name refused')}",
                    when=f"({_sqlite_distinct(CLASS_IDENTITY)})"),
]
SQLITE_TRIGGER_NAMES = [sql.split()[2] for sql in SQLITE_FORWARD]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGER_NAMES]


def _vendor(schema_editor) -> str:
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        # Fail closed: without these the audit's mandates and the holds are whatever a client last wrote.
        raise RuntimeError(f"the retention table's triggers exist for PostgreSQL and SQLite only, not {vendor}")
    return vendor


def tables_protect(apps, schema_editor) -> None:
    for sql in PG_FORWARD if _vendor(schema_editor) == "postgresql" else SQLITE_FORWARD:
        # params=None: the PL/pgSQL bodies contain format() placeholders that are not query parameters.
        schema_editor.execute(sql, params=None)


def tables_unprotect(apps, schema_editor) -> None:
    for sql in PG_REVERSE if _vendor(schema_editor) == "postgresql" else SQLITE_REVERSE:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ("retention", "0004_audit_tombstone_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="retentiontableversion",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.AddField(
            model_name="retentiontableversion",
            name="previous_digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="retentiontableversion",
            name="kid",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="retentiontableversion",
            name="signature",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.AddField(
            model_name="retentiontableversion",
            name="signed_late",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(tables_protect, tables_unprotect),
    ]
