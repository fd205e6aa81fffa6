"""The rows of each audit export, read in bounded chunks.

Each export is a generator of plain dicts (the JSON shape; `Export.flat` turns one into a CSV row). Rows are
read by keyset pagination (`id > last ORDER BY id LIMIT CHUNK`), and what a chunk nests (a request's history
and plan items, a hold's listed records) is read for the whole chunk with one `IN (...)` query each: the
number of queries grows with the number of chunks, never with rows, and memory holds one chunk at a time
(`.iterator()` would not do: the nested rows must be fetched per chunk of parents anyway, and a server-side
cursor needs a transaction held open on PostgreSQL and is not one on SQLite).

What is never read, so can never be written: any record's or artifact's content, commitment or salt (no
query here touches memory_record's columns at all), a request's `export` (an access request's copy of the
subject's data), its contact e-mail, the notices sent to the subject, tombstone salts, and the subject's
reference. The reference is the tenant's name for a person (a customer number, often an e-mail or a name:
DESIGN.md invariant 6 treats it as personal data); the admin shows it to logged-in staff, but an export is a
file that travels (mail, spreadsheets, an auditor's laptop), so it carries the subject's internal id
(`subject_id`) instead, which staff can look up in the admin (memory > Subjects) when they must.

Scope: `tenant=None` exports every tenant (the admin, where staff see every tenant); the API passes the
token's tenant. Sweep runs have no tenant (one run covers them all): a tenant's export lists them (when they
ran, how they ended) without their counts, which add up every tenant's records.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone as dt_timezone
from typing import Any, Callable, Iterator

from django.db.models import Count, Q

from audit_exports import errors
from dsr.models import RequestItem, RequestTransition, RetentionConflict, SubjectRequest
from memory.models import SweepRun, Tenant
from retention.models import HoldRecord, LegalHold, RetentionTableVersion

# Parents read per query. 2,000 requests with their history (~5 rows each) and plan items (~10 each) is ~30k
# small dicts at a time: a few tens of MB at most, and three queries per 2,000 requests (bench_audit_export.py).
CHUNK = 2000
# A version holds its tenant's whole table (its rules), so fewer at a time.
VERSIONS_CHUNK = 200
DATE_CHARS = len("2026-01-31")


@dataclass(frozen=True)
class Period:
    """Whole UTC days, both ends inclusive: `from=2026-01-01&to=2026-01-31` is January, i.e. the instants
    [2026-01-01T00:00Z, 2026-02-01T00:00Z). Either end may be open (None)."""

    start: date | None = None
    end: date | None = None

    @property
    def start_at(self) -> datetime | None:
        return datetime.combine(self.start, time.min, tzinfo=dt_timezone.utc) if self.start else None

    @property
    def end_before(self) -> datetime | None:
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=dt_timezone.utc) if self.end else None

    def q(self, field: str) -> Q:
        """The rows whose `field` (a date-time) falls in the period."""
        q = Q()
        if self.start is not None:
            q &= Q(**{f"{field}__gte": self.start_at})
        if self.end is not None:
            q &= Q(**{f"{field}__lt": self.end_before})
        return q

    def any_of(self, *fields: str) -> Q:
        """Rows with any of these date-times in the period (a hold placed or released in it)."""
        if self.start is None and self.end is None:
            return Q()
        q = Q(pk__in=[])
        for field in fields:
            q |= self.q(field)
        return q


def _date(value: object, name: str) -> date | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) != DATE_CHARS:
        raise errors.invalid("invalid_period", f"`{name}` must be a date, YYYY-MM-DD.", parameter=name)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise errors.invalid("invalid_period", f"`{name}` must be a date, YYYY-MM-DD.", parameter=name) from None


def period_parse(*, start: object = None, end: object = None) -> Period:
    """`from` and `to` as given (strings, YYYY-MM-DD, each optional); `invalid_period` (400) otherwise, or when
    `to` is before `from`."""
    period = Period(_date(start, "from"), _date(end, "to"))
    if period.start and period.end and period.end < period.start:
        raise errors.invalid("invalid_period", "`to` is before `from`.", parameter="to")
    return period


def _chunks(queryset, fields: list[str], chunk: int | None) -> Iterator[list[dict]]:
    """`queryset`'s rows as dicts of `fields` ("id" first), `chunk` (default CHUNK) at a time, by id."""
    chunk = chunk or CHUNK
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk").values(*fields)[:chunk])
        if rows:
            yield rows
        if len(rows) < chunk:
            return
        last = rows[-1]["id"]


def _tenant_q(tenant: Tenant | None, field: str = "tenant") -> Q:
    return Q() if tenant is None else Q(**{field: tenant})


# --- subject requests ------------------------------------------------------------------------------------

REQUEST_FIELDS = ["id", "tenant__name", "subject_id", "type", "regulation", "channel", "received_at", "due_date",
                  "extended_due_date", "effective_due_date", "extension_notified_at", "status",
                  "identity_verified_at", "workflow_started_at", "confirmed_at", "notified_at"]
TRANSITION_FIELDS = ["request_id", "at", "action", "from_status", "to_status", "actor", "note"]
ITEM_FIELDS = ["request_id", "kind", "object_id", "artifact_kind", "decision", "outcome", "reason", "deferred_until",
               "forget_event_id", "tombstone_id"]


def _requests(tenant: Tenant | None, period: Period, request_ids=None):
    """`request_ids`: only these (ids, or a query of ids such as an admin selection's), else every request."""
    requests = SubjectRequest.objects.filter(_tenant_q(tenant), period.q("received_at"))
    return requests if request_ids is None else requests.filter(pk__in=request_ids)


def _request_row(row: dict) -> dict:
    row["tenant"] = row.pop("tenant__name")
    row["extended"] = row["extended_due_date"] is not None
    return row


def _item_row(item: dict) -> dict:
    # Only the refusal's code: the reason's other fields (rule, authority, lock end) are in the conflicts
    # export; an access request's exclusion reason is a code too.
    reason = item.pop("reason")
    item["reason_code"] = reason.get("code") if isinstance(reason, dict) else None
    return item


def requests_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None,
                  request_ids=None) -> Iterator[dict]:
    """Subject requests received in the period (of `request_ids` only, when given), each with its history
    (every state change and act, who and when), its plan items with their outcome, a count per outcome, and
    the tombstone ids it issued."""
    requests = _requests(tenant, period, request_ids)
    for rows in _chunks(requests, REQUEST_FIELDS, chunk):
        # The chunk's requests as a subquery (the same filter, between its first and last id), not a list of
        # 2,000 ids (Django compiles an `IN (...)` list one parameter at a time, ~0.1 ms each); and the same id
        # range on the children's request id, without which PostgreSQL hash-joins the subquery against a scan of
        # the whole history table at every chunk (bench_audit_export.py: 200 ms a chunk at 500k rows, 10 ms
        # with the range on the (request, ...) indexes).
        low, high = rows[0]["id"], rows[-1]["id"]
        of_chunk = Q(request_id__gte=low, request_id__lte=high,
                     request_id__in=requests.filter(pk__gte=low, pk__lte=high).values("pk"))
        history: dict[int, list[dict]] = defaultdict(list)
        for t in RequestTransition.objects.filter(of_chunk).order_by("request_id", "at", "pk").values(
                *TRANSITION_FIELDS):
            history[t.pop("request_id")].append(t)
        items: dict[int, list[dict]] = defaultdict(list)
        for item in RequestItem.objects.filter(of_chunk).order_by("request_id", "pk").values(*ITEM_FIELDS):
            items[item.pop("request_id")].append(_item_row(item))
        for row in rows:
            row = _request_row(row)
            mine = items.pop(row["id"], [])
            row["item_outcomes"] = dict(sorted(Counter(i["outcome"] for i in mine).items()))
            row["tombstone_ids"] = sorted({str(i["tombstone_id"]) for i in mine if i["tombstone_id"]})
            row["transitions"] = history.pop(row["id"], [])
            row["items"] = mine
            yield row


def request_transitions_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """The history rows of the requests received in the period (the CSV companion of `requests`)."""
    rows = RequestTransition.objects.filter(_tenant_q(tenant, "request__tenant"), period.q("request__received_at"))
    for part in _chunks(rows, ["id", *TRANSITION_FIELDS], chunk):
        yield from part


def request_items_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """The plan items of the requests received in the period, with their outcome (the CSV companion of
    `requests`)."""
    rows = RequestItem.objects.filter(_tenant_q(tenant, "request__tenant"), period.q("request__received_at"))
    for part in _chunks(rows, ["id", *ITEM_FIELDS], chunk):
        for item in part:
            yield _item_row(item)


# --- conflicts, the retention table, holds, sweeps -------------------------------------------------------

CONFLICT_FIELDS = ["id", "tenant__name", "request_id", "record_id", "code", "authority", "blocking", "locked_until",
                   "status", "opened_at", "decided_by", "decided_at", "justification", "deferred_to"]


def conflicts_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """Retention conflicts opened or decided in the period, with legal's decision, who made it and why."""
    rows = RetentionConflict.objects.filter(_tenant_q(tenant), period.any_of("opened_at", "decided_at"))
    for part in _chunks(rows, CONFLICT_FIELDS, chunk):
        for row in part:
            row["tenant"] = row.pop("tenant__name")
            yield row


VERSION_FIELDS = ["id", "tenant__name", "number", "created_at", "actor", "change", "rules", "digest",
                  "previous_digest", "kid", "signature", "signed_late"]


def retention_versions_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """Versions of the retention table made in the period, each with the whole table it held (its rules) and
    its signature."""
    rows = RetentionTableVersion.objects.filter(_tenant_q(tenant), period.q("created_at"))
    for part in _chunks(rows, VERSION_FIELDS, chunk or VERSIONS_CHUNK):
        for row in part:
            row["tenant"] = row.pop("tenant__name")
            row["signature"] = bytes(row["signature"]).hex()
            row["signed"] = bool(row["signature"])
            yield row


HOLD_FIELDS = ["id", "tenant__name", "matter", "authority", "placed_by", "placed_at", "subject_id",
               "content_class__name", "scope_id", "released_at", "released_by", "release_reason"]


def holds_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """Legal holds placed or released in the period: who placed and released each, on what authority, and
    what it covers (a subject's id, a content class, a scope's id, or a number of listed records)."""
    rows = LegalHold.objects.filter(_tenant_q(tenant), period.any_of("placed_at", "released_at"))
    for part in _chunks(rows, HOLD_FIELDS, chunk):
        listed = dict(HoldRecord.objects.filter(hold_id__in=[h["id"] for h in part]).order_by()
                      .values_list("hold_id").annotate(n=Count("pk")).values_list("hold_id", "n"))
        for row in part:
            row["tenant"] = row.pop("tenant__name")
            row["content_class"] = row.pop("content_class__name")
            row["listed_records"] = listed.get(row["id"], 0)
            row["target"] = ("subject" if row["subject_id"] else "content_class" if row["content_class"]
                             else "scope" if row["scope_id"] else "records")
            row["active"] = row["released_at"] is None
            yield row


SWEEP_FIELDS = ["id", "kind", "status", "dry_run", "actor", "started_at", "finished_at", "batches",
                "resumed_by_id", "errors", "counts"]


def sweep_runs_rows(*, tenant: Tenant | None, period: Period, chunk: int | None = None) -> Iterator[dict]:
    """Sweep runs started in the period: kind, how they ended, who started them. The error messages and a dry
    run's report (which names record ids of every tenant) are left out; an error count says that there were
    some. The counts add up every tenant's records: shown only in an export of every tenant."""
    for part in _chunks(SweepRun.objects.filter(period.q("started_at")), SWEEP_FIELDS, chunk):
        for row in part:
            row["error_count"] = len(row.pop("errors") or [])
            if tenant is not None:
                row["counts"] = None
            yield row


# --- the exports -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Export:
    kind: str
    title: str
    rows: Callable[..., Iterator[dict]]
    # The CSV's header; a row's cell for each is `csv_cells` (nested values become compact text).
    columns: tuple[str, ...]


def _compact_outcomes(outcomes: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in outcomes.items())


def csv_cells(export: Export, row: dict) -> list[Any]:
    """One CSV row: the columns' values; for `requests`, the nested history and items as compact columns
    (counts, the last change, outcomes per kind, tombstone ids): the full rows are the companion exports."""
    if export.kind == "requests":
        last = row["transitions"][-1] if row["transitions"] else {}
        row = {**row, "transition_count": len(row["transitions"]), "last_action": last.get("action"),
               "last_actor": last.get("actor"), "last_at": last.get("at"), "item_count": len(row["items"]),
               "item_outcomes": _compact_outcomes(row["item_outcomes"]),
               "tombstone_ids": " ".join(row["tombstone_ids"])}
    elif export.kind == "retention-versions":
        row = {**row, "rule_count": len(row["rules"] or [])}
    return [row.get(column) for column in export.columns]


EXPORTS: dict[str, Export] = {e.kind: e for e in [
    Export("requests", "Subject requests", requests_rows, (
        "id", "tenant", "subject_id", "type", "regulation", "channel", "received_at", "due_date", "extended",
        "extended_due_date", "effective_due_date", "extension_notified_at", "status", "identity_verified_at",
        "workflow_started_at", "confirmed_at", "notified_at", "transition_count", "last_action", "last_actor",
        "last_at", "item_count", "item_outcomes", "tombstone_ids")),
    Export("request-transitions", "Subject requests: state changes", request_transitions_rows,
           ("id", *TRANSITION_FIELDS)),
    Export("request-items", "Subject requests: outcome per item", request_items_rows, (
        "id", "request_id", "kind", "object_id", "artifact_kind", "decision", "outcome", "reason_code",
        "deferred_until", "forget_event_id", "tombstone_id")),
    Export("conflicts", "Retention conflicts and decisions", conflicts_rows, (
        "id", "tenant", *CONFLICT_FIELDS[2:])),
    Export("retention-versions", "Retention table versions", retention_versions_rows, (
        "id", "tenant", "number", "created_at", "actor", "change", "rule_count", "rules", "digest", "previous_digest",
        "kid", "signed", "signed_late", "signature")),
    Export("holds", "Legal holds", holds_rows, (
        "id", "tenant", "matter", "authority", "placed_by", "placed_at", "target", "subject_id", "content_class",
        "scope_id", "listed_records", "active", "released_at", "released_by", "release_reason")),
    Export("sweep-runs", "Sweep runs", sweep_runs_rows, (
        "id", "kind", "status", "dry_run", "actor", "started_at", "finished_at", "batches", "resumed_by_id",
        "error_count", "counts")),
]}


def export_get(kind: object) -> Export:
    if not isinstance(kind, str) or kind not in EXPORTS:
        raise errors.not_found("unknown_export", f"The exports are: {', '.join(EXPORTS)}.")
    return EXPORTS[kind]
