"""A BEFORE INSERT trigger on tombstones that does nothing but make PostgreSQL's COPY store each row as it arrives.

A batch of tombstones (a sweep's, a workflow group's) is written by one binary COPY while the issuer signs
the rows it streams (`tombstones.services.issue`). COPY FROM buffers rows for a multi-row insert and stores
them when the buffer is full: 1,000 rows or 64 kB of input lines, and binary COPY has no input lines, so for
a batch of up to 1,000 tombstones nothing was stored until its last row had arrived. The server then did
three quarters of the COPY's work (heap, three indexes, WAL) after the issuer had signed everything, while
the issuer waited for the COPY's end: ~8 µs a tombstone, a fifth of an Ed25519 signature, measured as the
server backend's CPU during that wait (bench/README.md, bench_tombstones.py).

COPY never buffers for a table with a BEFORE INSERT row trigger (the trigger could read the table and must
see the rows before it), so with this one each row is inserted as it comes, on the server's core, while the
issuer signs the next ones, and the COPY's end waits for one row. A single-row insert costs the server about
what its share of the multi-row insert did (measured within the noise: ~11-15 µs a tombstone either way).

The trigger changes no row and refuses nothing. Log nodes and salts keep the multi-row inserts: their COPYs'
ends are covered by signatures made after their last rows (`SIGNED_AFTER_ROWS`). SQLite has no COPY: nothing
there.
"""
from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION tombstones_insert_row_by_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;  -- nothing to do: its presence is what makes COPY insert row by row
END $$;
"""
TRIGGER = ("CREATE TRIGGER tombstones_tombstone_row_by_row BEFORE INSERT ON tombstones_tombstone "
           "FOR EACH ROW EXECUTE FUNCTION tombstones_insert_row_by_row()")


def _create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)
        schema_editor.execute(TRIGGER)


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS tombstones_tombstone_row_by_row ON tombstones_tombstone")
        schema_editor.execute("DROP FUNCTION IF EXISTS tombstones_insert_row_by_row()")


class Migration(migrations.Migration):

    dependencies = [
        ("tombstones", "0006_lz4_statements"),
    ]

    operations = [
        migrations.RunPython(_create, _drop),
    ]
