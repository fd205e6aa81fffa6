"""Helpers for the sweep tests: many eligible rows written with SQL, table snapshots, tombstone contents."""
from __future__ import annotations

import json
import uuid
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from memory.models import ForgetEvent, ForgetMode, ForgetStatus, Scope, ScopeClosure, Subject, Tenant
from retention.models import ContentClass
from tombstones.models import Tombstone

# The sweeps' own bookkeeping: a dry run writes its report there, and nothing anywhere else.
BOOKKEEPING = {"memory_sweeprun", "memory_sweepbatch", "retention_coveragereport"}


def snapshot() -> dict[str, list[tuple]]:
    """Every row of every table of the four apps (but the sweeps' bookkeeping), in a comparable form."""
    from django.apps import apps

    names = sorted({m._meta.db_table for label in ("memory", "retention", "dsr", "tombstones")
                    for m in apps.get_app_config(label).get_models()} - BOOKKEEPING)
    tables = {}
    with connection.cursor() as cursor:
        for table in names:
            cursor.execute(f"SELECT * FROM {table} ORDER BY 1")
            tables[table] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                             for row in cursor.fetchall()]
    return tables


def hidden_rows_insert(tenant: Tenant, count: int, *, class_name: str = "chat", artifacts: bool = False,
                       forgotten_days_ago: int = 1) -> list[int]:
    """`count` hidden records whose lock has ended (as a soft forget leaves them), written with one INSERT ...
    SELECT; one forget event stands for the soft forget that hid them. Optionally one summary artifact each."""
    content_class, _ = ContentClass.objects.get_or_create(tenant=tenant, name=class_name)
    scope, created = Scope.objects.get_or_create(tenant=tenant, path="user:bulk", defaults={"depth": 1})
    if created:
        ScopeClosure.objects.create(ancestor=scope, descendant=scope, depth=0)
    subject, _ = Subject.objects.get_or_create(tenant=tenant, ref="subject-bulk")
    now = timezone.now()
    event = ForgetEvent.objects.create(
        tenant=tenant, public_id=uuid.uuid4(), actor="test", path="api", target={"subject": "bulk"},
        mode=ForgetMode.SOFT, status=ForgetStatus.FORGOTTEN, outcomes={"hidden": []}, created_at=now)
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt,
                                       tier, created_at, forgotten_at, redacted_at, erasure_pending, forget_event_id,
                                       retained_until, held, lock_protects_content)
            SELECT %s, %s, %s, %s, 'bulk note ' || g, md5(g::text || 'c') || md5(g::text || 'd'), md5(g::text),
                   'hot', %s, %s, NULL, true, %s, NULL, false, false
            FROM generate_series(1, %s) g ORDER BY g
            RETURNING id""", [tenant.pk, scope.pk, subject.pk, content_class.pk, now - timedelta(days=10),
                              now - timedelta(days=forgotten_days_ago), event.pk, count])
        ids = sorted(row[0] for row in cursor.fetchall())
        if artifacts:
            cursor.execute("""
                WITH a AS (
                    INSERT INTO memory_derivedartifact (tenant_id, scope_id, kind, content, holder, created_at,
                                                        forgotten_at)
                    SELECT %s, %s, 'summary', 'summary of ' || r, '', now(), now() FROM unnest(%s::bigint[]) r
                    RETURNING id, substring(content from 12)::bigint AS source)
                INSERT INTO memory_lineage (artifact_id, source_id) SELECT id, source FROM a""",
                           [tenant.pk, scope.pk, ids])
    return ids


def tombstoned_ids(path: str, outcome: str = "deleted") -> list[int]:
    """Every record id the tombstones of forgets on `path` list with `outcome`, duplicates kept."""
    public_ids = ForgetEvent.objects.filter(path=path).values_list("public_id", flat=True)
    found = []
    for payload in Tombstone.objects.filter(id__in=public_ids).values_list("payload", flat=True):
        found += [int(r["record_id"]) for r in json.loads(bytes(payload))["execution"]["records"]
                  if r["outcome"] == outcome]
    return found


def statement_of(event: ForgetEvent) -> dict:
    return json.loads(bytes(Tombstone.objects.get(id=event.public_id).payload))
