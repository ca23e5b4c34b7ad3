"""Tests for search.py."""

from search import index_of, lower_bound


def test_index_of_middle():
    assert index_of([1, 3, 5, 7, 9], 5) == 2


def test_index_of_missing():
    assert index_of([1, 3, 5], 4) == -1


def test_lower_bound_before_all():
    assert lower_bound([2, 4, 6], 1) == 0
