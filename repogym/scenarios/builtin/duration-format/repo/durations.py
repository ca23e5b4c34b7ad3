"""Human-readable durations for job logs ("1h 02m 03s")."""

from __future__ import annotations


def format_duration(seconds: int) -> str:
    """Format a whole number of seconds for humans.

    The largest unit needed comes first without padding; the smaller units after it are
    always shown, padded to two digits. Hours are not rolled over into days.

    ========  ===============
    seconds   result
    ========  ===============
    0         ``0s``
    45        ``45s``
    125       ``2m 05s``
    3723      ``1h 02m 03s``
    90000     ``25h 00m 00s``
    ========  ===============

    Raises:
        ValueError: If ``seconds`` is negative.
    """
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {seconds}")
    hours = seconds // 3600 % 24
    minutes = seconds % 3600 // 60
    secs = seconds % 60
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes:02d}m" if hours else f"{minutes}m")
    if secs:
        parts.append(f"{secs:02d}s" if hours or minutes else f"{secs}s")
    return " ".join(parts)


def parse_duration(text: str) -> int:
    """Inverse of :func:`format_duration`: ``"1h 02m 03s"`` -> ``3723``."""
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(part[:-1]) * units[part[-1]] for part in text.split())
