"""Tests for schedule.py."""

from datetime import date, datetime, timedelta, timezone

from schedule import daily_occurrences, date_range


def test_date_range_empty_when_reversed():
    assert date_range(date(2024, 5, 2), date(2024, 5, 1)) == []


def test_occurrences_start_at_first():
    first = datetime(2024, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=2)))
    assert daily_occurrences(first, date(2024, 5, 3))[0] == first
