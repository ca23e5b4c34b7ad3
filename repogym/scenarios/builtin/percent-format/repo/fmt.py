"""Percentage formatting for reports and progress displays."""

from __future__ import annotations


def format_percent(ratio: float, digits: int = 1) -> str:
    """Format ``ratio`` as a percentage rounded to ``digits`` decimals.

    ``format_percent(0.256) == "25.6%"``. A value that rounds to zero is shown
    without a sign: ``format_percent(-0.0001) == "0.0%"``, never ``"-0.0%"``.

    Args:
        ratio: The fraction to format; 1.0 is 100%.
        digits: The number of decimals to show, 0 or more.
    """
    return f"{ratio * 100:.{digits}f}%"


def format_progress(done: int, total: int, digits: int = 1) -> str:
    """Format the progress of ``done`` out of ``total`` work items.

    Unlike :func:`format_percent` this rounds *down*, so that "100.0%" is only
    shown once the work is complete: 9995 of 10000 items is "99.9%". A
    ``total`` of 0 counts as complete.

    Args:
        done: Items finished, between 0 and ``total``.
        total: Items overall, 0 or more.
        digits: The number of decimals to show, 0 or more.
    """
    if total == 0:
        return format_percent(1, digits)
    return format_percent(done / total, digits)
