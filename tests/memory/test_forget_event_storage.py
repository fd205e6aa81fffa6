"""How forget events are stored: a sweep batch's event (its target and outcomes list every record, its artifacts
every artifact) is compressed with lz4, which costs the server a fraction of pglz's time (migration memory 0010),
and read back intact."""
from __future__ import annotations

import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from memory.models import ForgetEvent, ForgetMode, ForgetStatus
from tests.factories import lz4_required

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="TOAST compression is PostgreSQL's")
def test_a_large_forget_event_is_stored_with_lz4_and_read_back_intact(tenant):
    lz4_required()
    # Given the event of a sweep batch of 5,000 records and 10,000 artifacts (~165 kB of JSON, out of line)
    ids = list(range(100_000, 145_000, 9))
    target = {"record_ids": ids}
    outcomes = {"hidden": [], "redacted": [], "deleted": ids, "refused": []}
    artifacts = {"deleted": list(range(2_000_000, 2_010_000))}

    # When it is written
    event = ForgetEvent.objects.create(tenant=tenant, public_id=uuid.uuid4(), actor="sweep:compaction",
                                       path="compaction", target=target, mode=ForgetMode.HARD,
                                       status=ForgetStatus.FORGOTTEN, outcomes=outcomes, artifacts=artifacts,
                                       created_at=timezone.now())

    # Then its three JSON values are compressed with lz4, and read back as they were written
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(target), pg_column_compression(outcomes), "
                       "pg_column_compression(artifacts) FROM memory_forgetevent WHERE id = %s", [event.pk])
        assert cursor.fetchone() == ("lz4", "lz4", "lz4")
    stored = ForgetEvent.objects.get(pk=event.pk)
    assert (stored.target, stored.outcomes, stored.artifacts) == (target, outcomes, artifacts)


def test_events_are_inserted_with_their_ids_and_values_whatever_orjson_refuses(tenant):
    from memory.services.forget import _events_insert

    # Given two events, one of them with what orjson refuses (an int key, as `json` writes it: "7")
    now = timezone.now()
    plain = ForgetEvent(tenant=tenant, public_id=uuid.uuid4(), actor="api", path="api", target={"record_ids": [1]},
                        mode=ForgetMode.HARD, status=ForgetStatus.FORGOTTEN, outcomes={"deleted": [1]},
                        artifacts={}, reason="a reason with 'quotes' and \\ backslashes", created_at=now)
    refused_by_orjson = ForgetEvent(tenant=tenant, public_id=uuid.uuid4(), actor="api", path="api",
                                    target={7: "seven"}, mode=ForgetMode.SOFT, status=ForgetStatus.FORGOTTEN,
                                    outcomes={"hidden": [7]}, artifacts={}, created_at=now)

    # When each is inserted
    _events_insert([plain])
    _events_insert([refused_by_orjson])

    # Then both have their ids and read back as written (the int key as JSON spells it)
    assert plain.pk and refused_by_orjson.pk and plain.pk != refused_by_orjson.pk
    stored = ForgetEvent.objects.get(pk=plain.pk)
    assert (stored.public_id, stored.target, stored.outcomes, stored.reason, stored.created_at) == (
        plain.public_id, plain.target, plain.outcomes, plain.reason, now)
    assert ForgetEvent.objects.get(pk=refused_by_orjson.pk).target == {"7": "seven"}


def test_an_event_holding_what_json_refuses_is_refused_as_before(tenant):
    from memory.services.forget import _events_insert

    # A datetime inside the JSON: orjson could write it, JSONField's `json` cannot; the insert fails as it did
    event = ForgetEvent(tenant=tenant, public_id=uuid.uuid4(), actor="api", path="api", target={"at": timezone.now()},
                        mode=ForgetMode.HARD, status=ForgetStatus.FORGOTTEN, outcomes={}, artifacts={},
                        created_at=timezone.now())
    with pytest.raises(TypeError), transaction.atomic():
        _events_insert([event])
    assert not ForgetEvent.objects.filter(public_id=event.public_id).exists()


def test_json_rows_writes_what_json_writes_and_refuses_what_it_refuses():
    import json
    from datetime import UTC, datetime

    from memory.lookups import json_rows

    at = datetime(2026, 12, 4, 19, 0, 0, 123456, tzinfo=UTC)
    rows = [{"id": 1, "at": at, "reason": {"code": "legal_hold", "blocking": [{"authority": "court"}]}, "none": None}]
    assert json.loads(json_rows(rows)) == [{**rows[0], "at": at.isoformat()}]  # a top-level time as ISO 8601
    assert json_rows([{"reason": {"at": at}}]) is None  # inside a value: `json` would refuse it
    assert json_rows([{"reason": {7: "seven"}}]) is None  # a key that is not a str
    assert json_rows([{"id": 2**70}]) is None  # past 64 bits
