"""Set-based inserts for the issuing path: COPY on PostgreSQL (no model instances to build, no SQL to
compile: ~10× cheaper per row than `bulk_create`), `bulk_create` elsewhere. Rows are tuples of column
values in `columns` order (attnames: `tenant_id`, not `tenant`).

COPY goes through the driver's cursor, so Django's query capture does not list it.
"""
from __future__ import annotations

from django.db import connection


def rows_insert(*, model, columns: list[str], rows: list[tuple]) -> None:
    if not rows:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(columns, row))) for row in rows], batch_size=500)
        return
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)
    sql = f"COPY {model._meta.db_table} ({names}) FROM STDIN"
    with connection.wrap_database_errors, connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:  # driver errors surface as Django's (IntegrityError on a duplicate id)
            copy.write_row(row)
