"""Hidden verifier tests for format_duration()."""

import pytest
from durations import format_duration, parse_duration


def test_zero_seconds():
    assert format_duration(0) == "0s"


def test_exact_minutes_and_hours():
    assert format_duration(60) == "1m 00s"
    assert format_duration(600) == "10m 00s"
    assert format_duration(10800) == "3h 00m 00s"
    assert format_duration(7200) == "2h 00m 00s"


def test_hours_with_zero_minutes():
    assert format_duration(3605) == "1h 00m 05s"
    assert format_duration(3660) == "1h 01m 00s"


def test_more_than_a_day():
    assert format_duration(86400) == "24h 00m 00s"
    assert format_duration(93600) == "26h 00m 00s"
    assert format_duration(86400 + 3723) == "25h 02m 03s"
    assert format_duration(100 * 3600 + 59) == "100h 00m 59s"


def test_round_trip_with_parse_duration():
    assert [parse_duration(format_duration(s)) for s in (59, 3601, 86400, 123456)] == [
        59, 3601, 86400, 123456]
    for seconds in (0, 1, 59, 60, 61, 3599, 3600, 3601, 86399, 86400, 123456):
        assert parse_duration(format_duration(seconds)) == seconds


def test_seconds_only():
    assert format_duration(45) == "45s"
    assert format_duration(7) == "7s"


def test_minutes_and_seconds():
    assert format_duration(125) == "2m 05s"
    assert format_duration(3599) == "59m 59s"


def test_hours_minutes_seconds():
    assert format_duration(3723) == "1h 02m 03s"
    assert format_duration(45296) == "12h 34m 56s"


def test_negative_is_rejected():
    with pytest.raises(ValueError):
        format_duration(-1)
