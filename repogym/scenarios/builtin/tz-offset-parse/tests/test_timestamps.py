"""Hidden verifier tests for parse_timestamp()."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from timestamps import parse_timestamp, to_iso_utc


def test_positive_offset_is_subtracted():
    assert parse_timestamp("2024-03-10T12:00:00+05:30") == datetime(2024, 3, 10, 6, 30, tzinfo=UTC)
    assert parse_timestamp("2024-03-10T12:00:00+0200") == datetime(2024, 3, 10, 10, 0, tzinfo=UTC)


def test_negative_offset_is_added():
    assert parse_timestamp("2024-03-10T12:00:00-04:00") == datetime(2024, 3, 10, 16, 0, tzinfo=UTC)
    assert parse_timestamp("2024-03-10T12:00:00-0930") == datetime(2024, 3, 10, 21, 30, tzinfo=UTC)


def test_z_means_utc():
    assert parse_timestamp("2024-03-10T06:30:00Z") == datetime(2024, 3, 10, 6, 30, tzinfo=UTC)
    assert parse_timestamp("2024-03-10T06:30:00.250Z").microsecond == 250000


def test_conversion_crosses_midnight_and_year():
    assert parse_timestamp("2024-03-10T02:00:00+05:30") == datetime(2024, 3, 9, 20, 30, tzinfo=UTC)
    assert parse_timestamp("2023-12-31T23:30:00-01:00") == datetime(2024, 1, 1, 0, 30, tzinfo=UTC)


def test_same_instant_in_any_offset():
    moment = datetime(2024, 7, 1, 15, 45, 10, tzinfo=timezone(timedelta(hours=-7)))
    for hours, minutes in ((0, 0), (5, 30), (-3, -30), (9, 0), (-11, 0), (12, 45)):
        local = moment.astimezone(timezone(timedelta(hours=hours, minutes=minutes)))
        assert parse_timestamp(local.isoformat()) == moment
        assert to_iso_utc(parse_timestamp(local.isoformat())) == "2024-07-01T22:45:10Z"


def test_result_is_aware_and_in_utc():
    result = parse_timestamp("2024-03-10T12:00:00+00:00")
    assert result.utcoffset() == timedelta(0)
    assert result == datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
    assert result.hour == 12


def test_fractional_seconds_are_kept():
    result = parse_timestamp("2024-03-10T12:00:00.5+00:00")
    assert result.microsecond == 500000
    assert parse_timestamp("2024-03-10 12:00:00.123456+0000").microsecond == 123456


def test_timestamps_without_offset_are_rejected():
    with pytest.raises(ValueError):
        parse_timestamp("2024-03-10T12:00:00")


def test_malformed_timestamps_are_rejected():
    for bad in ("yesterday", "2024-13-01T00:00:00+00:00", "2024-03-10T25:00:00Z", ""):
        with pytest.raises(ValueError):
            parse_timestamp(bad)


def test_formats_outside_the_documented_ones_are_rejected():
    for bad in (
        "2024-03-10T12:00+05:30",  # no seconds
        "2024-03-10T12:00:00+05",  # offset without minutes
        "2024-03-10T12:00:00+05:30:00",  # offset with seconds
        "20240310T120000+0000",  # basic (compact) date and time
        "2024-W10-7T12:00:00+00:00",  # week date
        "2024-03-10T12:00:00,5+00:00",  # comma before the fraction
    ):
        with pytest.raises(ValueError):
            parse_timestamp(bad)
