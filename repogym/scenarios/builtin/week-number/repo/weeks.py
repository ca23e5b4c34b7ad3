"""ISO 8601 week numbers, as used in our weekly reports ("2024-W07").

ISO weeks start on Monday. Week 1 of a year is the week that contains the
year's first Thursday, so 29-31 December can belong to week 1 of the next
year and 1-3 January to the last week (52 or 53) of the previous year.
"""

from __future__ import annotations

from datetime import date, timedelta


def iso_week(day: date) -> tuple[int, int]:
    """Return the ISO ``(week_year, week)`` that ``day`` belongs to.

    ``week_year`` differs from ``day.year`` around New Year:
    ``iso_week(date(2021, 1, 1)) == (2020, 53)``.
    """
    jan1 = date(day.year, 1, 1)
    week = (day.toordinal() - jan1.toordinal() + jan1.weekday()) // 7 + 1
    return day.year, week


def week_label(day: date) -> str:
    """Return the report label of ``day``'s ISO week, e.g. ``"2024-W07"``."""
    year, week = iso_week(day)
    return f"{year}-W{week:02d}"


def week_monday(year: int, week: int) -> date:
    """Return the Monday that starts ISO week ``week`` of ISO year ``year``."""
    jan1 = date(year, 1, 1)
    return jan1 - timedelta(days=jan1.weekday()) + timedelta(weeks=week - 1)
