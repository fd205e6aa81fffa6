"""What every sweep shares: the claim, the result of one batch, references to the forgets a sweep closes.

A sweep batch is one short transaction: claim up to N rows with `SELECT ... ORDER BY id LIMIT N FOR UPDATE
SKIP LOCKED`, then hand their ids to `records_forget` (the one guarded path) inside the same transaction.
The row locks last until commit, so two workers never take the same rows; `records_forget` decides each
row again (a hold placed meanwhile makes it refuse), and the database trigger is behind both.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from django.db.models import QuerySet

from memory.models import ForgetEvent, Tenant
from memory.services import ForgetResult
from memory.services.forget import GuardRow, guard_fetch, guard_row, guard_values
from memory.services.forget import lock_ended  # noqa: F401  (the sweeps' lock condition is the forget's)

# How many ids a run keeps as examples per finding (in counts and reports): enough to look into, never
# a copy of the table.
SAMPLE = 20


@dataclass
class BatchResult:
    """One batch: whether more remains after it, where the run's pass stands, and what it did."""

    more: bool
    cursor: int | None = None
    first_id: int | None = None
    counts: Counter = field(default_factory=Counter)
    samples: dict[str, list] = field(default_factory=dict)
    forget_event_ids: list[int] = field(default_factory=list)
    tombstone_ids: list[str] = field(default_factory=list)

    def claimed(self, ids: list[int], batch_size: int) -> "BatchResult":
        self.more = len(ids) >= batch_size
        if ids:
            self.first_id, self.cursor = ids[0], ids[-1]
        self.counts["claimed"] += len(ids)
        return self

    def forgot(self, result: ForgetResult) -> None:
        outcomes = result.event.outcomes
        for outcome in ("deleted", "redacted", "hidden"):
            if outcomes.get(outcome):
                self.counts[outcome] += len(outcomes[outcome])
        if outcomes.get("refused"):
            self.counts["refused"] += len(outcomes["refused"])
            self.sample("refused_ids", [r["record_id"] for r in outcomes["refused"]])
        for outcome, ids in result.artifacts.items():
            self.counts[f"derived_{outcome}"] += len(ids)
        self.forget_event_ids.append(result.event.pk)
        if result.tombstone_id:
            self.tombstone_ids.append(result.tombstone_id)

    def sample(self, name: str, values: Iterable) -> None:
        kept = self.samples.setdefault(name, [])
        kept.extend(list(values)[:SAMPLE - len(kept)])


def claim(queryset: QuerySet, *, after: int | None, limit: int, fields: tuple[str, ...]) -> list[tuple]:
    """Lock and return up to `limit` rows of `queryset` past `after`, by id; rows another transaction holds
    are skipped, not waited for. Must run inside the caller's transaction (the locks last until it ends)."""
    return list(_claimable(queryset, after).order_by("pk").values_list(*fields)[:limit])


def _claimable(queryset: QuerySet, after: int | None) -> QuerySet:
    """The rows past `after`, locked as they are read, skipping those another transaction holds."""
    if after is not None:
        queryset = queryset.filter(pk__gt=after)
    return queryset.select_for_update(skip_locked=True, of=("self",))


def claim_rows(queryset: QuerySet, *, after: int | None, limit: int,
               fields: tuple[str, ...]) -> list[tuple[tuple, GuardRow]]:
    """`claim` for records a sweep hands to `records_forget`: per row, the `fields` asked for and what the guard
    reads of it, read by the same locking SELECT, so that the forget need not read the rows again
    (`records_forget(locked=LockedRows(...))`)."""
    query = guard_values(_claimable(queryset, after), *fields)[:limit]  # in id order
    width = len(fields)
    return [(row[:width], guard_row(row[width:])) for row in guard_fetch(query)]


def tenants_of(tenant_ids: Iterable[int]) -> dict[int, Tenant]:
    return Tenant.objects.in_bulk(set(tenant_ids))


def grouped(rows: list[tuple], key: Callable[[tuple], object]) -> list[tuple[object, list[tuple]]]:
    groups: dict[object, list[tuple]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return sorted(groups.items(), key=lambda item: str(item[0]))


def closes_of(record_events: list[tuple[int, int | None]], action: str) -> list[dict]:
    """The deferred items of earlier tombstones that a forget of these records completes:
    `[{"tombstone_id", "handle", "action", "items": ["record:12", ...]}]`, one entry per earlier forget
    (given as (record id, forget event id) pairs; records no forget touched are left out)."""
    by_event: dict[int, list[int]] = defaultdict(list)
    for record_id, event_id in record_events:
        if event_id:
            by_event[event_id].append(record_id)
    # Only the tombstone ids: the events' own outcomes can list every record a bulk forget hid (100,000 ids),
    # and each batch would read and parse them again.
    tombstone_ids = dict(ForgetEvent.objects.filter(pk__in=list(by_event)).values_list("pk", "public_id"))
    return [{"tombstone_id": str(tombstone_ids[event_id]), "handle": str(event_id), "action": action,
             "items": [f"record:{pk}" for pk in sorted(by_event[event_id])]}
            for event_id in sorted(by_event) if event_id in tombstone_ids]


def counts_merge(total: dict, part: dict) -> dict:
    """Add a batch's counts into a run's: numbers add up, lists of examples are kept up to SAMPLE."""
    for key, value in part.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, list, dict)):
            total[key] = value
        elif isinstance(value, (int, float)):
            total[key] = total.get(key, 0) + value
        elif isinstance(value, list):
            total[key] = (total.get(key) or []) + value[:max(0, SAMPLE - len(total.get(key) or []))]
        else:
            total[key] = counts_merge(dict(total.get(key) or {}), value)
    return total


