"""Binary search over sorted sequences.

Both functions accept any sorted ``Sequence`` (list, tuple, range, or a custom
class with ``__len__`` and ``__getitem__``) and look at O(log n) elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def lower_bound(seq: Sequence[Any], target: Any) -> int:
    """Return the first index ``i`` with ``seq[i] >= target``.

    This is the position where ``target`` would be inserted to keep ``seq``
    sorted (before any equal elements), like ``bisect.bisect_left``. It is
    ``len(seq)`` when every element is smaller than ``target``.

    Args:
        seq: A sequence sorted in ascending order.
        target: The value to look for.
    """
    lo, hi = 0, len(seq)
    while lo < hi:
        mid = (lo + hi) // 2
        if seq[mid] < target:
            lo = mid
        else:
            hi = mid
    return lo


def index_of(seq: Sequence[Any], target: Any) -> int:
    """Return an index of ``target`` in the sorted ``seq``, or -1 if it is absent.

    Args:
        seq: A sequence sorted in ascending order.
        target: The value to look for.
    """
    lo, hi = 0, len(seq) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if seq[mid] < target:
            lo = mid + 1
        elif seq[mid] > target:
            hi = mid
        else:
            return mid
    return -1
