"""Remove duplicate records from exports while keeping their order."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def dedupe(items: Iterable[T], key: Callable[[T], Hashable] | None = None) -> list[T]:
    """Return ``items`` without duplicates, in their original order.

    Two items are duplicates when their keys are equal: ``key(item)`` if ``key`` is given,
    else the item itself. Keys must be hashable (the items themselves need not be, when a
    ``key`` is given). Of each group of duplicates the first one is kept.

    Examples:
        >>> dedupe([3, 1, 3, 2, 1])
        [3, 1, 2]
        >>> dedupe(["Ann", "bob", "ANN"], key=str.lower)
        ['Ann', 'bob']
    """
    seen: list[Any] = []
    result: list[T] = []
    for item in items:
        k = item if key is None else key(item)
        if k not in seen:
            seen.append(k)
            result.append(item)
    return result


def count_duplicates(items: Iterable[T], key: Callable[[T], Hashable] | None = None) -> int:
    """Return how many items :func:`dedupe` would drop."""
    items = list(items)
    return len(items) - len(dedupe(items, key=key))
