"""Tests for batching.py."""

import pytest

from batching import chunked, page_count


def test_even_split():
    assert chunked([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_invalid_size():
    with pytest.raises(ValueError):
        chunked([1, 2], 0)


def test_page_count_exact():
    assert page_count(10, 5) == 2
