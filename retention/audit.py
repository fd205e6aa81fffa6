"""The coverage audit (DESIGN.md invariant 7): what the mandates say must be at rest, against what is.

It trusts storage, not the system's account of itself:
  - what was written: the write ledger (retention.WriteLedgerEntry), filled by a database trigger on every
    INSERT into memory_record, append-only;
  - the mandates: the active rules of each content class, from the latest version of the retention table
    whose signature verifies and whose hash chain holds (retention.versions; a version that does not is an
    anomaly, `retention_version_unverified`, and is not believed) and from the rule rows (the longer wins, and
    a difference between the two is reported: `rule_table_drift`), and the legal holds (rules, versions and
    holds are append-only in the database: retention migration 0005), applied to the ledger's own copy of each
    record's tenant, class, subject, scope and creation time (never the record's `retained_until` or `held`,
    which the system computed);
  - what was deleted on purpose: the record ids with outcome `deleted` in the signed tombstones' statements,
    indexed once per tombstone as the log grows (retention.TombstonedDeletion, append-only); a tombstone
    that excuses a mandated record is read and verified before it is believed;
  - what is at rest: memory_record itself. Never ForgetEvent, DeletedRecord or SweepRun.

Per content class it reports:
  - `gaps`: mandated records (under a rule's retention or a hold) that are not at rest and that no signed
    tombstone deleted: a violation, logged at ERROR and shown as an admin banner (`audit_alerts`);
  - `unaccounted_deletions`: records gone without a tombstone, though nothing mandated them;
  - `kept_past_mandate`: rows at rest past every mandate that should be gone: live records past their
    pact TTL (and every longer rule), redacted rows compaction should have purged;
  - `erasure_overdue`: hidden records whose content is still at rest after the purge deadline their
    tombstone gave (the lock's end, or the forget plus the compaction grace);
  - `unledgered`: rows at rest that the ledger never saw (written with the trigger disabled).
Findings count only once they are LEDGER_AUDIT_TOLERANCE_HOURS late (sweeps run on a schedule).

One set-based pass over ledger FULL JOIN records (PostgreSQL or SQLite), a second one for examples of ids
only when something was found. Each run is kept (retention.CoverageReport).
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from retention.models import (
    AuditStatus,
    ContentClass,
    CoverageReport,
    RetentionRule,
    RetentionTableVersion,
    RuleKind,
)
from retention.versions import versions_sign_late, versions_verified

logger = logging.getLogger(__name__)

SAMPLE = 20
FINDINGS = ("gaps", "unaccounted_deletions", "kept_past_mandate", "erasure_overdue", "unledgered")
COUNTS = ("ledgered", "at_rest", "live", "hidden", "redacted", "mandated", "held", "deleted_with_tombstone",
          *FINDINGS)
# A report older than this means the audit stopped running: the banner says so.
AUDIT_EXPECTED_EVERY = timedelta(hours=48)


@dataclass(frozen=True)
class Mandate:
    content_class_id: int
    days: int | None
    pact_days: int | None
    authority: str


class _Classes:
    """Which content classes a signed rule names: the one with its `content_class_id` (versions made before
    they carried it have none) and the one with its name, in the version's tenant. Both, should they differ
    (a class renamed behind the database's back): the safe side."""

    def __init__(self):
        rows = ContentClass.objects.values_list("pk", "tenant_id", "name")
        self.by_name = {(t, n): pk for pk, t, n in rows}
        self.tenant_of = {pk: t for pk, t, _n in rows}

    def of(self, tenant_id: int, rule: dict) -> set[int]:
        found = set()
        class_id = rule.get("content_class_id")
        if isinstance(class_id, int) and self.tenant_of.get(class_id) == tenant_id:
            found.add(class_id)
        named = self.by_name.get((tenant_id, rule.get("content_class")))
        if named is not None:
            found.add(named)
        return found


def mandates_current(trusted: dict[int, list[RetentionTableVersion]] | None = None,
                     ) -> tuple[dict[int, Mandate], list[dict]]:
    """Per content class, the longest active rule (and the longest pact), from the latest trusted version of each
    tenant's retention table (signed, chain intact: retention.versions) and from the active rule rows, the longer
    of the two; and, as anomalies, the versions not trusted and the differences between the two.
    `trusted`: `versions_verified()`'s, when the caller has them (their anomalies are then the caller's)."""
    anomalies = []
    if trusted is None:
        trusted, anomalies = versions_verified()
    classes = _Classes()
    from_version: dict[int, list[tuple[int, str, str]]] = {}
    for tenant_id, versions in trusted.items():
        for rule in versions[-1].rules if versions else []:
            for class_id in classes.of(tenant_id, rule):
                from_version.setdefault(class_id, []).append(
                    (int(rule["duration_days"]), rule.get("kind", ""), rule.get("authority", "")))
    from_rows: dict[int, list[tuple[int, str, str]]] = {}
    for class_id, days, kind, authority in RetentionRule.objects.filter(retired_at__isnull=True).values_list(
            "content_class_id", "duration_days", "kind", "authority"):
        from_rows.setdefault(class_id, []).append((days, kind, authority))
    mandates = {}
    for class_id in set(from_version) | set(from_rows):
        a, b = sorted(from_version.get(class_id, [])), sorted(from_rows.get(class_id, []))
        if a != b:
            anomalies.append({"finding": "rule_table_drift", "content_class_id": class_id,
                              "detail": "the active rules differ from the retention table's latest trusted "
                                        "version; the audit applies the longer of the two",
                              "version": a, "rules": b})
        rules = a + b
        longest = max(rules)
        pacts = [days for days, kind, _ in rules if kind == RuleKind.PACT]
        mandates[class_id] = Mandate(class_id, longest[0], max(pacts) if pacts else None, longest[2])
    return mandates, anomalies


class _Dialect:
    """The few things PostgreSQL and SQLite write differently. Times compare as timestamps on PostgreSQL
    and as Julian day numbers on SQLite (its datetimes are text)."""

    def __init__(self, vendor: str):
        if vendor not in ("postgresql", "sqlite"):
            raise NotImplementedError(f"the coverage audit runs on PostgreSQL and SQLite, not {vendor}")
        self.pg = vendor == "postgresql"

    def t(self, column: str) -> str:
        return column if self.pg else f"julianday({column})"

    def plus_days(self, time_sql: str, days_sql: str) -> str:
        return f"{time_sql} + make_interval(days => {days_sql})" if self.pg else f"{time_sql} + {days_sql}"

    def time(self, value: datetime):
        return value if self.pg else value.timestamp() / 86400 + 2440587.5

    def duration(self, value: timedelta):
        return value if self.pg else value.total_seconds() / 86400

    @property
    def false(self) -> str:
        return "false" if self.pg else "0"

    def values(self, mandates: dict[int, Mandate]) -> tuple[str, list]:
        cast = ("::bigint", "::integer", "::integer") if self.pg else ("", "", "")
        rows = [(m.content_class_id, m.days, m.pact_days) for m in mandates.values()] or [(None, None, None)]
        sql = ", ".join(f"(%s{cast[0]}, %s{cast[1]}, %s{cast[2]})" for _ in rows)
        return sql, [v for row in rows for v in row]

    @property
    def index_insert(self) -> str:
        """Index the deletions listed by the tombstones logged in (from, to] (leaf positions)."""
        if self.pg:
            return ("INSERT INTO retention_tombstoneddeletion (tombstone_id, leaf_index, tenant_id, record_id) "
                    "SELECT t.id, t.leaf_index, t.tenant_id, (r.value ->> 'record_id')::bigint "
                    "FROM tombstones_tombstone t CROSS JOIN LATERAL jsonb_array_elements(convert_from(t.payload, "
                    "'UTF8')::jsonb -> 'execution' -> 'records') r "
                    "WHERE t.leaf_index > %s AND t.leaf_index <= %s AND r.value ->> 'outcome' = 'deleted'")
        return ("INSERT INTO retention_tombstoneddeletion (tombstone_id, leaf_index, tenant_id, record_id) "
                "SELECT t.id, t.leaf_index, t.tenant_id, CAST(json_extract(r.value, '$.record_id') AS INTEGER) "
                "FROM tombstones_tombstone t, json_each(CAST(t.payload AS TEXT), '$.execution.records') r "
                "WHERE t.leaf_index > %s AND t.leaf_index <= %s AND json_extract(r.value, '$.outcome') = 'deleted'")


def _rows_sql(d: _Dialect, mandates: dict[int, Mandate]) -> tuple[str, list]:
    """The CTEs that classify every record ever written or at rest; `rows` has one row per record id."""
    values, params = d.values(mandates)
    f = d.false
    sql = f"""
WITH m(content_class_id, days, pact_days) AS (VALUES {values}),
ledger AS (
    -- The latest write of each record id (an id written twice: a raw re-insert after a delete).
    SELECT * FROM retention_writeledgerentry l WHERE NOT EXISTS (
        SELECT 1 FROM retention_writeledgerentry later WHERE later.record_id = l.record_id AND later.id > l.id)
),
active AS (SELECT id, subject_id, content_class_id, scope_id FROM retention_legalhold WHERE released_at IS NULL),
-- A hold on a subject covers the person: the subjects merged into the same one too (memory migration 0011:
-- one person, references spelled two ways), as the ledger keeps the subject id each record was written with.
held_person AS (
    SELECT coalesce(s.merged_into_id, s.id) AS id FROM active h JOIN memory_subject s ON s.id = h.subject_id
),
held_subject AS (
    SELECT id FROM held_person UNION SELECT s.id FROM memory_subject s JOIN held_person p ON s.merged_into_id = p.id
),
held AS (
    SELECT l.record_id FROM ledger l JOIN held_subject hs ON hs.id = l.subject_id
    UNION SELECT l.record_id FROM ledger l JOIN active h ON h.content_class_id = l.content_class_id
    UNION SELECT l.record_id FROM ledger l
          JOIN memory_scopeclosure c ON c.descendant_id = l.scope_id JOIN active h ON h.scope_id = c.ancestor_id
    UNION SELECT hr.record_id FROM retention_holdrecord hr JOIN active h ON h.id = hr.hold_id
),
tomb AS (SELECT DISTINCT record_id FROM retention_tombstoneddeletion),
restricted AS (
    SELECT i.object_id AS record_id FROM dsr_requestitem i JOIN dsr_subjectrequest q ON q.id = i.request_id
    WHERE i.kind = 'record' AND i.decision = 'hide' AND i.outcome = 'hidden' AND q.type = 'restriction'
),
base AS (
    SELECT coalesce(l.tenant_id, r.tenant_id) AS tenant_id,
           coalesce(l.content_class_id, r.content_class_id) AS class_id,
           coalesce(l.record_id, r.id) AS record_id,
           l.record_id AS ledger_id, r.id AS rest_id,
           {d.t('r.forgotten_at')} AS forgotten_at, {d.t('r.redacted_at')} AS redacted_at,
           coalesce(r.content <> '', {f}) AS has_content,
           {d.plus_days(d.t('coalesce(l.created_at, r.created_at)'), 'm.days')} AS mandate_end,
           m.pact_days,
           hd.record_id IS NOT NULL AS held,
           tb.record_id IS NOT NULL AS tombstoned,
           rs.record_id IS NOT NULL AS restricted
    FROM ledger l
    FULL OUTER JOIN memory_record r ON r.id = l.record_id
    LEFT JOIN m ON m.content_class_id = coalesce(l.content_class_id, r.content_class_id)
    LEFT JOIN held hd ON hd.record_id = coalesce(l.record_id, r.id)
    LEFT JOIN tomb tb ON tb.record_id = l.record_id
    LEFT JOIN restricted rs ON rs.record_id = r.id
),
flagged AS (
    SELECT *, held OR coalesce(mandate_end > %s, {f}) AS mandated,
           NOT held AND coalesce(mandate_end <= %s, true) AS past_mandates
    FROM base
),
rows AS (
    SELECT *,
        ledger_id IS NOT NULL AND rest_id IS NULL AND mandated AND NOT tombstoned AS gaps,
        ledger_id IS NOT NULL AND rest_id IS NULL AND NOT mandated AND NOT tombstoned AS unaccounted_deletions,
        rest_id IS NOT NULL AND past_mandates AND (
            (forgotten_at IS NULL AND redacted_at IS NULL AND pact_days IS NOT NULL)
            OR (redacted_at IS NOT NULL AND redacted_at <= %s AND NOT restricted)) AS kept_past_mandate,
        rest_id IS NOT NULL AND forgotten_at IS NOT NULL AND has_content AND NOT held AND NOT restricted
            AND (CASE WHEN mandate_end > forgotten_at THEN mandate_end ELSE forgotten_at + %s END) <= %s
            AS erasure_overdue,
        ledger_id IS NULL AS unledgered
    FROM flagged
)
"""
    return sql, params


def _params(d: _Dialect, now: datetime, tolerance: timedelta, grace: timedelta) -> list:
    late = d.time(now - tolerance)
    # mandated (now), past_mandates (late), kept_past_mandate's redacted_at (late), grace, erasure_overdue (late)
    return [d.time(now), late, late, d.duration(grace), late]


def _count_sql(prefix: str) -> str:
    counts = ",\n".join([
        "count(ledger_id) AS ledgered", "count(rest_id) AS at_rest",
        "count(*) FILTER (WHERE rest_id IS NOT NULL AND forgotten_at IS NULL AND redacted_at IS NULL) AS live",
        "count(*) FILTER (WHERE rest_id IS NOT NULL AND forgotten_at IS NOT NULL AND has_content) AS hidden",
        "count(*) FILTER (WHERE rest_id IS NOT NULL AND redacted_at IS NOT NULL) AS redacted",
        "count(*) FILTER (WHERE ledger_id IS NOT NULL AND mandated) AS mandated",
        "count(*) FILTER (WHERE held) AS held",
        "count(*) FILTER (WHERE ledger_id IS NOT NULL AND rest_id IS NULL AND tombstoned) AS deleted_with_tombstone",
        *[f"count(*) FILTER (WHERE {name}) AS {name}" for name in FINDINGS],
    ])
    return f"{prefix}\nSELECT tenant_id, class_id,\n{counts}\nFROM rows GROUP BY tenant_id, class_id ORDER BY tenant_id, class_id"


def _sample_sql(prefix: str) -> str:
    cases = " ".join(f"WHEN {name} THEN '{name}'" for name in FINDINGS)
    return f"""{prefix},
found AS (SELECT tenant_id, class_id, record_id, CASE {cases} END AS finding FROM rows),
numbered AS (SELECT *, row_number() OVER (PARTITION BY tenant_id, class_id, finding ORDER BY record_id) AS n
             FROM found WHERE finding IS NOT NULL)
SELECT tenant_id, class_id, finding, record_id FROM numbered WHERE n <= {SAMPLE} ORDER BY tenant_id, class_id, finding, record_id
"""


def _excusing_sql(prefix: str) -> str:
    """Mandated records absent from storage that a tombstone lists as deleted, with the ledger's copy of what
    decides their mandate and the tombstone's id (a rule or hold that came after the deletion, a legal
    override: the review in `_excuses_review` tells those from deletions made while mandated)."""
    return (f"{prefix}, excused AS (SELECT record_id FROM rows WHERE ledger_id IS NOT NULL AND rest_id IS NULL "
            "AND mandated AND tombstoned), listed AS (SELECT DISTINCT record_id, tombstone_id FROM "
            "retention_tombstoneddeletion) "
            "SELECT l.record_id, l.tenant_id, l.content_class_id, l.subject_id, l.scope_id, l.created_at, x.tombstone_id "
            "FROM excused e JOIN ledger l ON l.record_id = e.record_id "
            f"JOIN listed x ON x.record_id = e.record_id ORDER BY l.record_id LIMIT {MAX_EXCUSES_REVIEWED}")


def tombstones_index_update(*, report: CoverageReport | None = None) -> int:
    """Index the deletions of the tombstones logged since the last audit (each statement is parsed once);
    the new position is kept on `report`, in the same transaction. Returns how many deletions were indexed."""
    from django.db import transaction
    from django.db.models import Max

    from tombstones.models import Tombstone

    d = _Dialect(connection.vendor)
    done = CoverageReport.objects.aggregate(m=Max("tombstones_indexed_to"))["m"]
    done = -1 if done is None else done
    with transaction.atomic():
        upto = Tombstone.objects.aggregate(m=Max("leaf_index"))["m"]
        if upto is None or upto <= done:
            indexed = 0
        else:
            with connection.cursor() as cursor:
                cursor.execute(d.index_insert, [done, upto])
                indexed = cursor.rowcount
            done = upto
        if report is not None and done >= 0:
            CoverageReport.objects.filter(pk=report.pk).update(tombstones_indexed_to=done)
            report.tombstones_indexed_to = done
    return indexed


# Mandated records excused by a tombstone reviewed one by one (they are rare: a rule extended or a hold placed
# after the deletion, a legal override); beyond this many, the rest count as gaps (the safe side).
MAX_EXCUSES_REVIEWED = 10_000


def _as_time(value) -> datetime:
    if isinstance(value, datetime):
        return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
    parsed = parse_datetime(str(value))
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


def _excuses_review(rows: list[tuple], anomalies: list[dict],
                    trusted: dict[int, list[RetentionTableVersion]]) -> dict[tuple, list[int]]:
    """For each mandated record a tombstone says was deleted: a gap if the tombstone does not verify, or if
    the record was mandated when the tombstone was issued (by the latest trusted version of the retention table
    at that time, or a hold active then), unless that tombstone is a legal override. Returns the gaps by
    (tenant, class)."""
    import json

    from memory.models import ScopeClosure, Subject
    from retention.models import HoldRecord, LegalHold
    from tombstones.models import Tombstone
    from tombstones.selectors import envelope_of
    from tombstones.services import checkpoint_sign, tombstone_verify

    rows = [(*row[:6], uuid.UUID(str(row[6]))) for row in rows]
    tombstones = Tombstone.objects.select_related("key").in_bulk({row[6] for row in rows})
    # A checkpoint that covers them first: the first verification in a young log would otherwise meet a
    # checkpoint key that the published key set read before it did not hold yet.
    checkpoint_sign()
    genuine = {tid: tombstone_verify(document=envelope_of(t)).genuine for tid, t in tombstones.items()}
    classes = _Classes()
    holds = list(LegalHold.objects.all())
    # One person per subject: a merged subject is the one it was merged into (see held_subject in _rows_sql).
    merged = dict(Subject.objects.filter(merged_into__isnull=False).values_list("pk", "merged_into_id"))
    hold_listed = set(HoldRecord.objects.values_list("hold_id", "record_id"))
    ancestors: dict[int, set[int]] = {}
    for ancestor, descendant in ScopeClosure.objects.filter(descendant_id__in={r[4] for r in rows}).values_list(
            "ancestor_id", "descendant_id"):
        ancestors.setdefault(descendant, set()).add(ancestor)
    gaps: dict[tuple, list[int]] = {}
    for record_id, tenant_id, class_id, subject_id, scope_id, created_at, tombstone_id in rows:
        tombstone = tombstones[tombstone_id]
        statement = json.loads(bytes(tombstone.payload))
        at, created_at = tombstone.created_at, _as_time(created_at)
        in_statement = any(r.get("record_id") == str(record_id) and r.get("outcome") == "deleted"
                           for r in (statement.get("execution") or {}).get("records", []))
        if not genuine[tombstone_id]:
            finding = "tombstone_not_genuine"
        elif not in_statement:
            finding = "tombstone_index_mismatch"  # the index says so, the signed statement does not
        elif (statement.get("request") or {}).get("path") == "legal_override":
            continue  # legal decided to erase despite the rule (dsr.services.conflicts): on record in its tombstone
        else:
            in_force = [v for v in trusted.get(tenant_id, []) if v.created_at <= at]
            days = [int(r["duration_days"]) for r in (in_force[-1].rules if in_force else [])
                    if class_id in classes.of(tenant_id, r)]
            by_rule = bool(days) and created_at + timedelta(days=max(days)) > at
            by_hold = any(h.tenant_id == tenant_id and h.placed_at <= at and (h.released_at is None or h.released_at > at)
                          and (subject_id is not None and merged.get(h.subject_id, h.subject_id) == merged.get(
                               subject_id, subject_id) or h.content_class_id == class_id
                               or h.scope_id in ancestors.get(scope_id, ()) or (h.pk, record_id) in hold_listed)
                          for h in holds)
            if not (by_rule or by_hold):
                continue  # the mandate came after the deletion: the tombstone accounts for it
            finding = "deleted_while_mandated"
        gaps.setdefault((tenant_id, class_id), []).append(record_id)
        if len([a for a in anomalies if a["finding"] == finding]) < SAMPLE:
            anomalies.append({"finding": finding, "record_id": record_id, "tombstone_id": str(tombstone_id)})
    return gaps


def coverage_audit(*, actor: str = "system", now: datetime | None = None) -> CoverageReport:
    """Run the audit and keep its report. A gap is logged at ERROR level (and shows in the admin banner)."""
    started = time.perf_counter()
    now = now or timezone.now()
    report = CoverageReport.objects.create(started_at=now, actor=actor, status=AuditStatus.FAILED)
    try:
        _audit(report, now=now)
    except Exception as exc:
        CoverageReport.objects.filter(pk=report.pk).update(
            status=AuditStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:5000], finished_at=timezone.now(),
            seconds=time.perf_counter() - started)
        logger.exception("coverage audit %s failed", report.pk)
        raise
    report.seconds = time.perf_counter() - started
    report.finished_at = timezone.now()
    report.save(update_fields=["seconds", "finished_at"])
    _gap_alerts(report)
    if report.gaps:
        logger.error("coverage audit %s: %s mandated records are missing from storage (coverage gap); %s",
                     report.pk, report.gaps, [c for c in report.classes if c["gaps"]][:10])
    elif report.status == AuditStatus.FINDINGS:
        logger.warning("coverage audit %s: %s", report.pk, report.totals)
    return report


def _gap_alerts(report: CoverageReport) -> None:
    """One `coverage_gap` alert per tenant and content class with gaps (a repeat in the next audit only counts);
    the classes this audit found no gap in have theirs resolved."""
    from django.urls import reverse

    from alerts.models import AlertKind
    from alerts.services import alert_raise, alerts_resolve_except

    link = reverse("admin:retention_coveragereport_change", args=[report.pk])
    keep = set()
    for row in report.classes:
        if not row["gaps"]:
            continue
        cause = f"class:{row['content_class_id']}"
        keep.add((row["tenant_id"], cause))
        alert_raise(kind=AlertKind.COVERAGE_GAP, cause=cause, tenant_id=row["tenant_id"], link=link,
                    title=f"Coverage gap: {row['gaps']} mandated {row['content_class']} records missing",
                    detail=(f"Coverage audit {report.pk}: {row['gaps']} records of content class "
                            f"{row['content_class']!r} that a retention rule ({row['authority'] or 'a legal hold'}) "
                            "requires are not at rest, and no verified tombstone accounts for them."))
    alerts_resolve_except(kind=AlertKind.COVERAGE_GAP, keep=keep,
                          resolution=f"coverage audit {report.pk} found no gap in this class")


def _audit(report: CoverageReport, *, now: datetime) -> None:
    d = _Dialect(connection.vendor)
    tombstones_index_update(report=report)
    from tombstones.errors import TombstoneError

    try:
        versions_sign_late()
    except TombstoneError as exc:  # no key to sign with: they stay unsigned, and are reported as such
        logger.warning("coverage audit %s: the retention table's old versions cannot be signed (%s)", report.pk, exc)
    trusted, anomalies = versions_verified()
    mandates, drift = mandates_current(trusted)
    anomalies += drift
    tolerance = timedelta(hours=settings.LEDGER_AUDIT_TOLERANCE_HOURS)
    grace = timedelta(days=settings.LEDGER_COMPACTION_GRACE_DAYS)
    prefix, params = _rows_sql(d, mandates)
    params = params + _params(d, now, tolerance, grace)
    with connection.cursor() as cursor:
        cursor.execute(_count_sql(prefix), params)
        columns = [c[0] for c in cursor.description]
        rows = [dict(zip(columns, row)) for row in cursor.fetchall()]
        samples: dict[tuple, dict[str, list[int]]] = {}
        if any(row[name] for row in rows for name in FINDINGS):
            cursor.execute(_sample_sql(prefix), params)
            for tenant_id, class_id, finding, record_id in cursor.fetchall():
                samples.setdefault((tenant_id, class_id), {}).setdefault(finding, []).append(record_id)
        excused_rows = []
        if any(row["deleted_with_tombstone"] and row["mandated"] for row in rows):
            cursor.execute(_excusing_sql(prefix), params)
            excused_rows = cursor.fetchall()
    late_gaps = _excuses_review(excused_rows, anomalies, trusted) if excused_rows else {}
    for row in rows:
        extra = late_gaps.get((row["tenant_id"], row["class_id"]), [])
        if extra:
            row["gaps"] += len(extra)
            found = samples.setdefault((row["tenant_id"], row["class_id"]), {}).setdefault("gaps", [])
            found.extend(extra[:max(0, SAMPLE - len(found))])
    names = dict(ContentClass.objects.values_list("pk", "name"))
    from memory.models import Tenant

    tenants = dict(Tenant.objects.values_list("pk", "name"))
    classes = []
    for row in rows:
        mandate = mandates.get(row["class_id"])
        classes.append({
            "tenant_id": row["tenant_id"], "tenant": tenants.get(row["tenant_id"]),
            "content_class_id": row["class_id"], "content_class": names.get(row["class_id"]),
            "mandate_days": mandate.days if mandate else None,
            "pact_days": mandate.pact_days if mandate else None,
            "authority": mandate.authority if mandate else None,
            **{name: int(row[name]) for name in COUNTS},
            "samples": samples.get((row["tenant_id"], row["class_id"]), {}),
        })
    totals = {name: sum(c[name] for c in classes) for name in COUNTS}
    status = (AuditStatus.GAPS if totals["gaps"] else
              AuditStatus.FINDINGS if any(totals[n] for n in FINDINGS) or anomalies else AuditStatus.CLEAN)
    report.status, report.totals, report.classes, report.anomalies = status, totals, classes, anomalies
    report.gaps, report.kept_past_mandate = totals["gaps"], totals["kept_past_mandate"]
    report.erasure_overdue = totals["erasure_overdue"]
    report.save(update_fields=["status", "totals", "classes", "anomalies", "gaps", "kept_past_mandate",
                               "erasure_overdue"])


def audit_alerts() -> list[dict]:
    """What the admin banner shows: the latest report's gaps (error) or findings (warning), a failed audit,
    or an audit that stopped running. Each: {"level", "message", "report_id"}."""
    latest = CoverageReport.objects.filter(finished_at__isnull=False).order_by("-started_at").first()
    if latest is None:
        return []
    alerts = []
    when = latest.started_at.strftime("%Y-%m-%d %H:%M UTC")
    if latest.status == AuditStatus.GAPS:
        alerts.append({"level": "error", "report_id": latest.pk,
                       "message": f"Coverage audit of {when}: {latest.gaps} records that a retention rule or a "
                                  f"legal hold requires are missing from storage, with no tombstone for them."})
    elif latest.status == AuditStatus.FAILED:
        alerts.append({"level": "error", "report_id": latest.pk,
                       "message": f"The coverage audit of {when} failed: {latest.error[:200]}"})
    elif latest.status == AuditStatus.FINDINGS:
        t = latest.totals
        alerts.append({"level": "warning", "report_id": latest.pk,
                       "message": f"Coverage audit of {when}: {t.get('kept_past_mandate', 0)} records kept past "
                                  f"their time, {t.get('erasure_overdue', 0)} erasures overdue, "
                                  f"{t.get('unaccounted_deletions', 0)} deletions without a tombstone, "
                                  f"{t.get('unledgered', 0)} records the write ledger never saw."})
    if latest.started_at < timezone.now() - AUDIT_EXPECTED_EVERY:
        alerts.append({"level": "warning", "report_id": latest.pk,
                       "message": f"The coverage audit has not run since {when}."})
    return alerts
