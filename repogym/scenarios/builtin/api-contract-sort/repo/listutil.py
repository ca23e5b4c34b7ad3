"""List helpers shared by the report and export code."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def _identity(item: Any) -> Any:
    return item


def sorted_unique(
    items: Iterable[T],
    key: Callable[[T], Any] | None = None,
    reverse: bool = False,
) -> list[T]:
    """Return the distinct items of ``items``, sorted.

    Contract:
        * ``items`` may be any iterable and is never modified.
        * Two items are duplicates when their keys are equal (``key(item)``, or the item
          itself when ``key`` is None); keys must be hashable.
        * Of a group of duplicates, the one that came first in ``items`` is kept, whatever
          the sort direction.
        * The result is sorted by key, ascending, or descending when ``reverse`` is true.

    Examples:
        >>> sorted_unique([3, 1, 2, 3, 1])
        [1, 2, 3]
        >>> sorted_unique(["b", "A", "a", "B"], key=str.lower)
        ['A', 'b']
        >>> sorted_unique(["b", "A", "a", "B"], key=str.lower, reverse=True)
        ['b', 'A']
    """
    key = key or _identity
    items.sort(key=key)
    if reverse:
        items.reverse()
    seen: set[Any] = set()
    result: list[T] = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            result.append(item)
    return result


def chunked(items: list[T], size: int) -> list[list[T]]:
    """Split ``items`` into consecutive lists of ``size`` (the last may be shorter)."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[i : i + size] for i in range(0, len(items), size)]
