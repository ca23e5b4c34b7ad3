"""A deterministic stand-in for a daylight-saving time zone.

Real DST rules live in the system tz database, which differs between machines.
``SwitchingOffset`` models the one thing a scheduler has to get right -- the UTC
offset changes at a known instant -- with fixed offsets only.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo


class SwitchingOffset(tzinfo):
    """A time zone whose UTC offset changes once, at ``switch_utc``.

    Args:
        before: UTC offset before the switch, e.g. ``timedelta(hours=1)``.
        after: UTC offset from the switch on, e.g. ``timedelta(hours=2)``.
        switch_utc: The naive UTC instant at which ``after`` takes effect.
        name: The zone's display name.
    """

    def __init__(self, before: timedelta, after: timedelta, switch_utc: datetime, name: str = "Local") -> None:
        self.before = before
        self.after = after
        self.switch_utc = switch_utc
        self.name = name

    def utcoffset(self, dt: datetime | None) -> timedelta:
        """Return the offset in force at local wall-clock time ``dt``."""
        if dt is None:
            return self.before
        wall = dt.replace(tzinfo=None)
        return self.after if wall - self.before >= self.switch_utc else self.before

    def dst(self, dt: datetime | None) -> timedelta:
        """Return the daylight-saving part of the offset (the change at the switch)."""
        return self.utcoffset(dt) - self.before

    def tzname(self, dt: datetime | None) -> str:
        """Return the zone's display name."""
        return self.name

    def fromutc(self, dt: datetime) -> datetime:
        """Convert ``dt`` (UTC wall time with ``tzinfo=self``) to local wall time."""
        utc = dt.replace(tzinfo=None)
        offset = self.after if utc >= self.switch_utc else self.before
        return (utc + offset).replace(tzinfo=self)

    def __repr__(self) -> str:
        return f"SwitchingOffset({self.before!r}, {self.after!r}, {self.switch_utc!r}, {self.name!r})"
