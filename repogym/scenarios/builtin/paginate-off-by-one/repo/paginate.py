"""Split a listing into numbered pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple


class Page(NamedTuple):
    """One page of a listing.

    Attributes:
        number: The page number, starting at 1.
        items: The items on this page.
        has_previous: Whether a page comes before this one.
        has_next: Whether a page comes after this one.
    """

    number: int
    items: list[Any]
    has_previous: bool
    has_next: bool


class Paginator:
    """Pages of ``per_page`` items over a sequence.

    Example:
        >>> p = Paginator(["a", "b", "c"], per_page=2)
        >>> p.page_count
        2
        >>> p.page(2).items
        ['c']
    """

    def __init__(self, items: Sequence[Any], per_page: int) -> None:
        """Args:
            items: The whole listing (any sequence: list, tuple, range, ...).
            per_page: How many items go on each page; must be at least 1.

        Raises:
            ValueError: If ``per_page`` is less than 1.
        """
        if per_page < 1:
            raise ValueError(f"per_page must be at least 1, got {per_page}")
        self.items = items
        self.per_page = per_page

    @property
    def page_count(self) -> int:
        """The number of pages. An empty listing still has one (empty) page."""
        return len(self.items) // self.per_page + 1

    def page(self, number: int) -> Page:
        """Return page ``number`` (1-based).

        Raises:
            IndexError: If ``number`` is not between 1 and ``page_count``.
        """
        if not 1 <= number <= self.page_count:
            raise IndexError(f"page {number} out of range 1..{self.page_count}")
        start = (number - 1) * self.per_page
        return Page(
            number=number,
            items=list(self.items[start : start + self.per_page]),
            has_previous=number > 1,
            has_next=number < self.page_count,
        )
