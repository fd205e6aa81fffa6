"""Tombstones are permanent: the database refuses to change or remove them, whoever asks.

Refused: UPDATE and DELETE of tombstones, log nodes, checkpoints and key events; DELETE of signing
keys and any UPDATE of a key's identity (kid, purpose, public key, creation) or that un-retires it or
moves its compromise time later or away; DELETE of the log head and any UPDATE that shrinks it.
(TRUNCATE is not refused: the test runner flushes tables with it.)
Also creates the log head row: the empty log.
"""
from django.db import migrations

PERMANENT = ["tombstones_tombstone", "tombstones_lognode", "tombstones_checkpoint", "tombstones_keyevent"]
KEY_UPDATE_REFUSED = (
    "NEW.kid <> OLD.kid OR NEW.purpose <> OLD.purpose OR NEW.public_key <> OLD.public_key"
    " OR NEW.created_at <> OLD.created_at"
    " OR (OLD.retired_at IS NOT NULL AND (NEW.retired_at IS NULL OR NEW.retired_at <> OLD.retired_at))"
    " OR (OLD.compromised_at IS NOT NULL AND (NEW.compromised_at IS NULL OR NEW.compromised_at > OLD.compromised_at))"
)
HEAD_UPDATE_REFUSED = "NEW.size < OLD.size OR NEW.id <> OLD.id"

# (trigger name, table, event, condition or None)
TRIGGERS = (
    [(f"{table}_no_update", table, "UPDATE", None) for table in PERMANENT]
    + [(f"{table}_no_delete", table, "DELETE", None) for table in PERMANENT]
    + [
        ("tombstones_signingkey_no_delete", "tombstones_signingkey", "DELETE", None),
        ("tombstones_signingkey_identity", "tombstones_signingkey", "UPDATE", KEY_UPDATE_REFUSED),
        ("tombstones_loghead_no_delete", "tombstones_loghead", "DELETE", None),
        ("tombstones_loghead_no_shrink", "tombstones_loghead", "UPDATE", HEAD_UPDATE_REFUSED),
    ]
)

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION tombstones_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'tombstones are permanent: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END $$;
"""


def _create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FUNCTION, params=None)  # `%` is PL/pgSQL here, not a placeholder
    for name, table, event, condition in TRIGGERS:
        when = f"WHEN ({condition})" if condition else ""
        if vendor == "postgresql":
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW {when} "
                                  f"EXECUTE FUNCTION tombstones_refuse_change()")
        elif vendor == "sqlite":
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW {when} BEGIN "
                                  f"SELECT RAISE(ABORT, 'tombstones are permanent: {event} on {table} refused'); END")
        else:
            raise NotImplementedError(f"no permanence triggers for {vendor}")


def _drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for name, table, _event, _condition in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if vendor == "postgresql" else ""))
    if vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS tombstones_refuse_change()")


def _head_create(apps, schema_editor):
    import hashlib

    from django.utils import timezone

    apps.get_model("tombstones", "LogHead").objects.get_or_create(
        pk=1, defaults={"size": 0, "root": hashlib.sha256(b"").digest(), "frontier": b"", "updated_at": timezone.now()})


class Migration(migrations.Migration):
    dependencies = [("tombstones", "0001_initial")]

    operations = [
        migrations.RunPython(_create, _drop),
        migrations.RunPython(_head_create, migrations.RunPython.noop),
    ]
