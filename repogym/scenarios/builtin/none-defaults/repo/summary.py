"""Small helpers used to summarise survey responses for the weekly report."""

from __future__ import annotations

from collections.abc import Iterable


def average(values: Iterable[float] | None, default: float | None = 0.0) -> float | None:
    """Return the arithmetic mean of ``values``.

    Args:
        values: Any iterable of numbers (list, tuple, generator, ...). ``None`` means "no
            data".
        default: What to return when there is no data: ``values`` is ``None`` or yields
            nothing.

    Examples:
        >>> average([1, 2, 3])
        2.0
        >>> average([])
        0.0
        >>> average(None, default=None) is None
        True
    """
    numbers = list(values)
    return sum(numbers) / len(numbers)


def parse_tags(raw: str | None) -> list[str]:
    """Split a comma-separated tag string into clean tags.

    Tags are stripped and lowercased; empty tags are dropped; the first occurrence of a
    repeated tag is kept. ``None`` or a blank string gives ``[]``.

    Example:
        >>> parse_tags(" UX, bug ,, ux")
        ['ux', 'bug']
    """
    tags: list[str] = []
    for piece in raw.split(","):
        tag = piece.strip().lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def summarize(scores: Iterable[float] | None, tags: str | None) -> dict[str, object]:
    """Return ``{"mean": ..., "tags": [...]}`` for one survey question.

    The mean is ``None`` when there are no scores.
    """
    return {"mean": average(scores, default=None), "tags": parse_tags(tags)}
