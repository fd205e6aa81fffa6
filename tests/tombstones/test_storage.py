"""How statements are stored: a large statement (a sweep batch's) and its salts are compressed with lz4, which
costs the server a tenth of pglz's time for the same size (migration tombstones 0006), and read back intact."""
import uuid

import pytest
from django.db import connection, transaction

from tests.factories import lz4_available
from tombstones.models import Tombstone, TombstoneSalts
from tombstones.services import tombstone_issue

from .factories import statement_make

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="TOAST compression is PostgreSQL's")
def test_a_large_statement_and_its_salts_are_stored_with_lz4_and_read_back_intact(tenant):
    if not lz4_available():
        pytest.skip("this PostgreSQL was built without lz4: the migration leaves pglz")
    # Given a statement over 2,000 records (~280 kB, stored out of line and compressed)
    statement, salts = statement_make([f"note {i}" for i in range(2000)])
    tombstone_id = uuid.uuid4()
    with transaction.atomic():
        tombstone_issue(tombstone_id=tombstone_id, tenant_id=tenant.id, statement=statement, subject_salts=salts)

    # Then both values are compressed with lz4, and read back as they were written
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(t.payload), pg_column_compression(s.salts) "
                       "FROM tombstones_tombstone t JOIN tombstones_tombstonesalts s ON s.tombstone_id = t.id "
                       "WHERE t.id = %s", [tombstone_id])
        assert cursor.fetchone() == ("lz4", "lz4")
    stored = Tombstone.objects.get(pk=tombstone_id)
    assert len(stored.payload) > 200_000
    assert TombstoneSalts.objects.get(pk=tombstone_id).salts == salts
