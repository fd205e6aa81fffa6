"""Set-based inserts for the issuing path, without model instances or compiled SQL: on PostgreSQL, one
multi-row INSERT for a few rows (one round trip) and COPY for many (~10× cheaper per row than
`bulk_create`, but two round trips); `bulk_create` elsewhere. Rows are tuples of column values in
`columns` order (attnames: `tenant_id`, not `tenant`).

COPY goes through the driver's cursor, so Django's query capture does not list it.
"""
from __future__ import annotations

from django.db import connection
from psycopg.types.json import Jsonb

INSERT_MAX_ROWS = 20  # above this, COPY's cheaper rows outweigh its extra round trip


def rows_insert(*, model, columns: list[str], rows: list[tuple]) -> None:
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(columns, row))) for row in rows], batch_size=500)
        return
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)
    rows = [[Jsonb(value) if isinstance(value, dict) else value for value in row] for row in rows]
    if len(rows) <= INSERT_MAX_ROWS:
        values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {model._meta.db_table} ({names}) VALUES {values}",
                           [value for row in rows for value in row])
        return
    sql = f"COPY {model._meta.db_table} ({names}) FROM STDIN"
    with connection.wrap_database_errors, connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:  # driver errors surface as Django's (IntegrityError on a duplicate id)
            copy.write_row(row)
