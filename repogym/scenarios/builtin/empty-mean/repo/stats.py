"""Descriptive statistics for small data sets (lists of numbers).

Every function accepts any iterable of numbers, including generators.
"""

from __future__ import annotations

from collections.abc import Iterable


def mean(data: Iterable[float]) -> float:
    """Return the arithmetic mean of ``data``.

    Raises:
        ValueError: If ``data`` is empty.
    """
    values = list(data)
    return sum(values) / len(values)


def median(data: Iterable[float]) -> float:
    """Return the median of ``data`` (the mean of the two middle values for even sizes).

    Raises:
        ValueError: If ``data`` is empty.
    """
    values = sorted(data)
    mid = len(values) // 2
    if len(values) % 2:
        return values[mid]
    return (values[mid - 1] + values[mid]) / 2


def variance(data: Iterable[float]) -> float:
    """Return the sample variance of ``data`` (divides by n - 1).

    Raises:
        ValueError: If ``data`` has fewer than two values.
    """
    values = list(data)
    centre = mean(values)
    return sum((x - centre) ** 2 for x in values) / (len(values) - 1)


def mean_or_none(data: Iterable[float]) -> float | None:
    """Return the mean of ``data``, or ``None`` when ``data`` is empty."""
    try:
        return mean(data)
    except ValueError:
        return None
