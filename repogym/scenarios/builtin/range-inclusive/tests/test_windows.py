"""Hidden verifier tests for inclusive_range() and date_range()."""

from datetime import date

import pytest
from windows import date_range, inclusive_range


def test_upper_bound_is_included():
    assert inclusive_range(2, 6) == [2, 3, 4, 5, 6]
    assert inclusive_range(0, 10, 5) == [0, 5, 10]
    assert inclusive_range(-3, 0) == [-3, -2, -1, 0]


def test_single_point_range():
    assert inclusive_range(4, 4) == [4]
    assert inclusive_range(4, 4, -2) == [4]


def test_counting_down_includes_stop():
    assert inclusive_range(5, 1, -1) == [5, 4, 3, 2, 1]
    assert inclusive_range(10, 0, -5) == [10, 5, 0]


def test_date_range_includes_last_day():
    assert date_range(date(2024, 2, 27), date(2024, 3, 1)) == [
        date(2024, 2, 27),
        date(2024, 2, 28),
        date(2024, 2, 29),
        date(2024, 3, 1),
    ]
    assert date_range(date(2024, 1, 1), date(2024, 1, 15), every_days=7) == [
        date(2024, 1, 1),
        date(2024, 1, 8),
        date(2024, 1, 15),
    ]


def test_date_range_walks_backwards_with_a_negative_step():
    assert date_range(date(2024, 3, 1), date(2024, 2, 28), every_days=-1) == [
        date(2024, 3, 1),
        date(2024, 2, 29),
        date(2024, 2, 28),
    ]
    assert date_range(date(2024, 1, 10), date(2024, 1, 1), every_days=-7) == [
        date(2024, 1, 10),
        date(2024, 1, 3),
    ]
    assert date_range(date(2024, 1, 1), date(2024, 1, 2), every_days=-1) == []


def test_step_that_does_not_land_on_stop_never_passes_it():
    assert inclusive_range(0, 10, 3) == [0, 3, 6, 9]
    assert inclusive_range(10, 0, -4) == [10, 6, 2]
    assert date_range(date(2024, 1, 1), date(2024, 1, 10), every_days=7) == [
        date(2024, 1, 1),
        date(2024, 1, 8),
    ]


def test_start_past_stop_gives_empty_range():
    assert inclusive_range(5, 1) == []
    assert inclusive_range(1, 5, -1) == []
    assert date_range(date(2024, 1, 2), date(2024, 1, 1)) == []


def test_zero_step_is_rejected():
    with pytest.raises(ValueError):
        inclusive_range(1, 5, 0)
