"""How statements are stored: a large statement (a sweep batch's) and its salts are compressed with lz4, which
costs the server a tenth of pglz's time for the same size (migration tombstones 0006), and read back intact."""
import uuid

import pytest
from django.db import connection, transaction

from tests.factories import lz4_required
from tombstones.models import Tombstone, TombstoneSalts
from tombstones.services import TombstoneRequest, tombstone_issue, tombstones_issue_many
from tombstones.services.rows import INSERT_MAX_ROWS

from .factories import statement_make

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="TOAST compression is PostgreSQL's")
def test_a_large_statement_and_its_salts_are_stored_with_lz4_and_read_back_intact(tenant):
    lz4_required()
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


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's")
def test_tombstone_rows_are_inserted_row_by_row_by_copy_and_the_trigger_changes_nothing(tenant):
    # Given the tombstones table (migration tombstones 0007): COPY buffers no rows for a table with a BEFORE
    # INSERT row trigger, so a batch's rows are stored as they arrive, while the issuer signs the next ones
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'tombstones_tombstone'::regclass "
                       "AND tgtype & 2 = 2 AND tgtype & 4 = 4 AND tgtype & 1 = 1")  # BEFORE, INSERT, FOR EACH ROW
        assert [row[0] for row in cursor.fetchall()] == ["tombstones_tombstone_row_by_row"]
    # When a batch large enough for COPY is issued
    requests = []
    for n in range(INSERT_MAX_ROWS + 5):
        statement, salts = statement_make([f"note {n}"])
        requests.append(TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                                         subject_salts=salts))
    with transaction.atomic():
        issued = tombstones_issue_many(requests=requests)
    # Then every row is stored as the issuer wrote it
    stored = Tombstone.objects.in_bulk([request.tombstone_id for request in requests])
    assert [(stored[t.tombstone_id].leaf_index, stored[t.tombstone_id].tenant_id) for t in issued] == [
        (t.leaf_index, tenant.id) for t in issued]
