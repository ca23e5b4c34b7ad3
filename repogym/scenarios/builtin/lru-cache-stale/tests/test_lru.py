"""Hidden verifier tests for LRUCache and memoize."""

import pytest
from lru import LRUCache, memoize


def test_put_replaces_value_of_existing_key():
    cache = LRUCache(3)
    cache.put("price", 10)
    cache.put("price", 12)
    assert cache.get("price") == 12
    assert len(cache) == 1


def test_keyword_arguments_are_part_of_the_key():
    calls = []

    @memoize()
    def scale(x, factor=2):
        calls.append((x, factor))
        return x * factor

    assert scale(5) == 10
    assert scale(5, factor=3) == 15
    assert scale(5, factor=10) == 50
    assert calls == [(5, 2), (5, 3), (5, 10)]


def test_keyword_names_matter():
    @memoize()
    def combine(x, *, add=0, mul=1):
        return (x + add) * mul

    assert combine(1, add=2) == 3
    assert combine(1, mul=2) == 2


def test_evicts_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "b" not in cache
    assert cache.get("a") == 1 and cache.get("c") == 3


def test_updating_a_key_marks_it_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 1)
    cache.put("c", 3)
    assert "a" in cache and "c" in cache and "b" not in cache
    assert len(cache) == 2


def test_updating_a_key_in_a_full_cache_evicts_nothing():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("b", 2)
    assert "a" in cache and "b" in cache
    assert len(cache) == 2


def test_missing_keys_and_invalidate():
    cache = LRUCache(2)
    assert cache.get("x") is None
    assert cache.get("x", 0) == 0
    cache.put("x", 1)
    cache.invalidate("x")
    cache.invalidate("never-there")
    assert "x" not in cache


def test_memoize_reuses_results_for_repeated_calls():
    calls = []

    @memoize(capacity=2)
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4), square(3)] == [9, 9, 16, 9]
    assert calls == [3, 4]
    assert square.__name__ == "square"


def test_different_arguments_never_share_a_result():
    @memoize()
    def echo(*args, **kwargs):
        return args, kwargs

    assert echo(5, factor=3) == ((5,), {"factor": 3})
    assert echo(5, ("factor", 3)) == ((5, ("factor", 3)), {})
    assert echo(-1) == ((-1,), {})
    assert echo(-2) == ((-2,), {})  # hash(-1) == hash(-2) in CPython


def test_memoize_exposes_its_cache_with_the_default_capacity():
    @memoize()
    def double(x):
        return 2 * x

    assert isinstance(double.cache, LRUCache)
    assert double.cache.capacity == 128
    for x in range(130):
        double(x)
    assert len(double.cache) == 128


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)
