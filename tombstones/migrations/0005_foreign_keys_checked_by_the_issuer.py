"""No database foreign-key constraints on a tombstone's tenant and key, nor on its salts' tombstone: each was
checked once per row at COMMIT (deferred), ~10 µs a tombstone together, a third of an Ed25519 signature, in
a path whose goal is to cost little more than its signatures (bench/README.md, bench_tombstones.py). What each
constraint guaranteed still holds, for these reasons:

- The tombstone's key (`key_id`). Rows are written only by `tombstones.services.issue`, whose key is the one
  `log_lock` reads as current under the log head's lock, in the same transaction: the row exists. Key rows are
  never deleted (0002's trigger refuses it) and, from here on, their id never changes (a trigger below): a
  key referenced once stays there.
- The tombstone's tenant (`tenant_id`). `log_lock` also reads the batch's tenants under the lock with
  `FOR KEY SHARE`, what the foreign-key check did per row, and the issuer refuses the batch unless every one
  exists: a concurrent DELETE of one waits for this transaction to end. The other direction, a tenant
  deleted or renumbered while tombstones name it, is refused by the triggers below (the constraint's ON
  DELETE PROTECT; Django's collector still refuses first, the model keeps `on_delete=PROTECT`). They run on
  the rare DELETE or id UPDATE of a tenant, with one index probe (`tombstone_tenant_created_idx`), not on
  every append. A BEFORE trigger takes the row lock first and then queries with a fresh snapshot, so it sees
  tombstones committed by the transaction it waited for.
- The salts' tombstone (`tombstone_id`). Salts rows are written only by the issuer, in the transaction that
  inserts their tombstone, with the same ids; tombstones are never updated or deleted (0002).

What is no longer refused: an INSERT by hand (raw SQL, outside the issuer) naming a tenant, key or tombstone
that does not exist. Tombstones are written by the service only. On SQLite (the embedded default) the altered
tables are rebuilt, which drops their triggers: 0002's are installed again, as in 0003. A later migration
that rebuilds memory_tenant on SQLite must install `TENANT_TRIGGERS` again.
"""
import importlib

import django.db.models.deletion
from django.db import migrations, models

permanence = importlib.import_module("tombstones.migrations.0002_permanence")

TENANT_IN_USE = "EXISTS (SELECT 1 FROM tombstones_tombstone WHERE tenant_id = OLD.id)"
# (name, table, event, condition), for PostgreSQL; SQLite below.
TENANT_TRIGGERS = [
    ("tombstones_tenant_no_delete", "memory_tenant", "DELETE", None),
    ("tombstones_tenant_id_fixed", "memory_tenant", "UPDATE", "NEW.id <> OLD.id"),
]
KEY_ID_TRIGGER = ("tombstones_signingkey_id_fixed", "tombstones_signingkey", "UPDATE", "NEW.id <> OLD.id")

PG_TENANT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION tombstones_refuse_tenant_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {TENANT_IN_USE} THEN
        RAISE EXCEPTION 'tenant % is named by tombstones: % on % refused', OLD.id, TG_OP, TG_TABLE_NAME
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
"""


def _triggers_create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_TENANT_FUNCTION, params=None)  # `%` is PL/pgSQL here, not a placeholder
        for name, table, event, condition in TENANT_TRIGGERS:
            when = f"WHEN ({condition})" if condition else ""
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW {when} "
                                  f"EXECUTE FUNCTION tombstones_refuse_tenant_in_use()")
        name, table, event, condition = KEY_ID_TRIGGER
        schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN ({condition}) "
                              f"EXECUTE FUNCTION tombstones_refuse_change()")
    elif vendor == "sqlite":
        permanence._drop(apps, schema_editor)  # the rebuilt tables lost theirs; the others still have them
        permanence._create(apps, schema_editor)
        for name, table, event, condition in TENANT_TRIGGERS:
            when = f"{condition} AND {TENANT_IN_USE}" if condition else TENANT_IN_USE
            schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN {when} BEGIN "
                                  f"SELECT RAISE(ABORT, 'tenant is named by tombstones: {event} on {table} refused'); "
                                  f"END")
        name, table, event, condition = KEY_ID_TRIGGER
        schema_editor.execute(f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN {condition} BEGIN "
                              f"SELECT RAISE(ABORT, 'tombstones are permanent: {event} on {table} refused'); END")
    else:
        raise NotImplementedError(f"no triggers for {vendor}")


def _permanence_reinstall_on_sqlite(apps, schema_editor):
    """Going back: the tables rebuilt again on SQLite lost 0002's triggers."""
    if schema_editor.connection.vendor == "sqlite":
        permanence._drop(apps, schema_editor)
        permanence._create(apps, schema_editor)


def _triggers_drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for name, table, _event, _condition in [*TENANT_TRIGGERS, KEY_ID_TRIGGER]:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if vendor == "postgresql" else ""))
    if vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS tombstones_refuse_tenant_in_use()")


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0001_initial"),
        ("tombstones", "0004_checkpoint_schedule"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, _permanence_reinstall_on_sqlite),
        migrations.AlterField(
            model_name="tombstone",
            name="key",
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="tombstones", to="tombstones.signingkey"),
        ),
        migrations.AlterField(
            model_name="tombstone",
            name="tenant",
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="tombstones", to="memory.tenant"),
        ),
        migrations.AlterField(
            model_name="tombstonesalts",
            name="tombstone",
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.PROTECT,
                                       primary_key=True, related_name="salts", serialize=False,
                                       to="tombstones.tombstone"),
        ),
        migrations.RunPython(_triggers_create, _triggers_drop),
    ]
