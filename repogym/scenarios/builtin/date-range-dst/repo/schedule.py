"""Daily schedules: calendar date ranges and daily reminders at a fixed local time."""

from __future__ import annotations

from datetime import date, datetime, timedelta

SECONDS_PER_DAY = 86400


def date_range(start: date, end: date) -> list[date]:
    """Return every calendar date from ``start`` to ``end``, both included.

    ``date_range(date(2024, 1, 30), date(2024, 2, 1))`` gives 30 Jan, 31 Jan and
    1 Feb. The result is empty when ``end`` is before ``start``.
    """
    return [start + timedelta(days=i) for i in range((end - start).days)]


def daily_occurrences(first: datetime, until: date) -> list[datetime]:
    """Return the occurrences of an event that repeats every day.

    Each occurrence is at the same local wall-clock time as ``first``, in the
    same time zone, on every calendar date from ``first.date()`` up to and
    including ``until``. A reminder at 09:00 stays at 09:00 local time when the
    zone's UTC offset changes (as it does for daylight-saving time).

    Args:
        first: The first occurrence, a timezone-aware datetime.
        until: The last date that gets an occurrence.
    """
    occurrences = []
    timestamp = first.timestamp()
    current = first
    while current.date() < until:
        occurrences.append(current)
        timestamp += SECONDS_PER_DAY
        current = datetime.fromtimestamp(timestamp, first.tzinfo)
    return occurrences
