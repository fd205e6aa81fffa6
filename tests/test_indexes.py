"""No table keeps two indexes of the same columns, kind and predicate: each would be written on every insert
and every update of an indexed column, for no read the other does not answer (memory 0017 dropped two)."""
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

SAME_INDEXES = """
    SELECT a.indrelid::regclass::text, a.indexrelid::regclass::text, b.indexrelid::regclass::text
    FROM pg_index a
    JOIN pg_index b ON b.indrelid = a.indrelid AND b.indexrelid > a.indexrelid
        AND b.indkey::text = a.indkey::text AND b.indclass::text = a.indclass::text
        AND coalesce(pg_get_expr(b.indexprs, b.indrelid), '') = coalesce(pg_get_expr(a.indexprs, a.indrelid), '')
        AND coalesce(pg_get_expr(b.indpred, b.indrelid), '') = coalesce(pg_get_expr(a.indpred, a.indrelid), '')
    JOIN pg_class t ON t.oid = a.indrelid
    WHERE t.relnamespace = 'public'::regnamespace
    ORDER BY 1, 2
"""


def test_no_table_keeps_two_indexes_of_the_same_columns():
    if connection.vendor != "postgresql":
        pytest.skip("read from PostgreSQL's catalog")
    with connection.cursor() as cursor:
        cursor.execute(SAME_INDEXES)
        assert cursor.fetchall() == []
