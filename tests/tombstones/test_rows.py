"""RowWrites: rows a caller encodes itself go by binary COPY in chunks, the last one flushed, and `then` runs
after the last one is sent, before the COPY ends (the issuer signs there while the server stores them)."""
import pytest
from django.db import IntegrityError, connection, transaction

from tombstones.models import LogNode
from tombstones.services import log as log_service
from tombstones.services.rows import COPY_CHUNK_BYTES, RowWrites

pytestmark = pytest.mark.django_db


def node_rows(count: int) -> list[tuple[int, int, bytes]]:
    return [(1 + index % 5, index, index.to_bytes(4, "big") * 8) for index in range(count)]


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_encoded_rows_arrive_whole_over_many_chunks_and_then_runs_once_all_are_sent(monkeypatch):
    from psycopg import Copy

    rows = node_rows(1000)  # 56 bytes each: ~7 chunks
    assert len(rows) * 56 > 5 * COPY_CHUNK_BYTES
    consumed, seen_by_then, events = [], [], []
    write = Copy.write
    monkeypatch.setattr(Copy, "write", lambda self, data: (events.append(("write", bytes(data))), write(self, data)))

    def produced():
        for row in rows:
            consumed.append(row)
            yield row

    def then():
        # every row handed over and written, and nothing left in libpq's output buffer: the server has them all
        events.append(("then", b""))
        seen_by_then.append((len(consumed), connection.connection.pgconn.flush()))

    writes = RowWrites()
    writes.insert(model=LogNode, columns=["level", "node_index", "hash"], rows=produced(), count=len(rows),
                  encode=log_service._node_row_binary, then=then)
    with transaction.atomic():
        writes.send()
    assert seen_by_then == [(len(rows), 0)]
    assert [kind for kind, _ in events[-2:]] == ["write", "then"] and events[-2][1].endswith(b"\xff\xff")
    assert len(events) > 5 and all(len(data) <= 2 * COPY_CHUNK_BYTES for _, data in events)
    stored = {(level, index): bytes(hash_) for level, index, hash_ in LogNode.objects.values_list(
        "level", "node_index", "hash")}
    assert stored == {(level, index): hash_ for level, index, hash_ in rows}


def test_then_runs_on_the_paths_without_copy_too():
    """A few rows go in one query (or, on SQLite, bulk_create): `then` still runs once, after them."""
    calls = []
    writes = RowWrites()
    writes.insert(model=LogNode, columns=["level", "node_index", "hash"], rows=node_rows(3),
                  encode=log_service._node_row_binary, then=lambda: calls.append(LogNode.objects.count()))
    with transaction.atomic():
        writes.send()
    assert LogNode.objects.count() == 3 and len(calls) == 1


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_duplicate_in_encoded_rows_is_an_integrity_error_and_nothing_is_stored():
    rows = node_rows(500)
    rows.append(rows[123])
    writes = RowWrites()
    writes.insert(model=LogNode, columns=["level", "node_index", "hash"], rows=rows,
                  encode=log_service._node_row_binary)
    with pytest.raises(IntegrityError), transaction.atomic():
        writes.send()
    assert not LogNode.objects.exists()
