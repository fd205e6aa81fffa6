"""Forget events are permanent, so the hot `forget_event` columns need no foreign-key check.

A soft forget of 100,000 records sets `forget_event_id` on each of them; with a foreign key, PostgreSQL
runs one referential-integrity check per row at COMMIT (~0.8 s per 100,000 rows, bench/bench_forget.py
--profile). The check protects nothing here: only `records_forget` writes that column, with the id of
the event it created a moment before in the same transaction, and forget events can never go away:
this migration makes the database refuse DELETE of a forget event, and any UPDATE of one except the
single move the product makes (confirm-erasure setting `confirmed_at`, once). So `Record.forget_event`
and `DerivedArtifact.forget_event` keep their relation in Django (`db_constraint=False`) and lose the
constraint in PostgreSQL, and so does `DeletedRecord.forget_event` (a hard forget writes one per record).

SQLite keeps its constraints: altering them would make Django re-create `memory_record`, which drops its
guard and write-ledger triggers, and the embedded default does not forget at volume.
(TRUNCATE is not refused: the test runner flushes tables with it.)
"""
from django.db import migrations, models
import django.db.models.deletion

FK_COLUMNS = [("memory_record", "forget_event_id"), ("memory_derivedartifact", "forget_event_id"),
              ("memory_deletedrecord", "forget_event_id")]

EVENT_UPDATE_REFUSED = (
    "NEW.id <> OLD.id OR NEW.tenant_id <> OLD.tenant_id OR NEW.public_id <> OLD.public_id"
    " OR NEW.actor <> OLD.actor OR NEW.path <> OLD.path OR NEW.mode <> OLD.mode OR NEW.reason <> OLD.reason"
    " OR NEW.status <> OLD.status OR NEW.created_at <> OLD.created_at"
    " OR NEW.target <> OLD.target OR NEW.outcomes <> OLD.outcomes OR NEW.artifacts <> OLD.artifacts"
    " OR (OLD.confirmed_at IS NOT NULL AND (NEW.confirmed_at IS NULL OR NEW.confirmed_at <> OLD.confirmed_at))"
)
TRIGGERS = [
    ("memory_forgetevent_no_delete", "DELETE", None),
    ("memory_forgetevent_no_change", "UPDATE", EVENT_UPDATE_REFUSED),
]

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_forgetevent_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'forget_event_permanent: % of forget event % refused', TG_OP, OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
END $$;
"""


def _forward(apps, schema_editor):
    connection = schema_editor.connection
    vendor = connection.vendor
    if vendor == "postgresql":
        # jsonb has equality, so the UPDATE condition can compare the JSON columns directly.
        schema_editor.execute(PG_FUNCTION, params=None)  # `%` is PL/pgSQL here, not a placeholder
        with connection.cursor() as cursor:
            for table, column in FK_COLUMNS:
                constraints = connection.introspection.get_constraints(cursor, table)
                for name, info in constraints.items():
                    if info["foreign_key"] and info["columns"] == [column]:
                        schema_editor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, event, condition in TRIGGERS:
        when = f"WHEN ({condition})" if condition else ""
        if vendor == "postgresql":
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON memory_forgetevent FOR EACH ROW {when} "
                                  "EXECUTE FUNCTION memory_forgetevent_refuse_change()")
        elif vendor == "sqlite":
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON memory_forgetevent FOR EACH ROW {when} "
                                  f"BEGIN SELECT RAISE(ABORT, 'forget_event_permanent: {event} of a forget event "
                                  "refused'); END")
        else:
            raise NotImplementedError(f"no forget-event triggers for {vendor}")


def _backward(apps, schema_editor):
    connection = schema_editor.connection
    vendor = connection.vendor
    for name, _event, _condition in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON memory_forgetevent" if vendor == "postgresql" else ""))
    if vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS memory_forgetevent_refuse_change()")
        for table, column in FK_COLUMNS:
            schema_editor.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fk FOREIGN KEY ({column}) "
                "REFERENCES memory_forgetevent (id) DEFERRABLE INITIALLY DEFERRED")


def _field():
    return models.ForeignKey(blank=True, null=True, db_constraint=False,
                             on_delete=django.db.models.deletion.PROTECT, related_name="+", to="memory.forgetevent")


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_sweep_and_audit_schedules")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="record", name="forget_event", field=_field()),
                migrations.AlterField(model_name="derivedartifact", name="forget_event", field=_field()),
                migrations.AlterField(model_name="deletedrecord", name="forget_event",
                                      field=models.ForeignKey(db_constraint=False, to="memory.forgetevent",
                                                              on_delete=django.db.models.deletion.PROTECT,
                                                              related_name="+")),
            ],
            database_operations=[migrations.RunPython(_forward, _backward)],
        ),
    ]
