"""A redaction empties the record's salt with its content; a fleet copy's acknowledgement is a signed tombstone.

1. The guard (migrations 0003 and 0013) refused any UPDATE of a locked row's `salt`, with its id, scope,
   timestamps and commitment (the row's identity and evidence). But a salt left beside the public commitment of
   content that is gone lets anyone who reads the database guess the content back (a dictionary over e-mail
   addresses, say; DESIGN.md invariant 6). So the guard now lets a locked row's salt be emptied, and only
   emptied, in the same UPDATE that leaves its content empty (a redaction, `memory.services.forget`); any other
   change of the salt is refused as before. The commitment stays: it is the row's evidence, and without the
   salt it reveals nothing. Everything else is the guard as memory 0013 left it (content changed only by a
   redaction), restated here whole (a migration does not import another's module); the reverse puts 0013's back.
2. `FleetCopyNotice.closing_tombstone_id`: the follow-up tombstone that signed the holder's acknowledgement and
   closes the `fleet_copy:N` item of the forget's tombstone (`memory.services.fleet`). A notice is open until it
   has one (confirm-erasure requires it); the partial index that finds open notices follows.
3. The sweep kind `salts_shredding` (dsr.services.salts); its schedule is made by tombstones 0008.
"""
from django.db import migrations, models
from django.db.models import Q

# The identity and evidence of a locked row: never updated while the lock lasts (0013's, less the salt).
PROTECTED_COLUMNS = ["id", "tenant_id", "scope_id", "subject_id", "content_class_id", "created_at", "commitment"]

# --- PostgreSQL ---------------------------------------------------------------------------------

PG_LOCKED = "(OLD.held OR OLD.retained_until > now())"
# A redaction (memory 0013): the content emptied with redacted_at set, on a lock that protects existence only.
PG_REDACTION = "(NEW.content = '' AND NEW.redacted_at IS NOT NULL AND NOT (OLD.held OR OLD.lock_protects_content))"
# The salt may only be emptied, and only with the content.
PG_SALT_CHANGED = "(NEW.salt IS DISTINCT FROM OLD.salt AND NOT (NEW.salt = '' AND NEW.content = ''))"
PG_SHORTENS = (
    "(OLD.held AND NOT NEW.held)"
    " OR (OLD.lock_protects_content AND NOT NEW.lock_protects_content)"
    " OR (OLD.retained_until IS NOT NULL AND (NEW.retained_until IS NULL OR NEW.retained_until < OLD.retained_until))"
)


def _pg_update_when(salt_changed: str) -> str:
    protected_changed = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in PROTECTED_COLUMNS)
    return f"""
    (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL)
    OR ({PG_LOCKED} AND (
        {protected_changed} OR {salt_changed}
        OR (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL)
        OR (NEW.content IS DISTINCT FROM OLD.content AND NOT {PG_REDACTION})
        OR {PG_SHORTENS}
    ))
"""


def _pg_function(salt_check: str) -> str:
    protected_checks = "\n".join(
        f"    IF NEW.{c} IS DISTINCT FROM OLD.{c} THEN refused := refused || '{c}'::text; END IF;"
        for c in PROTECTED_COLUMNS)
    return f"""
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

{protected_checks}
{salt_check}
    IF OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL THEN
        refused := refused || 'forgotten_at (cleared)'::text;
    END IF;
    IF OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL THEN
        refused := refused || 'redacted_at (cleared)'::text;
    END IF;
    IF NEW.content IS DISTINCT FROM OLD.content AND NOT {PG_REDACTION} THEN
        IF OLD.held OR OLD.lock_protects_content THEN
            refused := refused || 'content (the lock protects content)'::text;
        ELSE
            refused := refused || 'content (only a redaction may change it)'::text;
        END IF;
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
    -- Only the lock functions (SECURITY DEFINER, memory 0013) hold a grant row, and only their transaction sees it.
    IF cardinality(shortened) > 0 AND NOT EXISTS (SELECT 1 FROM retention_lockrecomputegrant) THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = lock_text || '; shortening the lock (' || array_to_string(shortened, ', ')
                      || ') refused outside a lock recomputation';
    END IF;
    RETURN NEW;
END
$$;
"""


def _pg(salt_changed: str, salt_check: str) -> list[str]:
    return [
        _pg_function(salt_check),
        "DROP TRIGGER IF EXISTS memory_record_guard_update ON memory_record",
        f"CREATE TRIGGER memory_record_guard_update BEFORE UPDATE ON memory_record FOR EACH ROW "
        f"WHEN ({_pg_update_when(salt_changed)}) EXECUTE FUNCTION memory_record_guard()",
    ]


PG_FORWARD = _pg(PG_SALT_CHANGED, f"    IF {PG_SALT_CHANGED} THEN "
                 "refused := refused || 'salt (only emptied, with the content)'::text; END IF;")
# Back to 0013's guard: the salt is evidence like the commitment.
PG_REVERSE = _pg("NEW.salt IS DISTINCT FROM OLD.salt",
                 "    IF NEW.salt IS DISTINCT FROM OLD.salt THEN refused := refused || 'salt'::text; END IF;")

# --- SQLite -------------------------------------------------------------------------------------

SQLITE_LOCKED = (
    "(OLD.held OR (OLD.retained_until IS NOT NULL AND ("
    "julianday(OLD.retained_until) IS NULL OR julianday(OLD.retained_until) > julianday('now'))))"
)
SQLITE_SHORTENS = (
    "(OLD.held AND NOT NEW.held)"
    " OR (OLD.lock_protects_content AND NOT NEW.lock_protects_content)"
    " OR (OLD.retained_until IS NOT NULL AND NEW.retained_until IS NOT OLD.retained_until AND ("
    "NEW.retained_until IS NULL"
    " OR coalesce(julianday(NEW.retained_until) < julianday(OLD.retained_until), 1)))"
)
SQLITE_REDACTION = "(NEW.content = '' AND NEW.redacted_at IS NOT NULL AND NOT (OLD.held OR OLD.lock_protects_content))"


def _sqlite_refuse(what: str) -> str:
    return (
        f"CASE WHEN OLD.held THEN RAISE(ABORT, 'legal_hold: the record is under legal hold; {what} refused')"
        f" ELSE RAISE(ABORT, 'retention_lock: the record is under a retention lock; {what} refused') END"
    )


def _sqlite_update_trigger(protected: list[str], protected_what: str, salt_when: str) -> str:
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in protected)
    salt_case = f"""
        WHEN {salt_when} THEN
            {_sqlite_refuse("UPDATE of the salt (only emptied, with the content)")}""" if salt_when else ""
    return f"""
CREATE TRIGGER memory_record_guard_update BEFORE UPDATE ON memory_record
FOR EACH ROW WHEN (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL) OR {SQLITE_LOCKED}
BEGIN
    SELECT CASE
        WHEN NOT {SQLITE_LOCKED} THEN
            RAISE(ABORT, 'redaction_final: the record was redacted; clearing redacted_at refused')
        WHEN {changed} THEN
            {_sqlite_refuse(protected_what)}{salt_case}
        WHEN (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL)
          OR (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL) THEN
            {_sqlite_refuse("clearing forgotten_at or redacted_at")}
        WHEN NEW.content IS NOT OLD.content AND NOT {SQLITE_REDACTION} THEN
            {_sqlite_refuse("UPDATE of content (only a redaction may change it)")}
        WHEN ({SQLITE_SHORTENS}) AND NOT EXISTS (SELECT 1 FROM retention_lockrecomputegrant) THEN
            {_sqlite_refuse("shortening the lock outside a lock recomputation")}
    END;
END
"""


SQLITE_FORWARD = [
    "DROP TRIGGER IF EXISTS memory_record_guard_update",
    _sqlite_update_trigger(PROTECTED_COLUMNS, "UPDATE of id, tenant, scope, subject, content class, created_at or "
                           "commitment", "NEW.salt IS NOT OLD.salt AND NOT (NEW.salt = '' AND NEW.content = '')"),
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS memory_record_guard_update",
    _sqlite_update_trigger(PROTECTED_COLUMNS + ["salt"], "UPDATE of id, tenant, scope, subject, content class, "
                           "created_at, commitment or salt", ""),
]


def _run(statements: list[str]):
    def apply(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        sql = {"postgresql": statements[0], "sqlite": statements[1]}.get(vendor)
        if sql is None:  # fail closed, as 0003 does
            raise RuntimeError(f"the guard trigger exists for PostgreSQL and SQLite only, not {vendor}")
        for statement in sql:
            # params=None: the PL/pgSQL body has format() placeholders that are not query parameters.
            schema_editor.execute(statement, params=None)
    return apply


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0011_subject_refs_normalized"),
    ]

    operations = [
        migrations.RunPython(_run([PG_FORWARD, SQLITE_FORWARD]), _run([PG_REVERSE, SQLITE_REVERSE])),
        migrations.AddField(
            model_name="fleetcopynotice",
            name="closing_tombstone_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.RemoveIndex(model_name="fleetcopynotice", name="fleet_notice_open_idx"),
        migrations.AddIndex(
            model_name="fleetcopynotice",
            index=models.Index(condition=Q(("closing_tombstone_id__isnull", True)), fields=["holder", "deadline"],
                               name="fleet_notice_open_idx"),
        ),
        migrations.AlterField(
            model_name="sweeprun",
            name="kind",
            field=models.CharField(choices=[("compaction", "Compaction"), ("pact_expiry", "Pact Expiry"),
                                            ("deferred_erasures", "Deferred Erasures"),
                                            ("confirmations", "Confirmations"), ("salts_shredding", "Salts Shredding")],
                                   max_length=20),
        ),
    ]
