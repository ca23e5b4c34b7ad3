"""Request accounting for an API gateway: a sliding-window rate limiter and hit counters.

Times are passed in explicitly (seconds as floats) so that the objects are easy
to test and never read the clock themselves.
"""

from __future__ import annotations


class SlidingWindowLimiter:
    """Allow at most ``limit`` events in any ``window``-second interval.

    Every limiter keeps track of its own events only: one client using up its
    quota has no effect on another client's limiter.

    Args:
        limit: The number of events allowed per window, at least 1.
        window: The window length in seconds, greater than 0.

    Raises:
        ValueError: If ``limit`` or ``window`` is out of range.
    """

    _events: list[float] = []

    def __init__(self, limit: int, window: float) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if window <= 0:
            raise ValueError(f"window must be > 0, got {window}")
        self.limit = limit
        self.window = window

    def _prune(self, now: float) -> None:
        """Forget events that happened ``window`` seconds or more before ``now``."""
        cutoff = now - self.window
        while self._events and self._events[0] <= cutoff:
            self._events.pop(0)

    def allow(self, now: float) -> bool:
        """Record an event at ``now`` and return True, or return False if over the limit."""
        self._prune(now)
        if len(self._events) >= self.limit:
            return False
        self._events.append(now)
        return True

    def remaining(self, now: float) -> int:
        """Return how many more events would be allowed at ``now``."""
        self._prune(now)
        return self.limit - len(self._events)

    def reset(self) -> None:
        """Forget all events of this limiter."""
        self._events.clear()


class HitCounter:
    """Count hits per key (for example per API route).

    Args:
        initial: Counts to start from. The counter works on its own copy, so the
            caller's mapping is never modified.
    """

    def __init__(self, initial: dict[str, int] = {}) -> None:
        self.counts = initial

    def hit(self, key: str, n: int = 1) -> int:
        """Add ``n`` hits to ``key`` and return its new count."""
        self.counts[key] = self.counts.get(key, 0) + n
        return self.counts[key]

    def count(self, key: str) -> int:
        """Return the hits recorded for ``key`` (0 if none)."""
        return self.counts.get(key, 0)

    def total(self) -> int:
        """Return the hits recorded for all keys."""
        return sum(self.counts.values())

    def reset(self) -> None:
        """Forget all hits of this counter."""
        self.counts.clear()
