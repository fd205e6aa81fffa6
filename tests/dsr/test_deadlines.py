"""Legal deadlines (dsr/deadlines.py): GDPR Art. 12(3) month arithmetic with month ends, leap years and the
weekend move; CCPA's 45 calendar days; one extension, noticed within the first period."""
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.errors import ApplicationError
from dsr.deadlines import add_months, due_date, extended_due_date, extension_check

NO_DB = settings(database=None, max_examples=500, deadline=None)


def at(day: str, time: str = "10:00", tz=UTC) -> datetime:
    return datetime.fromisoformat(f"{day}T{time}").replace(tzinfo=tz)


def gdpr(day: str, **kw) -> date:
    return due_date(regulation="gdpr", received_at=at(day, **kw))


def gdpr_extended(day: str) -> date:
    return extended_due_date(regulation="gdpr", received_at=at(day))


@pytest.mark.parametrize("received,due", [
    ("2025-01-31", "2025-02-28"),  # non-leap year: the last day of February (a Friday)
    ("2028-01-31", "2028-02-29"),  # leap year: 29 February (a Tuesday)
    ("2025-01-29", "2025-02-28"),  # no 29 February in 2025
    ("2028-01-30", "2028-02-29"),
    ("2026-03-31", "2026-04-30"),  # 31 -> a 30-day month
    ("2026-05-31", "2026-06-30"),
    ("2026-08-31", "2026-09-30"),
    ("2026-10-31", "2026-11-30"),
    ("2026-11-30", "2026-12-30"),  # 30 -> a 31-day month: same day, not the month end
    ("2026-12-31", "2027-02-01"),  # across the year: 31 January 2027 is a Sunday
    ("2028-02-29", "2028-03-29"),  # received on a leap day
    ("2027-02-28", "2027-03-29"),  # 28 March 2027 is a Sunday
    ("2026-02-13", "2026-03-13"),
])
def test_gdpr_due_date_is_one_month_with_the_month_end_rule(received, due):
    assert gdpr(received) == date.fromisoformat(due)


def test_gdpr_due_date_on_a_saturday_moves_to_monday():
    # 31 January 2026 + one month = 28 February 2026, a Saturday.
    assert date(2026, 2, 28).weekday() == 5
    assert gdpr("2026-01-31") == date(2026, 3, 2)


def test_gdpr_due_date_on_a_sunday_moves_to_monday():
    # 31 January 2027 + one month = 28 February 2027, a Sunday.
    assert date(2027, 2, 28).weekday() == 6
    assert gdpr("2027-01-31") == date(2027, 3, 1)
    # 31 March 2028 + one month = 30 April 2028, a Sunday.
    assert gdpr("2028-03-31") == date(2028, 5, 1)


def test_gdpr_receipt_day_is_the_utc_day():
    # 23:30 in New York on 31 January is 04:30 UTC on 1 February: one month from 1 February.
    new_york = timezone(timedelta(hours=-5))
    assert gdpr("2025-01-31", time="23:30", tz=new_york) == date(2025, 3, 3)  # 1 March 2025 is a Saturday
    # 00:30 in Berlin on 1 February is 23:30 UTC on 31 January.
    berlin = timezone(timedelta(hours=1))
    assert gdpr("2025-02-01", time="00:30", tz=berlin) == date(2025, 2, 28)


@pytest.mark.parametrize("received,extended", [
    # From the first month's end *before* the weekend move, two months on, the same month-end rule:
    ("2025-01-31", "2025-04-28"),  # 28 Feb -> 28 Apr (not 30 Apr: never later than receipt + 3 months)
    ("2026-01-31", "2026-04-28"),  # 28 Feb 2026 is a Saturday; counted from it, not from Monday 2 March
    ("2028-01-31", "2028-05-01"),  # 29 Feb 2028 -> 29 Apr 2028, a Saturday -> Monday 1 May
    ("2028-02-29", "2028-05-29"),  # leap-day receipt: 29 Mar -> 29 May 2028 (a Monday)
    ("2026-11-30", "2027-03-01"),  # 30 Dec -> 28 Feb 2027, a Sunday -> Monday 1 March
    ("2026-03-31", "2026-06-30"),  # 30 Apr -> 30 Jun
])
def test_gdpr_extension_adds_two_months_to_the_unmoved_first_month(received, extended):
    assert gdpr_extended(received) == date.fromisoformat(extended)


@pytest.mark.parametrize("received,due,extended", [
    ("2026-01-31", "2026-03-17", "2026-05-01"),
    ("2028-02-29", "2028-04-14", "2028-05-29"),
    ("2025-12-31", "2026-02-14", "2026-03-31"),
])
def test_ccpa_is_45_calendar_days_extendable_by_45(received, due, extended):
    assert due_date(regulation="ccpa", received_at=at(received)) == date.fromisoformat(due)
    assert extended_due_date(regulation="ccpa", received_at=at(received)) == date.fromisoformat(extended)


def test_ccpa_due_date_is_not_moved_off_a_weekend():
    # 4 February 2026 + 45 days = Saturday 21 March 2026: calendar days, the earlier date stands.
    due = due_date(regulation="ccpa", received_at=at("2026-02-04"))
    assert due == date(2026, 3, 21) and due.weekday() == 5


def test_other_regulation_uses_the_configured_days():
    assert due_date(regulation="other", received_at=at("2026-01-31")) == date(2026, 3, 2)  # 30 days
    assert due_date(regulation="other", received_at=at("2026-01-31"), other_days=15) == date(2026, 2, 15)
    assert extended_due_date(regulation="other", received_at=at("2026-01-31"), other_days=15) == date(2026, 3, 2)
    with pytest.raises(ValueError):
        due_date(regulation="other", received_at=at("2026-01-31"), other_days=0)


def test_unknown_regulation_and_naive_receipt_are_refused():
    with pytest.raises(ApplicationError) as refused:
        due_date(regulation="lgpd", received_at=at("2026-01-31"))
    assert refused.value.code == "invalid_regulation"
    with pytest.raises(ValueError):
        due_date(regulation="gdpr", received_at=datetime(2026, 1, 31, 10, 0))


def test_extension_within_the_first_period_is_allowed():
    extension_check(due_date=date(2026, 3, 2), already_extended=False, at=at("2026-03-01", "23:59"))


@pytest.mark.parametrize("notice_day", ["2026-03-02", "2026-03-03", "2026-06-01"])
def test_extension_on_or_after_the_original_due_date_is_refused(notice_day):
    with pytest.raises(ApplicationError) as refused:
        extension_check(due_date=date(2026, 3, 2), already_extended=False, at=at(notice_day, "00:01"))
    assert (refused.value.code, refused.value.status_code) == ("extension_too_late", 409)


def test_second_extension_is_refused():
    with pytest.raises(ApplicationError) as refused:
        extension_check(due_date=date(2026, 3, 2), already_extended=True, at=at("2026-02-01"))
    assert (refused.value.code, refused.value.status_code) == ("already_extended", 409)


# --- properties ---------------------------------------------------------------------------------------

offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
receipts = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2200, 12, 31), timezones=offsets)


@NO_DB
@given(receipts)
def test_gdpr_due_date_is_after_receipt_on_a_weekday_within_a_month_and_two_days(received_at):
    received = received_at.astimezone(UTC).date()
    due = gdpr_due = due_date(regulation="gdpr", received_at=received_at)
    month = add_months(received, 1)
    assert received < due
    assert due.weekday() < 5
    assert month <= due <= month + timedelta(days=2)  # moved off a weekend at most from Saturday to Monday
    assert (due - received).days <= 31 + 2
    # The unmoved date is the same day-of-month, or the month's last day when there is no such day.
    assert month.day == received.day or (month.day < received.day and (month + timedelta(days=1)).day == 1)
    assert gdpr_due == due_date(regulation="gdpr", received_at=received_at.astimezone(UTC))


@NO_DB
@given(receipts)
def test_gdpr_extended_date_is_a_weekday_two_months_on_and_never_past_three_months(received_at):
    received = received_at.astimezone(UTC).date()
    due = due_date(regulation="gdpr", received_at=received_at)
    extended = extended_due_date(regulation="gdpr", received_at=received_at)
    assert extended.weekday() < 5
    assert due < extended
    assert add_months(received, 1) + timedelta(days=59) <= extended  # two months are at least 59 days
    assert extended <= add_months(received, 3) + timedelta(days=2)


@NO_DB
@given(receipts, receipts)
def test_a_later_receipt_is_never_due_earlier(first, second):
    first, second = sorted([first, second])
    for regulation in ("gdpr", "ccpa", "other"):
        assert due_date(regulation=regulation, received_at=first) <= due_date(regulation=regulation,
                                                                               received_at=second)
        assert extended_due_date(regulation=regulation, received_at=first) <= extended_due_date(
            regulation=regulation, received_at=second)


@NO_DB
@given(receipts)
def test_ccpa_is_exactly_45_then_90_calendar_days(received_at):
    received = received_at.astimezone(UTC).date()
    assert due_date(regulation="ccpa", received_at=received_at) == received + timedelta(days=45)
    assert extended_due_date(regulation="ccpa", received_at=received_at) == received + timedelta(days=90)


@NO_DB
@given(receipts, st.integers(min_value=0, max_value=200))
def test_an_extension_is_allowed_exactly_before_the_original_due_date(received_at, days_later):
    due = due_date(regulation="gdpr", received_at=received_at)
    notice_at = received_at + timedelta(days=days_later)
    allowed = notice_at.astimezone(UTC).date() < due
    try:
        extension_check(due_date=due, already_extended=False, at=notice_at)
    except ApplicationError as refused:
        assert not allowed and refused.code == "extension_too_late"
    else:
        assert allowed


@NO_DB
@given(st.dates(min_value=date(1, 1, 1), max_value=date(9000, 12, 31)), st.integers(min_value=0, max_value=600))
def test_add_months_keeps_the_day_or_takes_the_month_end(day, months):
    later = add_months(day, months)
    assert (later.year * 12 + later.month) - (day.year * 12 + day.month) == months
    assert later.day == day.day or (later.day < day.day and (later + timedelta(days=1)).day == 1)
