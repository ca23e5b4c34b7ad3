"""Hidden verifier tests for weeks.py."""

from datetime import date, timedelta

from weeks import iso_week, week_label, week_monday


def _days(start, end):
    day = start
    while day <= end:
        yield day
        day += timedelta(days=1)


def test_early_january_belongs_to_previous_year():
    assert iso_week(date(2021, 1, 2)) == (2020, 53)
    assert iso_week(date(2021, 1, 3)) == (2020, 53)
    assert iso_week(date(2023, 1, 1)) == (2022, 52)
    assert iso_week(date(2022, 1, 2)) == (2021, 52)


def test_late_december_belongs_to_next_year():
    assert iso_week(date(2024, 12, 30)) == (2025, 1)
    assert iso_week(date(2019, 12, 31)) == (2020, 1)
    assert iso_week(date(2025, 12, 29)) == (2026, 1)


def test_labels_at_year_boundary():
    assert week_label(date(2021, 1, 3)) == "2020-W53"
    assert week_label(date(2024, 12, 31)) == "2025-W01"


def test_agrees_with_isocalendar_for_every_day():
    assert [iso_week(date(*ymd)) for ymd in ((2015, 12, 31), (2016, 1, 3), (2020, 12, 31),
                                             (2021, 1, 3), (2026, 12, 31), (2027, 1, 1))] == [
        (2015, 53), (2015, 53), (2020, 53), (2020, 53), (2026, 53), (2026, 53)]
    for day in _days(date(2015, 12, 1), date(2027, 1, 31)):
        year, week, _ = day.isocalendar()
        assert iso_week(day) == (year, week), day


def test_week_monday_round_trip():
    assert [week_monday(y, w) for y, w in ((2020, 53), (2015, 53), (2026, 1), (2027, 1))] == [
        date(2020, 12, 28), date(2015, 12, 28), date(2025, 12, 29), date(2027, 1, 4)]
    for day in _days(date(2019, 12, 1), date(2027, 1, 31)):
        monday = day - timedelta(days=day.weekday())
        year, week, _ = day.isocalendar()
        assert week_monday(year, week) == monday, day
        assert week_monday(*iso_week(day)) == monday, day


def test_week_monday_in_years_starting_late_in_the_week():
    assert week_monday(2021, 1) == date(2021, 1, 4)
    assert week_monday(2022, 1) == date(2022, 1, 3)
    assert week_monday(2023, 10) == date(2023, 3, 6)


def test_weeks_in_a_year_starting_on_monday():
    assert iso_week(date(2024, 1, 1)) == (2024, 1)
    assert iso_week(date(2024, 6, 15)) == (2024, 24)
    assert iso_week(date(2024, 12, 29)) == (2024, 52)


def test_label_format():
    assert week_label(date(2024, 1, 3)) == "2024-W01"
    assert week_label(date(2024, 2, 14)) == "2024-W07"
    assert week_label(date(2024, 11, 20)) == "2024-W47"


def test_week_monday_simple_year():
    assert week_monday(2024, 1) == date(2024, 1, 1)
    assert week_monday(2024, 10) == date(2024, 3, 4)
