"""Confirming an erasure: an acknowledgement is intent until every read path and every derivative has
been probed and found empty (DESIGN.md invariant 5). Only then is `erasure_pending` cleared."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from memory import errors, selectors
from memory.models import DeletedRecord, DerivedArtifact, FleetCopyNotice, ForgetEvent, Lineage, Record, Tenant

_PROBE_BATCH = 5_000


@dataclass
class ConfirmResult:
    event: ForgetEvent
    erased: bool
    evidence: list[dict]
    gaps: list[dict] = field(default_factory=list)

    def as_api(self) -> dict:
        body = {
            "erased": self.erased,
            "handle": {"sequence": self.event.pk, "tombstone_id": str(self.event.public_id)},
            "evidence": self.evidence,
            "not_covered": self.event.outcomes.get("refused", []),
        }
        if not self.erased:
            body.update(code="erasure_unconfirmed",
                        detail="The erasure cannot be asserted yet; see `gaps`.", gaps=self.gaps)
        return body


def forget_event_get(*, tenant: Tenant, handle: object) -> ForgetEvent:
    """The forget event a handle names: `{"sequence": n}` and/or `{"tombstone_id": "..."}`."""
    if not isinstance(handle, dict) or not handle or not set(handle) <= {"sequence", "tombstone_id"}:
        raise errors.invalid("invalid_handle", "handle must be an object with `sequence` and/or `tombstone_id`.")
    events = ForgetEvent.objects.filter(tenant=tenant)
    sequence = handle.get("sequence")
    if sequence is not None:
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 1:
            raise errors.invalid("invalid_handle", "sequence must be a positive integer.")
        events = events.filter(pk=sequence)
    if handle.get("tombstone_id") is not None:
        try:
            events = events.filter(public_id=uuid.UUID(str(handle["tombstone_id"])))
        except ValueError:
            raise errors.invalid("invalid_handle", "tombstone_id must be a UUID.") from None
    event = events.first()
    if event is None:
        raise errors.not_found("No such forget.")
    return event


def _batches(ids: list[int]):
    for start in range(0, len(ids), _PROBE_BATCH):
        yield ids[start:start + _PROBE_BATCH]


def erasure_confirm(*, tenant: Tenant, handle: object) -> ConfirmResult:
    event = forget_event_get(tenant=tenant, handle=handle)
    outcomes = event.outcomes
    ids = sorted(outcomes.get("hidden", []) + outcomes.get("redacted", []) + outcomes.get("deleted", []))
    gaps: list[dict] = []
    evidence: list[dict] = []

    def probe(path: str, found: list[dict]):
        evidence.append({"path": path, "probed": len(ids), "found": len(found)})
        gaps.extend(found)

    rows = {}
    for batch in _batches(ids):
        rows.update({pk: (content, until, held) for pk, content, until, held in
                     Record.objects.filter(tenant=tenant, pk__in=batch)
                     .values_list("pk", "content", "retained_until", "held")})
    # Storage: the content itself must be gone (redacted to nothing, or the row deleted).
    probe("storage", [
        {"record_id": pk, "path": "storage", "gap": "content_at_rest",
         "detail": "The record is hidden but its content is still stored.",
         "deferred_until": "held" if rows[pk][2] else (rows[pk][1].isoformat() if rows[pk][1] else "compaction")}
        for pk in ids if pk in rows and rows[pk][0] != ""
    ])
    # Read by id, scope listing, keyword and similarity search: each path's own final step.
    probe("read_by_id", [{"record_id": r.pk, "path": "read_by_id", "gap": "visible"}
                         for batch in _batches(ids) for r in selectors._visible_records(tenant, batch)])
    scope_ids = set(Record.objects.filter(pk__in=ids).values_list("scope_id", flat=True)) | set(
        DeletedRecord.objects.filter(forget_event=event).values_list("scope_id", flat=True))
    listed = []
    for scope in tenant.scopes.filter(pk__in=scope_ids):
        for batch in _batches(ids):
            listed += [{"record_id": r.pk, "path": "scope_listing", "scope": scope.path, "gap": "visible"}
                       for r in selectors._visible_records(
                           tenant, Record.objects.filter(scope_id__in=selectors.scope_descendant_ids(scope),
                                                         pk__in=batch).values("pk"))]
    probe("scope_listing", listed)
    probe("keyword_search", _search_probe(tenant, ids, rows))
    probe("similarity_search", _similarity_probe(tenant, ids, rows))
    probe("derivatives", _derivatives_probe(event))
    probe("fleet_copies", [
        {"artifact_id": n.artifact_id, "holder": n.holder, "path": "fleet_copies", "gap": "unacknowledged",
         "deadline": n.deadline.isoformat(), "overdue": n.deadline < timezone.now()}
        for n in FleetCopyNotice.objects.filter(forget_event=event, acknowledged_at__isnull=True).order_by("pk")
    ])

    erased = not gaps
    if erased:
        with transaction.atomic():
            for batch in _batches(ids):
                Record.objects.filter(pk__in=batch, erasure_pending=True).update(erasure_pending=False)
            ForgetEvent.objects.filter(pk=event.pk, confirmed_at__isnull=True).update(confirmed_at=timezone.now())
        event.refresh_from_db()
    return ConfirmResult(event=event, erased=erased, evidence=evidence, gaps=gaps)


# Records whose content is still stored are a storage gap already; searching for a sample of them shows
# whether the search paths would also leak them, without one query per record on a large forget.
_SEARCH_PROBE_SAMPLE = 100


def _with_content(ids: list[int], rows: dict) -> list[int]:
    return [pk for pk in ids if pk in rows and rows[pk][0]][:_SEARCH_PROBE_SAMPLE]


def _search_probe(tenant: Tenant, ids: list[int], rows: dict) -> list[dict]:
    """Search for the words of every record whose content is still stored: none may come back."""
    found = []
    for pk in _with_content(ids, rows):
        content = rows[pk][0]
        words = " ".join(content.split()[:5])[:200]
        if words and selectors.records_search(tenant=tenant, q=words, limit=1, within_ids=[pk]):
            found.append({"record_id": pk, "path": "keyword_search", "gap": "visible"})
    return found


def _similarity_probe(tenant: Tenant, ids: list[int], rows: dict) -> list[dict]:
    """No vector derived from these records may remain in the similarity index."""
    found = []
    for batch in _batches(ids):
        for artifact_id, source_id in (Lineage.objects.filter(source_id__in=batch, artifact__vector__isnull=False)
                                       .values_list("artifact_id", "source_id")):
            found.append({"record_id": source_id, "artifact_id": artifact_id, "path": "similarity_index",
                          "gap": "vector_at_rest"})
    for pk in _with_content(ids, rows):
        content = rows[pk][0]
        if selectors.records_similar(tenant=tenant, q=content[:1000], limit=1, within_ids=[pk]):
            found.append({"record_id": pk, "path": "similarity_search", "gap": "visible"})
    return found


def _derivatives_probe(event: ForgetEvent) -> list[dict]:
    """Every artifact the forget handled must be gone: deleted, or redacted to nothing."""
    artifact_ids = sorted(a for items in event.artifacts.values() for a in items)
    found = []
    for batch in _batches(artifact_ids):
        for artifact in DerivedArtifact.objects.filter(pk__in=batch).only("pk", "kind", "content", "vector"):
            if artifact.content or artifact.vector is not None:
                found.append({"artifact_id": artifact.pk, "kind": artifact.kind, "path": "derivatives",
                              "gap": "content_at_rest"})
    return found
