"""Confirming an erasure: an acknowledgement is intent until every read path and every derivative has
been probed and found empty (DESIGN.md invariant 5). Only then is `erasure_pending` cleared.

A copy held by another agent counts as handled only through the signed tombstone that closes its deferred
item (`memory.services.fleet`): the notice's time alone is a gap (`acknowledgement_unsigned`)."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from memory import errors, selectors
from memory.lookups import batches
from memory.models import (DeletedRecord, DerivedArtifact, FleetCopyNotice, ForgetEvent, Lineage, Record, ScopeClosure,
                           Tenant)

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


def erasure_confirm(*, tenant: Tenant, handle: object) -> ConfirmResult:
    """Probe one forget (named by its handle) through every read path; see `erasures_confirm`."""
    return erasures_confirm(tenant=tenant, events=[forget_event_get(tenant=tenant, handle=handle)])[0]


@dataclass
class _Probe:
    """One forget's part of a combined probe: its ids, and what each read path found of them."""

    event: ForgetEvent
    ids: list[int]
    gaps: list[dict] = field(default_factory=list)
    evidence: list[dict] = field(default_factory=list)

    def found(self, path: str, found: list[dict]) -> None:
        self.evidence.append({"path": path, "probed": len(self.ids), "found": len(found)})
        self.gaps.extend(found)


def erasures_confirm(*, tenant: Tenant, events: list[ForgetEvent]) -> list[ConfirmResult]:
    """Read back through every read path the records and artifacts of these forgets (of `tenant`), one
    pass per read path for all of them, and confirm each forget that nothing remains of.

    Each forget's result is the one it would have alone: its evidence and gaps are about its own records,
    artifacts, scopes and fleet notices only. A forget with no gap has `erasure_pending` cleared on its
    records and `confirmed_at` set.
    """
    probes = []
    for event in events:
        outcomes = event.outcomes
        probes.append(_Probe(event, sorted(outcomes.get("hidden", []) + outcomes.get("redacted", [])
                                           + outcomes.get("deleted", []))))
    ids = sorted({pk for probe in probes for pk in probe.ids})
    rows = {}
    for batch in batches(ids, _PROBE_BATCH):
        rows.update({pk: (content, until, held, scope_id) for pk, content, until, held, scope_id in
                     Record.objects.filter(tenant=tenant, pk__any_of=batch)
                     .values_list("pk", "content", "retained_until", "held", "scope_id")})
    # Read by id: the read path's own final step (which rows it lets through: the rows themselves are not needed).
    # The id lists here go as one bound array each (`any_of`, memory/lookups.py), not a placeholder per id.
    visible = {pk for batch in batches(ids, _PROBE_BATCH)
               for pk in selectors._visible_records(tenant, batch).values_list("pk", flat=True)}
    # Scope listing: the scopes the records were in (still stored, or as the deletion noted them), and
    # every scope below them; the listing's candidates go through the same final step.
    deleted_scopes: dict[int, set[int]] = {}
    for event_id, scope_id in DeletedRecord.objects.filter(
            forget_event_id__any_of=[p.event.pk for p in probes]).values_list("forget_event_id", "scope_id"):
        deleted_scopes.setdefault(event_id, set()).add(scope_id)
    scope_ids = {row[3] for row in rows.values()} | {s for scopes in deleted_scopes.values() for s in scopes}
    below: dict[int, set[int]] = {}
    for ancestor_id, descendant_id in ScopeClosure.objects.filter(
            ancestor_id__any_of=sorted(scope_ids), ancestor__tenant=tenant).values_list("ancestor_id", "descendant_id"):
        below.setdefault(ancestor_id, set()).add(descendant_id)
    under = set().union(*below.values()) if below else set()
    listed = {pk: scope_id for batch in (batches(ids, _PROBE_BATCH) if under else ()) for pk, scope_id in
              selectors._visible_records(tenant, Record.objects.filter(scope_id__any_of=sorted(under), pk__any_of=batch)
                                         .values("pk")).values_list("pk", "scope_id")}
    # The scopes' paths, to name them in a gap: needed only when a listing found something.
    scopes = list(tenant.scopes.filter(pk__in=below).order_by("pk")) if listed else []
    # Keyword and similarity search, for a sample of each forget's records whose content is still stored.
    sampled = {pk for probe in probes for pk in _with_content(probe.ids, rows)}
    searched = _search_probe(tenant, sorted(sampled), rows)
    vectors, similar = _similarity_probe(tenant, ids, sorted(sampled), rows)
    artifact_ids = sorted({a for p in probes for items in p.event.artifacts.values() for a in items})
    derivatives = _derivatives_probe(artifact_ids)
    fleet_gaps, fleet_closed = _fleet_probe([p.event for p in probes])

    for probe in probes:
        own_sample = set(_with_content(probe.ids, rows))
        # Storage: the content itself must be gone (redacted to nothing, or the row deleted).
        probe.found("storage", [
            {"record_id": pk, "path": "storage", "gap": "content_at_rest",
             "detail": "The record is hidden but its content is still stored.",
             "deferred_until": "held" if rows[pk][2] else (rows[pk][1].isoformat() if rows[pk][1] else "compaction")}
            for pk in probe.ids if pk in rows and rows[pk][0] != ""
        ])
        probe.found("read_by_id", [{"record_id": pk, "path": "read_by_id", "gap": "visible"}
                                   for pk in probe.ids if pk in visible])
        own_scopes = {rows[pk][3] for pk in probe.ids if pk in rows} | deleted_scopes.get(probe.event.pk, set())
        probe.found("scope_listing", [
            {"record_id": pk, "path": "scope_listing", "scope": scope.path, "gap": "visible"}
            for scope in scopes if scope.pk in own_scopes
            for pk in probe.ids if pk in listed and listed[pk] in below.get(scope.pk, ())
        ])
        probe.found("keyword_search", [gap for gap in searched if gap["record_id"] in own_sample])
        probe.found("similarity_search", [gap for gap in vectors if gap["record_id"] in set(probe.ids)]
                    + [gap for gap in similar if gap["record_id"] in own_sample])
        own_artifacts = {a for items in probe.event.artifacts.values() for a in items}
        probe.found("derivatives", [gap for gap in derivatives if gap["artifact_id"] in own_artifacts])
        probe.found("fleet_copies", fleet_gaps.get(probe.event.pk, []))
        if fleet_closed.get(probe.event.pk):
            probe.evidence[-1]["closing_tombstones"] = fleet_closed[probe.event.pk]

    erased = [probe for probe in probes if not probe.gaps]
    if erased:
        with transaction.atomic(savepoint=False):  # a failure here is the caller's failure too
            for batch in batches(sorted({pk for probe in erased for pk in probe.ids}), _PROBE_BATCH):
                Record.objects.filter(pk__any_of=batch, erasure_pending=True).update(erasure_pending=False)
            now = timezone.now()
            unconfirmed = [p.event for p in erased if p.event.confirmed_at is None]
            moved = ForgetEvent.objects.filter(pk__any_of=[e.pk for e in unconfirmed], confirmed_at__isnull=True).update(
                confirmed_at=now)
        if moved == len(unconfirmed):
            for event in unconfirmed:
                event.confirmed_at = now
        else:  # another confirmation was first for some of them: theirs is the time
            confirmed = dict(ForgetEvent.objects.filter(pk__any_of=[p.event.pk for p in erased]).values_list(
                "pk", "confirmed_at"))
            for probe in erased:
                probe.event.confirmed_at = confirmed[probe.event.pk]
    return [ConfirmResult(event=p.event, erased=not p.gaps, evidence=p.evidence, gaps=p.gaps) for p in probes]


def _fleet_probe(events: list[ForgetEvent]) -> tuple[dict[int, list[dict]], dict[int, list[dict]]]:
    """Per forget event: the gaps of its copies held by other agents, and the tombstones that closed the others.

    A copy is handled when a stored tombstone closes its item: its statement's `propagation.closes` names this
    forget's tombstone, `acknowledge` and `fleet_copy:N`. The notice's acknowledgement time alone is not enough
    (`acknowledgement_unsigned`); none at all is `unacknowledged`. One query for the notices, one for the closing
    tombstones' statements."""
    from tombstones.models import Tombstone

    notices = list(FleetCopyNotice.objects.filter(forget_event_id__any_of=[e.pk for e in events]).order_by("pk"))
    if not notices:
        return {}, {}
    by_event = {e.pk: e for e in events}
    payloads = dict(Tombstone.objects.filter(pk__in={n.closing_tombstone_id for n in notices
                                                     if n.closing_tombstone_id}).values_list("id", "payload"))
    now = timezone.now()
    gaps: dict[int, list[dict]] = {}
    closed: dict[int, list[dict]] = {}
    for notice in notices:
        item = f"fleet_copy:{notice.artifact_id}"
        payload = payloads.get(notice.closing_tombstone_id)
        if payload is not None and _closes(json.loads(bytes(payload)), by_event[notice.forget_event_id], item):
            closed.setdefault(notice.forget_event_id, []).append(
                {"item": item, "tombstone_id": str(notice.closing_tombstone_id)})
            continue
        gaps.setdefault(notice.forget_event_id, []).append({
            "artifact_id": notice.artifact_id, "holder": notice.holder, "path": "fleet_copies",
            "gap": "acknowledgement_unsigned" if notice.acknowledged_at else "unacknowledged",
            "deadline": notice.deadline.isoformat(), "overdue": notice.deadline < now,
        })
    return gaps, closed


def _closes(statement: dict, event: ForgetEvent, item: str) -> bool:
    """Whether a statement closes this forget's deferred `item` by acknowledgement."""
    closes = statement.get("propagation", {}).get("closes", [])
    return any(isinstance(c, dict) and c.get("tombstone_id") == str(event.public_id) and c.get("action") == "acknowledge"
               and item in (c.get("items") or []) for c in closes if isinstance(closes, list))


# Records whose content is still stored are a storage gap already; searching for a sample of them shows
# whether the search paths would also leak them, without one query per record on a large forget.
_SEARCH_PROBE_SAMPLE = 100


def _with_content(ids: list[int], rows: dict) -> list[int]:
    return [pk for pk in ids if pk in rows and rows[pk][0]][:_SEARCH_PROBE_SAMPLE]


def _search_probe(tenant: Tenant, sampled: list[int], rows: dict) -> list[dict]:
    """Search for the words of every sampled record whose content is still stored: none may come back. One
    keyword search per record, all made by one statement (`records_search_each`)."""
    queries = {pk: words for pk in sampled if (words := " ".join(rows[pk][0].split()[:5])[:200])}
    found = selectors.records_search_each(tenant=tenant, queries=queries) if queries else set()
    return [{"record_id": pk, "path": "keyword_search", "gap": "visible"} for pk in sampled if pk in found]


def _similarity_probe(tenant: Tenant, ids: list[int], sampled: list[int], rows: dict) -> tuple[list[dict], list[dict]]:
    """No vector derived from these records may remain in the similarity index, and no sampled record
    whose content is still stored may come back from a similarity search (one search per record, all made
    by `records_similar_each`)."""
    vectors = []
    for batch in batches(ids, _PROBE_BATCH):
        for artifact_id, source_id in (Lineage.objects.filter(source_id__any_of=batch, artifact__vector__isnull=False)
                                       .values_list("artifact_id", "source_id")):
            vectors.append({"record_id": source_id, "artifact_id": artifact_id, "path": "similarity_index",
                            "gap": "vector_at_rest"})
    # The HNSW index itself (memory 0016, PostgreSQL): a vector still in the graph can be found by a search,
    # whatever the final step filters after it.
    for artifact_id, source_id in selectors.similarity_index_entries(record_ids=ids):
        vectors.append({"record_id": source_id, "artifact_id": artifact_id, "path": "similarity_index",
                        "gap": "in_index"})
    queries = {pk: rows[pk][0][:1000] for pk in sampled}
    found = selectors.records_similar_each(tenant=tenant, queries=queries) if queries else set()
    similar = [{"record_id": pk, "path": "similarity_search", "gap": "visible"} for pk in sampled if pk in found]
    return vectors, similar


def _derivatives_probe(artifact_ids: list[int]) -> list[dict]:
    """Every artifact the forgets handled must be gone: deleted, or redacted to nothing."""
    found = []
    for batch in batches(artifact_ids, _PROBE_BATCH):
        for artifact in DerivedArtifact.objects.filter(pk__any_of=batch).only("pk", "kind", "content", "vector"):
            if artifact.content or artifact.vector is not None:
                found.append({"artifact_id": artifact.pk, "kind": artifact.kind, "path": "derivatives",
                              "gap": "content_at_rest"})
    return found
