"""Hidden verifier tests for stats.py."""

import math

import pytest

from stats import mean, mean_or_none, median, variance


def test_mean_of_empty_raises_value_error():
    with pytest.raises(ValueError):
        mean([])
    with pytest.raises(ValueError):
        mean(x for x in [])


def test_median_of_empty_raises_value_error():
    with pytest.raises(ValueError):
        median([])


def test_variance_needs_two_values():
    with pytest.raises(ValueError):
        variance([])
    with pytest.raises(ValueError):
        variance([5])


def test_mean_or_none_on_empty_input():
    assert mean_or_none([]) is None
    assert mean_or_none(iter(())) is None


def test_mean_values():
    assert mean([1, 2, 3, 4]) == 2.5
    assert mean([-2]) == -2
    assert mean(x * x for x in range(4)) == 3.5


def test_median_odd_and_even():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert median([9]) == 9


def test_sample_variance():
    assert math.isclose(variance([2, 4, 4, 4, 5, 5, 7, 9]), 32 / 7)
    assert variance([1, 1]) == 0


def test_mean_or_none_with_values():
    assert mean_or_none([1, 2]) == 1.5
    assert mean_or_none(iter([4])) == 4


def test_mean_or_none_does_not_hide_bad_data():
    with pytest.raises(TypeError):
        mean_or_none(["a", "b"])
    with pytest.raises(TypeError):
        mean_or_none([1, None])


def test_median_and_variance_accept_generators():
    assert median(x for x in [5, 1, 3]) == 3
    assert variance(x for x in [1, 2, 3]) == 1
