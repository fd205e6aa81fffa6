"""Restoring records from an archive file: nothing forgotten comes back.

The deletion log is replayed first, for the whole archive at once: an archive line is skipped, with the
reason, when its record id
  - is in the archive deletion log (memory.ArchiveDeletion: a forget reached the archive copy),
  - was hard-deleted by a forget (memory.DeletedRecord),
  - is still at rest but forgotten (hidden or redacted),
  - is listed in a signed tombstone of the tenant with any outcome other than refused,
or when its commitment (if the archive carries one) is one a forget logged or signed; and also when the
record is still at rest and live (nothing to restore), was restored before (idempotent), or the line is
not a valid record.

Restored records get NEW ids, through the ordinary write path (`record_write`: the lock computed from the
retention table and holds, the embedding, the write ledger): ids are never reused, so a restored row can
never contradict the tombstone or the 410 answer of a record id that was forgotten, and the id sequence
cannot collide. Each restored record is tagged `restored:<archive id>`, which makes a second restore of the
same archive skip it, and keeps the original creation time (retention counts from it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from config.errors import ApplicationError
from memory.models import ArchiveDeletion, DeletedRecord, Record, RecordTag, Tenant, Tier
from memory.services.write import MAX_TAGS, record_write

RESTORED_TAG = "restored:{}"


@dataclass
class RestoreReport:
    dry_run: bool
    restored: list[dict] = field(default_factory=list)   # {"archive_id", "record_id"}
    skipped: list[dict] = field(default_factory=list)    # {"line", "archive_id", "reason", "detail"}

    def skip(self, line: int, archive_id, reason: str, detail: str) -> None:
        self.skipped.append({"line": line, "archive_id": archive_id, "reason": reason, "detail": detail})


def _entries(lines: Iterable[str], report: RestoreReport) -> list[tuple[int, dict]]:
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            report.skip(number, None, "invalid", "not a JSON object")
            continue
        required = ("id", "scope", "content_class", "content", "created_at")
        if (not isinstance(entry, dict) or any(k not in entry for k in required)
                or isinstance(entry["id"], bool) or not isinstance(entry["id"], int)
                or not isinstance(entry["created_at"], str) or parse_datetime(entry["created_at"]) is None):
            report.skip(number, entry.get("id") if isinstance(entry, dict) else None, "invalid",
                        f"a record line has {', '.join(required)} (id an integer, created_at an ISO time)")
            continue
        entries.append((number, entry))
    return entries


def _aware(value: str) -> datetime:
    parsed = parse_datetime(value)
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


def _tombstoned(tenant: Tenant, ids: list[int], commitments: list[str]) -> tuple[dict[int, str], dict[str, str]]:
    """Record ids and commitments that the tenant's signed tombstones list as hidden, redacted or deleted."""
    if connection.vendor == "postgresql":
        sql = ("SELECT r.value ->> 'record_id', r.value ->> 'commitment', t.id::text FROM tombstones_tombstone t "
               "CROSS JOIN LATERAL jsonb_array_elements(convert_from(t.payload, 'UTF8')::jsonb -> 'execution' "
               "-> 'records') r WHERE t.tenant_id = %s AND r.value ->> 'outcome' <> 'refused' "
               "AND (r.value ->> 'record_id' = ANY(%s) OR r.value ->> 'commitment' = ANY(%s))")
        params = [tenant.pk, [str(i) for i in ids], commitments]
    else:
        sql = ("SELECT json_extract(r.value, '$.record_id'), json_extract(r.value, '$.commitment'), t.id "
               "FROM tombstones_tombstone t, json_each(CAST(t.payload AS TEXT), '$.execution.records') r "
               "WHERE t.tenant_id = %s AND json_extract(r.value, '$.outcome') <> 'refused'")
        params = [tenant.pk]
    by_id, by_commitment = {}, {}
    wanted_ids, wanted_commitments = {str(i) for i in ids}, set(commitments)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for record_id, commitment, tombstone_id in cursor.fetchall():
            if record_id in wanted_ids:
                by_id.setdefault(int(record_id), str(tombstone_id))
            if commitment in wanted_commitments:
                by_commitment.setdefault(commitment, str(tombstone_id))
    return by_id, by_commitment


def archive_restore(*, tenant: Tenant, lines: Iterable[str], dry_run: bool = False) -> RestoreReport:
    """Restore the archive's records into `tenant`, after replaying the deletion log; see the module."""
    report = RestoreReport(dry_run=dry_run)
    entries = _entries(lines, report)
    ids = [e["id"] for _, e in entries]
    commitments = [e["commitment"] for _, e in entries if isinstance(e.get("commitment"), str)]
    deleted = dict(DeletedRecord.objects.filter(tenant=tenant, record_id__in=ids)
                   .values_list("record_id", "forget_event_id"))
    logged = dict(ArchiveDeletion.objects.filter(tenant=tenant, record_id__in=ids)
                  .values_list("record_id", "forget_event_id"))
    logged_commitments = dict(ArchiveDeletion.objects.filter(tenant=tenant, commitment__in=commitments)
                              .values_list("commitment", "forget_event_id"))
    at_rest = {pk: (forgotten, redacted, event) for pk, forgotten, redacted, event in
               Record.objects.filter(tenant=tenant, pk__in=ids)
               .values_list("pk", "forgotten_at", "redacted_at", "forget_event_id")}
    elsewhere = set(Record.objects.filter(pk__in=ids).exclude(tenant=tenant).values_list("pk", flat=True))
    restored_before = {name: pk for name, pk in RecordTag.objects.filter(
        record__tenant=tenant, name__in=[RESTORED_TAG.format(i) for i in ids]).values_list("name", "record_id")}
    tombstoned, tombstoned_commitments = _tombstoned(tenant, ids, commitments)

    seen: set[int] = set()
    for number, entry in entries:
        archive_id, commitment = entry["id"], entry.get("commitment")
        reason = None
        if archive_id in seen:
            reason = ("duplicate", "the archive holds this record id twice; the first line was used")
        elif archive_id in logged:
            reason = ("forgotten", f"in the archive deletion log (forget #{logged[archive_id]})")
        elif archive_id in deleted:
            reason = ("forgotten", f"hard-deleted by forget #{deleted[archive_id]}")
        elif archive_id in at_rest and (at_rest[archive_id][0] or at_rest[archive_id][1]):
            reason = ("forgotten", f"{'redacted' if at_rest[archive_id][1] else 'hidden'} by forget "
                                   f"#{at_rest[archive_id][2]}")
        elif archive_id in tombstoned:
            reason = ("forgotten", f"listed in tombstone {tombstoned[archive_id]}")
        elif commitment and commitment in logged_commitments:
            reason = ("forgotten", f"its content commitment is in the archive deletion log (forget "
                                   f"#{logged_commitments[commitment]})")
        elif commitment and commitment in tombstoned_commitments:
            reason = ("forgotten", f"its content commitment is listed in tombstone {tombstoned_commitments[commitment]}")
        elif archive_id in at_rest:
            reason = ("present", "the record is still at rest and live")
        elif archive_id in elsewhere:
            reason = ("other_tenant", "this record id belongs to another tenant")
        elif RESTORED_TAG.format(archive_id) in restored_before:
            reason = ("already_restored", f"restored before as record {restored_before[RESTORED_TAG.format(archive_id)]}")
        seen.add(archive_id)
        if reason:
            report.skip(number, archive_id, *reason)
            continue
        tags = [t for t in entry.get("tags") or [] if isinstance(t, str)][:MAX_TAGS - 1]
        if dry_run:
            report.restored.append({"archive_id": archive_id, "record_id": None})
            continue
        try:
            record = record_write(
                tenant=tenant, scope_path=entry["scope"], content_class_name=entry["content_class"],
                content=entry["content"], subject_ref=entry.get("subject"), tier=entry.get("tier") or Tier.HOT,
                tags=tags + [RESTORED_TAG.format(archive_id)], created_at=_aware(entry["created_at"]),
            )
        except ApplicationError as exc:
            report.skip(number, archive_id, "invalid", f"{exc.code}: {exc.detail}")
            continue
        report.restored.append({"archive_id": archive_id, "record_id": record.pk})
    return report
