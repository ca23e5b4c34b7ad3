"""Hidden verifier tests for memo.py."""

from memo import memoize


def _counting(func):
    """Wrap ``func`` so that its calls are recorded in ``wrapped.calls``."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append((args, kwargs))
        return func(*args, **kwargs)

    wrapped.calls = calls
    return wrapped


def test_keyword_arguments_change_the_result():
    @memoize
    def power(base, exp=2):
        return base**exp

    assert power(2, exp=4) == 16
    assert power(2, exp=5) == 32
    assert power(2) == 4


def test_keyword_only_arguments():
    @memoize
    def greet(*, name, punctuation="!"):
        return f"Hello, {name}{punctuation}"

    assert greet(name="Ada") == "Hello, Ada!"
    assert greet(name="Grace") == "Hello, Grace!"
    assert greet(name="Grace", punctuation="?") == "Hello, Grace?"


def test_same_values_under_different_keywords():
    @memoize
    def describe(a=0, b=0):
        return f"a={a} b={b}"

    assert describe(a=1) == "a=1 b=0"
    assert describe(b=1) == "a=0 b=1"


def test_cache_size_counts_keyword_variants():
    @memoize
    def add(x, y=0):
        return x + y

    add(1, y=1)
    add(1, y=2)
    add(1, y=2)
    assert add.cache_size() == 2


def test_repeated_keyword_call_hits_cache():
    inner = _counting(lambda x, scale=1: x * scale)
    cached = memoize(inner)
    assert cached(4, scale=3) == 12
    assert cached(4, scale=3) == 12
    assert len(inner.calls) == 1


def test_keyword_order_does_not_matter():
    inner = _counting(lambda a, b: a - b)
    cached = memoize(inner)
    assert cached(a=5, b=2) == 3
    assert cached(b=2, a=5) == 3
    assert len(inner.calls) == 1


def test_positional_tuple_is_not_mistaken_for_a_keyword():
    @memoize
    def show(*args, **kwargs):
        return args, kwargs

    assert show(2, exp=3) == ((2,), {"exp": 3})
    assert show(2, ("exp", 3)) == ((2, ("exp", 3)), {})
    assert show(("exp", 3)) == ((("exp", 3),), {})
    assert show(exp=3) == ((), {"exp": 3})


def test_positional_cache_and_clear():
    inner = _counting(lambda x: x + 1)
    cached = memoize(inner)
    assert [cached(1), cached(2), cached(1)] == [2, 3, 2]
    assert len(inner.calls) == 2
    cached.cache_clear()
    assert cached(1) == 2
    assert len(inner.calls) == 3


def test_metadata_is_preserved():
    @memoize
    def documented(x):
        """Return x."""
        return x

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Return x."
