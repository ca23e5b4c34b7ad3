"""A small least-recently-used cache and a memoizing decorator built on it."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

_MISSING = object()


class LRUCache:
    """Map keys to values, keeping at most ``capacity`` entries.

    ``get`` and ``put`` both mark a key as most recently used. When a new key would exceed
    the capacity, the least recently used entry is evicted.

    Example:
        >>> cache = LRUCache(2)
        >>> cache.put("a", 1); cache.put("b", 2); cache.get("a")
        1
        >>> cache.put("c", 3)  # evicts "b", the least recently used
        >>> cache.get("b") is None
        True
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def get(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for ``key`` (marking it recently used), or ``default``."""
        if key not in self._data:
            return default
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key``, replacing any previous value for that key."""
        if key in self._data:
            self._data.move_to_end(key)
            return
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def invalidate(self, key: Hashable) -> None:
        """Forget ``key`` if it is cached."""
        self._data.pop(key, None)


def memoize(capacity: int = 128) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator caching a function's results by its arguments, positional and keyword.

    Calls that pass different arguments never share a result. The wrapped function gets a
    ``cache`` attribute (the :class:`LRUCache`). Arguments must be hashable.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        cache = LRUCache(capacity)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = args
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = fn(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper

    return decorate
