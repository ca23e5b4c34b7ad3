"""Hidden verifier tests for ratelimit.py.

The tests that must pass on any version use widely separated time bases, in
increasing order, so that they do not depend on what other tests did.
"""

import pytest

from ratelimit import HitCounter, SlidingWindowLimiter


def test_single_limiter_sliding_window():
    base = 1_000_000.0
    limiter = SlidingWindowLimiter(limit=3, window=10)
    assert [limiter.allow(base + t) for t in (0, 1, 2, 3)] == [True, True, True, False]
    assert limiter.remaining(base + 3) == 0
    assert limiter.allow(base + 10.5)
    assert not limiter.allow(base + 10.6)


def test_creating_a_limiter_keeps_existing_state():
    base = 2_000_000.0
    first = SlidingWindowLimiter(limit=2, window=10)
    assert first.allow(base) and first.allow(base + 1)
    SlidingWindowLimiter(limit=5, window=10)
    assert not first.allow(base + 2)


def test_event_stops_counting_exactly_one_window_later():
    base = 3_000_000.0
    limiter = SlidingWindowLimiter(limit=1, window=10)
    assert limiter.allow(base)
    assert not limiter.allow(base + 9.5)
    assert limiter.remaining(base + 9.5) == 0
    assert limiter.remaining(base + 10) == 1
    assert limiter.allow(base + 10)
    assert not limiter.allow(base + 19.5)


def test_short_windows_are_accepted():
    base = 4_000_000.0
    limiter = SlidingWindowLimiter(limit=1, window=0.5)
    assert limiter.allow(base)
    assert not limiter.allow(base + 0.25)
    assert limiter.allow(base + 0.5)


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(limit=0, window=10)
    with pytest.raises(ValueError):
        SlidingWindowLimiter(limit=1, window=0)


def test_hit_counter_with_initial_counts():
    counter = HitCounter({"/": 2})
    assert counter.hit("/") == 3
    assert counter.hit("/login", 5) == 5
    assert counter.count("/") == 3
    assert counter.total() == 8


def test_limiters_are_independent():
    alice = SlidingWindowLimiter(limit=2, window=60)
    assert alice.allow(0) and alice.allow(1)
    assert not alice.allow(2)
    bob = SlidingWindowLimiter(limit=2, window=60)
    assert bob.remaining(3) == 2
    assert bob.allow(3)
    assert bob.remaining(3) == 1


def test_reset_affects_only_its_own_limiter():
    alice = SlidingWindowLimiter(limit=3, window=60)
    bob = SlidingWindowLimiter(limit=3, window=60)
    alice.allow(0)
    bob.allow(0)
    alice.reset()
    assert alice.remaining(1) == 3
    assert bob.remaining(1) == 2


def test_hit_counters_are_independent():
    first = HitCounter()
    first.hit("/", 3)
    second = HitCounter()
    assert second.total() == 0
    assert second.count("/") == 0
    second.hit("/")
    assert first.count("/") == 3


def test_hit_counter_does_not_modify_initial_mapping():
    initial = {"/": 1}
    counter = HitCounter(initial)
    counter.hit("/")
    counter.hit("/about")
    assert initial == {"/": 1}
    assert counter.total() == 3
