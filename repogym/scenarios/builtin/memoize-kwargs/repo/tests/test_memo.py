"""Tests for memo.py."""

from memo import memoize


def test_positional_calls_are_cached():
    calls = []

    @memoize
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert calls == [3]
