"""Helpers for splitting work into fixed-size batches and pages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> list[list[T]]:
    """Split ``items`` into consecutive lists of ``size`` elements.

    Every element appears in exactly one chunk, in order. The last chunk holds
    whatever is left over and may therefore be shorter than ``size``.

    Args:
        items: Any iterable; it is consumed once.
        size: The number of elements per chunk, at least 1.

    Returns:
        The chunks, e.g. ``chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]``.

    Raises:
        ValueError: If ``size`` is smaller than 1.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    items = list(items)
    return [items[start : start + size] for start in range(0, len(items) - size + 1, size)]


def page_count(total: int, per_page: int) -> int:
    """Return how many pages are needed to show ``total`` items, ``per_page`` per page.

    A partially filled last page counts as a page; zero items need zero pages.

    Raises:
        ValueError: If ``per_page`` is smaller than 1.
    """
    if per_page < 1:
        raise ValueError(f"per_page must be >= 1, got {per_page}")
    return total // per_page


def paginate(items: Iterable[T], per_page: int, page: int) -> list[T]:
    """Return the items shown on ``page`` (1-based) when showing ``per_page`` per page.

    Raises:
        IndexError: If ``page`` is not between 1 and the number of pages.
    """
    pages = chunked(items, per_page)
    if not 1 <= page <= len(pages):
        raise IndexError(f"page {page} out of range (1..{len(pages)})")
    return pages[page - 1]
