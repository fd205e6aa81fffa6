"""Legal deadlines of subject requests: pure functions of the receipt time and the regulation.

How each regulation is read here:

**Dates are UTC calendar dates.** A request is received at an aware instant; the day it was received is
that instant's date in UTC, and due dates are UTC dates. One zone for every tenant keeps the overdue
queue one indexed comparison. A subject far from UTC can see their local receipt day differ by one from
ours; `receipt_date` takes a `tz` for a caller who must count in the subject's zone.

**GDPR, Art. 12(3)**: "within one month of receipt of the request". Periods are counted as Regulation
(EEC, Euratom) No 1182/71 says, which the EDPB and the ICO follow:
- the day of receipt does not count (Art. 3(1)); one month later is the same day-of-month in the next
  month, or that month's last day when it has no such day (Art. 3(2)(c)): 31 January gives 28 February
  (29 February in a leap year), 31 March gives 30 April;
- a period that ends on a Saturday or a Sunday ends on the next working day (Art. 3(4)).
  **No public-holiday calendar is applied**: holidays differ per member state and only ever lengthen a
  period, so ignoring them gives a date that is never later than the law's (the safe side).
- **Extension**: once, "by two further months where necessary", and the subject must be told, with the
  reasons, "within one month of receipt". The further two months run on from the end of the first month,
  taken *before* the weekend move (Art. 3(4) moves when a period ends; it does not lengthen the next
  one), with the same month-end rule, and the result gets the same weekend move. So 31 January gives
  28 February, then 28 April; never later than receipt + 3 months (28 April, not 30 April), the safe side.

**CCPA**, Cal. Civ. Code §1798.130(a)(2) and 11 CCR §7021(b): 45 *calendar* days from the day the request
is received, extendable once by 45 more (90 calendar days in all) with notice and the reason given to the
consumer within the first 45 days. Days are counted excluding the day of receipt (Cal. Code Civ. Proc.
§12). **No weekend move**: the regulation counts calendar days; a weekend move under Code Civ. Proc. §12a
could only lengthen the period, so not applying it errs on the safe side.

**Other** regulations: a configurable number of calendar days (`settings.LEDGER_DSR_OTHER_DAYS`,
default 30, passed in as `other_days`), extendable once by the same number again, with notice within the
first period; no weekend move.

**When an extension may be noticed**: the law allows the notice up to the end of the first period; we
require it strictly *before* the original due date (UTC). That keeps at least a day of margin for a
subject in any time zone, and the notice is sent when the extension is recorded.
"""
from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from dsr import errors

DEFAULT_OTHER_DAYS = 30

GDPR, CCPA, OTHER = "gdpr", "ccpa", "other"


@dataclass(frozen=True)
class Period:
    """How long a regulation gives, and what one extension adds."""

    months: int = 0
    days: int = 0
    extension_months: int = 0
    extension_days: int = 0
    working_days_only: bool = False  # move an end on Saturday/Sunday to the next Monday


def period_for(regulation: str, *, other_days: int = DEFAULT_OTHER_DAYS) -> Period:
    if regulation == GDPR:
        return Period(months=1, extension_months=2, working_days_only=True)
    if regulation == CCPA:
        return Period(days=45, extension_days=45)
    if regulation == OTHER:
        if not isinstance(other_days, int) or isinstance(other_days, bool) or not 1 <= other_days <= 366:
            raise ValueError("other_days must be an integer from 1 to 366.")
        return Period(days=other_days, extension_days=other_days)
    raise errors.invalid("invalid_regulation", f"No deadline rule for regulation {regulation!r}.",
                         regulation=str(regulation)[:20])


def add_months(day: date, months: int) -> date:
    """The same day-of-month `months` later, or that month's last day when it has no such day."""
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def next_working_day(day: date) -> date:
    """`day` itself from Monday to Friday; the Monday after a Saturday or a Sunday (no holiday calendar)."""
    weekday = day.weekday()
    return day + timedelta(days=7 - weekday) if weekday >= 5 else day


def receipt_date(received_at: datetime, *, tz: tzinfo = UTC) -> date:
    """The calendar day (in `tz`, UTC by default) on which a request received at `received_at` arrived."""
    if not isinstance(received_at, datetime) or received_at.utcoffset() is None:
        raise ValueError("received_at must be an aware datetime.")
    return received_at.astimezone(tz).date()


def _end(start: date, *, months: int, days: int) -> date:
    return add_months(start, months) + timedelta(days=days)


def _unrolled_due(received_at: datetime, period: Period) -> date:
    return _end(receipt_date(received_at), months=period.months, days=period.days)


def _finish(day: date, period: Period) -> date:
    return next_working_day(day) if period.working_days_only else day


def due_date(*, regulation: str, received_at: datetime, other_days: int = DEFAULT_OTHER_DAYS) -> date:
    """The last day to answer a request received at `received_at` (a UTC date; see the module notes)."""
    period = period_for(regulation, other_days=other_days)
    return _finish(_unrolled_due(received_at, period), period)


def extended_due_date(*, regulation: str, received_at: datetime, other_days: int = DEFAULT_OTHER_DAYS) -> date:
    """The last day to answer once the one extension is taken: counted on from the first period's end
    before its weekend move, then moved off a weekend itself (GDPR)."""
    period = period_for(regulation, other_days=other_days)
    first = _unrolled_due(received_at, period)
    return _finish(_end(first, months=period.extension_months, days=period.extension_days), period)


def extension_check(*, due_date: date, already_extended: bool, at: datetime) -> None:
    """Raise unless an extension noticed to the subject at `at` is allowed: only one, and only while the
    first period runs (strictly before its due date, in UTC)."""
    if already_extended:
        raise errors.conflict("already_extended", "This request was extended already; the law allows one "
                              "extension.")
    if receipt_date(at) >= due_date:
        raise errors.conflict("extension_too_late", "An extension must be told to the subject within the first "
                              "period, before the original due date.", due_date=due_date.isoformat())
