"""Inclusive ranges of integers and dates, as used by report windows ("Jan 1 to Jan 7")."""

from __future__ import annotations

from datetime import date


def inclusive_range(start: int, stop: int, step: int = 1) -> list[int]:
    """Return ``start, start + step, ...`` up to and including ``stop`` when it is reached.

    Works in both directions: a negative ``step`` counts down. Values never pass ``stop``;
    if ``stop`` is not a whole number of steps from ``start`` the last value is the one just
    before it. If ``start`` is already past ``stop`` (in the direction of ``step``) the
    result is empty.

    Examples:
        >>> inclusive_range(1, 5)
        [1, 2, 3, 4, 5]
        >>> inclusive_range(0, 10, 3)
        [0, 3, 6, 9]
        >>> inclusive_range(3, 1, -1)
        [3, 2, 1]

    Raises:
        ValueError: If ``step`` is 0.
    """
    if step == 0:
        raise ValueError("step must not be zero")
    return list(range(start, stop, step))


def date_range(first: date, last: date, every_days: int = 1) -> list[date]:
    """Return the dates from ``first`` to ``last`` inclusive, ``every_days`` apart.

    A negative ``every_days`` walks backwards in time (``first`` after ``last``).
    """
    ordinals = inclusive_range(first.toordinal(), last.toordinal(), every_days)
    return [date.fromordinal(day) for day in ordinals]
