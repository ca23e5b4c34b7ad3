"""Tests for ratelimit.py."""

from ratelimit import HitCounter, SlidingWindowLimiter


def test_limit_is_enforced():
    limiter = SlidingWindowLimiter(limit=2, window=10)
    assert limiter.allow(0)
    assert limiter.allow(1)
    assert not limiter.allow(2)


def test_hit_counter():
    counter = HitCounter({"/": 1})
    assert counter.hit("/") == 2
