"""A small memoization decorator for pure functions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def memoize(func: F) -> F:
    """Cache ``func``'s results by the arguments it was called with.

    A call whose positional *and* keyword arguments equal those of an earlier
    call returns the cached result without calling ``func``; the order in which
    keyword arguments are written does not matter. Any other call runs ``func``
    and caches its result. All arguments must be hashable.

    The wrapper has two extra attributes: ``cache_clear()`` empties the cache and
    ``cache_size()`` returns the number of cached results.
    """
    cache: dict[Any, Any] = {}

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = args
        if key not in cache:
            cache[key] = func(*args, **kwargs)
        return cache[key]

    wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
    wrapper.cache_size = lambda: len(cache)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
