"""The record's lock is the database's to compute and to shorten (DESIGN.md invariants 1 and 2).

PostgreSQL:
  - A BEFORE INSERT trigger (`memory_record_lock_insert`, enabled ALWAYS) computes each new record's lock
    from the rules and holds: retained_until = created_at + the longest active rule of its class,
    lock_protects_content = some active rule protects content, held = some active hold covers it. A value
    the writer sent may extend that lock, never shorten it. Python no longer decides a new record's lock
    on PostgreSQL; the fields' `db_default` makes Django read the stored lock back with RETURNING.
  - No race between a write and a rule or hold being placed: the insert trigger takes the tenant's
    retention-table advisory lock in shared mode, and every change to rules or holds takes it in exclusive
    mode before anything else (`retention.locks.retention_table_lock`, and the functions below). A record
    committed while a rule is being placed is therefore either seen by that rule's recompute, or computed
    after the rule committed (each query of a volatile PL/pgSQL function takes a fresh snapshot, after the
    lock was granted).
  - Lock shortening (and any change of the lock columns) goes through SECURITY DEFINER functions owned by
    the migrating (owner) role, which recompute locks from the rules and holds themselves:
    `retention_locks_recompute_classes(class ids)`, `retention_locks_recompute_hold(hold id)`, and
    `retention_lock_override(record id)` (legal's override of a governance lock, refused while a compliance
    rule or an active hold covers the record). Only they insert the transaction-local
    `retention_lockrecomputegrant` row that the guard trigger asks for. The application role gets no write
    privilege on the grant table nor on the lock columns (`manage.py db_grant_app_role`), so it can neither
    forge a grant nor write a lock directly.
  - The guard trigger (memory 0003) now also refuses, on a locked row, any change of content that is not a
    redaction (content emptied with redacted_at set, on a lock that protects existence only).
SQLite (the embedded default, one role, writes serialized by the database): the lock is still computed in
Python inside the writing transaction; the guard triggers are re-created with the same content rule.
"""
from django.db import migrations, models

# pg_advisory_xact_lock(int4, int4): this constant names the retention table's lock; the tenant id is the second.
TABLE_LOCK_CLASS = 72051

PG_HELD = """
CREATE OR REPLACE FUNCTION retention_record_held(p_tenant bigint, p_id bigint, p_subject bigint, p_class bigint,
                                                 p_scope bigint) RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT EXISTS (
        SELECT 1 FROM retention_legalhold h
        WHERE h.tenant_id = p_tenant AND h.released_at IS NULL AND (
            h.subject_id = p_subject
            OR h.content_class_id = p_class
            OR h.scope_id IN (SELECT c.ancestor_id FROM memory_scopeclosure c WHERE c.descendant_id = p_scope)
            OR EXISTS (SELECT 1 FROM retention_holdrecord hr WHERE hr.hold_id = h.id AND hr.record_id = p_id)))
$$;
"""

PG_LOCK_ON_INSERT = f"""
CREATE OR REPLACE FUNCTION memory_record_lock_on_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    days integer;
    content boolean;
BEGIN
    -- Shared: writers do not wait for each other, only for a change of the tenant's rules or holds.
    PERFORM pg_advisory_xact_lock_shared({TABLE_LOCK_CLASS}, (NEW.tenant_id % 2147483647)::integer);
    SELECT max(duration_days), coalesce(bool_or(protects = 'content'), false) INTO days, content
    FROM retention_retentionrule WHERE content_class_id = NEW.content_class_id AND retired_at IS NULL;
    IF days IS NOT NULL THEN
        NEW.retained_until := greatest(NEW.retained_until, NEW.created_at + make_interval(days => days));
    END IF;
    NEW.lock_protects_content := coalesce(NEW.lock_protects_content, false) OR content;
    NEW.held := coalesce(NEW.held, false) OR retention_record_held(NEW.tenant_id, NEW.id, NEW.subject_id,
                                                                  NEW.content_class_id, NEW.scope_id);
    RETURN NEW;
END
$$;
"""

PG_GRANT_OPEN = "INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (now()) RETURNING id INTO grant_id;"
PG_GRANT_CLOSE = "DELETE FROM retention_lockrecomputegrant WHERE id = grant_id;"

PG_RECOMPUTE_CLASSES = f"""
CREATE OR REPLACE FUNCTION retention_locks_recompute_classes(p_classes bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    tenant bigint;
    grant_id bigint;
    changed bigint;
BEGIN
    FOR tenant IN SELECT DISTINCT tenant_id FROM retention_contentclass WHERE id = ANY(p_classes) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock({TABLE_LOCK_CLASS}, (tenant % 2147483647)::integer);
    END LOOP;
    {PG_GRANT_OPEN}
    UPDATE memory_record r
    SET retained_until = r.created_at + make_interval(days => l.days), lock_protects_content = l.content
    FROM (
        SELECT c.id, max(rule.duration_days) AS days, coalesce(bool_or(rule.protects = 'content'), false) AS content
        FROM unnest(p_classes) AS c(id)
        LEFT JOIN retention_retentionrule rule ON rule.content_class_id = c.id AND rule.retired_at IS NULL
        GROUP BY c.id
    ) l
    WHERE r.content_class_id = l.id
      AND (r.retained_until IS DISTINCT FROM r.created_at + make_interval(days => l.days)
           OR r.lock_protects_content IS DISTINCT FROM l.content);
    GET DIAGNOSTICS changed = ROW_COUNT;
    {PG_GRANT_CLOSE}
    RETURN changed;
END
$$;
"""

PG_RECOMPUTE_HOLD = f"""
CREATE OR REPLACE FUNCTION retention_locks_recompute_hold(p_hold bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    hold retention_legalhold%ROWTYPE;
    grant_id bigint;
    changed bigint;
BEGIN
    SELECT * INTO hold FROM retention_legalhold WHERE id = p_hold;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock({TABLE_LOCK_CLASS}, (hold.tenant_id % 2147483647)::integer);
    {PG_GRANT_OPEN}
    UPDATE memory_record r
    SET held = retention_record_held(r.tenant_id, r.id, r.subject_id, r.content_class_id, r.scope_id)
    WHERE r.tenant_id = hold.tenant_id
      AND (r.subject_id = hold.subject_id
           OR r.content_class_id = hold.content_class_id
           OR r.scope_id IN (SELECT descendant_id FROM memory_scopeclosure WHERE ancestor_id = hold.scope_id)
           OR r.id IN (SELECT record_id FROM retention_holdrecord WHERE hold_id = hold.id))
      AND r.held IS DISTINCT FROM retention_record_held(r.tenant_id, r.id, r.subject_id, r.content_class_id,
                                                        r.scope_id);
    GET DIAGNOSTICS changed = ROW_COUNT;
    {PG_GRANT_CLOSE}
    RETURN changed;
END
$$;
"""

# Legal's override ends a governance lock for one record. Refused while a compliance rule still keeps the
# record or an active hold covers it, whichever lock is longest (a longer governance rule masks nothing).
PG_OVERRIDE = f"""
CREATE OR REPLACE FUNCTION retention_lock_override(p_record bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    rec memory_record%ROWTYPE;
    grant_id bigint;
    keeping text;
BEGIN
    SELECT * INTO rec FROM memory_record WHERE id = p_record;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock({TABLE_LOCK_CLASS}, (rec.tenant_id % 2147483647)::integer);
    SELECT * INTO rec FROM memory_record WHERE id = p_record FOR UPDATE;
    IF retention_record_held(rec.tenant_id, rec.id, rec.subject_id, rec.content_class_id, rec.scope_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = format('legal_hold: record %s is under legal hold; override refused', rec.id);
    END IF;
    SELECT string_agg(format('rule %s (%s)', id, authority), ', ' ORDER BY id) INTO keeping
    FROM retention_retentionrule
    WHERE content_class_id = rec.content_class_id AND retired_at IS NULL AND mode = 'compliance'
      AND rec.created_at + make_interval(days => duration_days) > now();
    IF keeping IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'restrict_violation',
            MESSAGE = format('retention_lock: record %s is kept by compliance %s; override refused', rec.id, keeping);
    END IF;
    {PG_GRANT_OPEN}
    UPDATE memory_record SET retained_until = NULL, lock_protects_content = false WHERE id = p_record;
    {PG_GRANT_CLOSE}
END
$$;
"""

# The guard of memory 0003, with one more refusal: on a locked row the content changes only by a redaction.
PROTECTED_COLUMNS = ["id", "tenant_id", "scope_id", "subject_id", "content_class_id", "created_at", "commitment",
                     "salt"]
PG_LOCKED = "(OLD.held OR OLD.retained_until > now())"
PG_PROTECTED_CHANGED = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in PROTECTED_COLUMNS)
PG_REDACTION = "(NEW.content = '' AND NEW.redacted_at IS NOT NULL AND NOT (OLD.held OR OLD.lock_protects_content))"
PG_SHORTENS = (
    "(OLD.held AND NOT NEW.held)"
    " OR (OLD.lock_protects_content AND NOT NEW.lock_protects_content)"
    " OR (OLD.retained_until IS NOT NULL AND (NEW.retained_until IS NULL OR NEW.retained_until < OLD.retained_until))"
)
PG_UPDATE_WHEN = f"""
    (OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL)
    OR ({PG_LOCKED} AND (
        {PG_PROTECTED_CHANGED}
        OR (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL)
        OR (NEW.content IS DISTINCT FROM OLD.content AND NOT {PG_REDACTION})
        OR {PG_SHORTENS}
    ))
"""
PG_PROTECTED_CHECKS = "\n".join(
    f"    IF NEW.{c} IS DISTINCT FROM OLD.{c} THEN refused := refused || '{c}'::text; END IF;"
    for c in PROTECTED_COLUMNS
)


def _pg_guard(redaction_only: bool) -> str:
    if redaction_only:
        content_check = f"""    IF NEW.content IS DISTINCT FROM OLD.content AND NOT {PG_REDACTION} THEN
        IF OLD.held OR OLD.lock_protects_content THEN
            refused := refused || 'content (the lock protects content)'::text;
        ELSE
            refused := refused || 'content (only a redaction may change it)'::text;
        END IF;
    END IF;"""
    else:
        content_check = """    IF (OLD.held OR OLD.lock_protects_content) AND NEW.content IS DISTINCT FROM OLD.content THEN
        refused := refused || 'content (the lock protects content)'::text;
    END IF;"""
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

{PG_PROTECTED_CHECKS}
    IF OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL THEN
        refused := refused || 'forgotten_at (cleared)'::text;
    END IF;
    IF OLD.redacted_at IS NOT NULL AND NEW.redacted_at IS NULL THEN
        refused := refused || 'redacted_at (cleared)'::text;
    END IF;
{content_check}
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


PG_OLD_UPDATE_WHEN = PG_UPDATE_WHEN.replace(
    f"(NEW.content IS DISTINCT FROM OLD.content AND NOT {PG_REDACTION})",
    "((OLD.held OR OLD.lock_protects_content) AND NEW.content IS DISTINCT FROM OLD.content)")

DEFINER_FUNCTIONS = ["retention_locks_recompute_classes(bigint[])", "retention_locks_recompute_hold(bigint)",
                     "retention_lock_override(bigint)"]


def _pg_update_trigger(when: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS memory_record_guard_update ON memory_record",
        f"CREATE TRIGGER memory_record_guard_update BEFORE UPDATE ON memory_record FOR EACH ROW WHEN ({when}) "
        "EXECUTE FUNCTION memory_record_guard()",
    ]


PG_FORWARD = [
    PG_HELD,
    PG_LOCK_ON_INSERT,
    "CREATE TRIGGER memory_record_lock_insert BEFORE INSERT ON memory_record FOR EACH ROW "
    "EXECUTE FUNCTION memory_record_lock_on_insert()",
    "ALTER TABLE memory_record ENABLE ALWAYS TRIGGER memory_record_lock_insert",
    PG_RECOMPUTE_CLASSES,
    PG_RECOMPUTE_HOLD,
    PG_OVERRIDE,
    # A SECURITY DEFINER function runs with its owner's rights: nobody calls one unless granted
    # (manage.py db_grant_app_role grants them to the application role).
    *[f"REVOKE ALL ON FUNCTION {f} FROM PUBLIC" for f in DEFINER_FUNCTIONS],
    _pg_guard(redaction_only=True),
    *_pg_update_trigger(PG_UPDATE_WHEN),
    "ALTER TABLE memory_record ALTER COLUMN held SET DEFAULT false",
    "ALTER TABLE memory_record ALTER COLUMN lock_protects_content SET DEFAULT false",
]

PG_REVERSE = [
    "ALTER TABLE memory_record ALTER COLUMN held DROP DEFAULT",
    "ALTER TABLE memory_record ALTER COLUMN lock_protects_content DROP DEFAULT",
    _pg_guard(redaction_only=False),
    *_pg_update_trigger(PG_OLD_UPDATE_WHEN),
    *[f"DROP FUNCTION IF EXISTS {f}" for f in DEFINER_FUNCTIONS],
    "DROP TRIGGER IF EXISTS memory_record_lock_insert ON memory_record",
    "DROP FUNCTION IF EXISTS memory_record_lock_on_insert()",
    "DROP FUNCTION IF EXISTS retention_record_held(bigint, bigint, bigint, bigint, bigint)",
]

# --- SQLite: the guard triggers of memory 0003, re-created with the redaction-only content rule. ------------

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
SQLITE_REDACTION = "(NEW.content = '' AND NEW.redacted_at IS NOT NULL AND NOT (OLD.held OR OLD.lock_protects_content))"


def _sqlite_refuse(what: str) -> str:
    return (
        f"CASE WHEN OLD.held THEN RAISE(ABORT, 'legal_hold: the record is under legal hold; {what} refused')"
        f" ELSE RAISE(ABORT, 'retention_lock: the record is under a retention lock; {what} refused') END"
    )


def _sqlite_update_trigger(redaction_only: bool) -> str:
    if redaction_only:
        content = (f"WHEN NEW.content IS NOT OLD.content AND NOT {SQLITE_REDACTION} THEN\n"
                   f"            {_sqlite_refuse('UPDATE of content (only a redaction may change it)')}")
    else:
        content = ("WHEN (OLD.held OR OLD.lock_protects_content) AND NEW.content IS NOT OLD.content THEN\n"
                   f"            {_sqlite_refuse('UPDATE of content (the lock protects content)')}")
    return f"""
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
        {content}
        WHEN ({SQLITE_SHORTENS}) AND NOT EXISTS (SELECT 1 FROM retention_lockrecomputegrant) THEN
            {_sqlite_refuse("shortening the lock outside a lock recomputation")}
    END;
END
"""


def _run(schema_editor, statements: list[str]) -> None:
    for sql in statements:
        # params=None: the PL/pgSQL bodies contain format() placeholders that are not query parameters.
        schema_editor.execute(sql, params=None)


def forward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_FORWARD)
    elif vendor == "sqlite":
        _run(schema_editor, ["DROP TRIGGER IF EXISTS memory_record_guard_update",
                             _sqlite_update_trigger(redaction_only=True)])
    else:
        raise RuntimeError(f"the guard exists for PostgreSQL and SQLite only, not {vendor}")


def backward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_REVERSE)
    elif vendor == "sqlite":
        _run(schema_editor, ["DROP TRIGGER IF EXISTS memory_record_guard_update",
                             _sqlite_update_trigger(redaction_only=False)])


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0010_forget_event_json_lz4"),
        ("retention", "0004_audit_tombstone_index"),
    ]

    operations = [
        # State only: with a db_default, Django reads these columns back with RETURNING after an INSERT, so a
        # written record carries the lock the database computed. The Python default still supplies the value
        # Django sends (SQLite's columns keep no default: altering them would re-create the table).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField("record", "retained_until",
                                      models.DateTimeField(blank=True, null=True, default=None, db_default=None)),
                migrations.AlterField("record", "held", models.BooleanField(default=False, db_default=False)),
                migrations.AlterField("record", "lock_protects_content",
                                      models.BooleanField(default=False, db_default=False)),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
