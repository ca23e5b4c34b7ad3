"""Hidden verifier tests for schedule.py and tz.py (deterministic: fixed offsets only)."""

from datetime import date, datetime, timedelta, timezone

from schedule import daily_occurrences, date_range
from tz import SwitchingOffset

UTC = timezone.utc
# UTC+1 until 2024-03-31 01:00 UTC, then UTC+2 (like central Europe's spring change).
SPRING = SwitchingOffset(timedelta(hours=1), timedelta(hours=2), datetime(2024, 3, 31, 1, 0), "CE")
# UTC+2 until 2024-10-27 01:00 UTC, then UTC+1 (the autumn change).
AUTUMN = SwitchingOffset(timedelta(hours=2), timedelta(hours=1), datetime(2024, 10, 27, 1, 0), "CE")


def _wall(dt):
    return (dt.date(), dt.hour, dt.minute)


def test_date_range_includes_end():
    assert date_range(date(2024, 1, 30), date(2024, 2, 1)) == [date(2024, 1, 30), date(2024, 1, 31), date(2024, 2, 1)]
    assert date_range(date(2024, 2, 28), date(2024, 3, 1)) == [date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1)]


def test_date_range_single_day():
    assert date_range(date(2024, 7, 4), date(2024, 7, 4)) == [date(2024, 7, 4)]


def test_occurrences_keep_wall_time_across_spring_change():
    first = datetime(2024, 3, 29, 9, 0, tzinfo=SPRING)
    got = daily_occurrences(first, date(2024, 4, 2))
    assert [_wall(dt) for dt in got] == [(date(2024, 3, d), 9, 0) for d in (29, 30, 31)] + [
        (date(2024, 4, d), 9, 0) for d in (1, 2)
    ]
    assert [dt.astimezone(UTC).hour for dt in got] == [8, 8, 7, 7, 7]


def test_occurrences_keep_wall_time_across_autumn_change():
    first = datetime(2024, 10, 25, 0, 30, tzinfo=AUTUMN)
    got = daily_occurrences(first, date(2024, 10, 29))
    assert [_wall(dt) for dt in got] == [(date(2024, 10, d), 0, 30) for d in range(25, 30)]
    assert [dt.utcoffset() for dt in got] == [timedelta(hours=h) for h in (2, 2, 2, 1, 1)]


def test_occurrences_include_until_in_fixed_offset_zone():
    first = datetime(2024, 5, 1, 18, 15, tzinfo=timezone(timedelta(hours=-5)))
    got = daily_occurrences(first, date(2024, 5, 3))
    assert [_wall(dt) for dt in got] == [(date(2024, 5, d), 18, 15) for d in (1, 2, 3)]


def test_date_range_reversed_is_empty():
    assert date_range(date(2024, 5, 2), date(2024, 5, 1)) == []


def test_occurrences_empty_when_until_before_first():
    first = datetime(2024, 5, 1, 9, 0, tzinfo=SPRING)
    assert daily_occurrences(first, date(2024, 4, 30)) == []


def test_first_occurrence_is_unchanged():
    first = datetime(2024, 3, 30, 9, 0, tzinfo=SPRING)
    got = daily_occurrences(first, date(2024, 4, 5))
    assert got[0] == first
    assert got[0].utcoffset() == timedelta(hours=1)


def test_occurrences_before_a_change_are_consecutive_days():
    first = datetime(2024, 3, 20, 7, 45, tzinfo=SPRING)
    got = daily_occurrences(first, date(2024, 3, 26))
    assert [_wall(dt) for dt in got[:5]] == [(date(2024, 3, d), 7, 45) for d in range(20, 25)]


def test_occurrences_keep_seconds_and_microseconds():
    first = datetime(2024, 3, 20, 7, 45, 30, 250000, tzinfo=SPRING)
    got = daily_occurrences(first, date(2024, 3, 26))
    assert [dt.time() for dt in got[:5]] == [first.time()] * 5
    assert [dt.tzinfo for dt in got[:5]] == [SPRING] * 5


def test_switching_offset_zone():
    assert datetime(2024, 3, 31, 1, 59, tzinfo=SPRING).utcoffset() == timedelta(hours=1)
    assert datetime(2024, 3, 31, 3, 0, tzinfo=SPRING).utcoffset() == timedelta(hours=2)
    instant = datetime(2024, 3, 31, 1, 0, tzinfo=UTC)
    assert _wall(instant.astimezone(SPRING)) == (date(2024, 3, 31), 3, 0)
    assert _wall((instant - timedelta(seconds=1)).astimezone(SPRING)) == (date(2024, 3, 31), 1, 59)
