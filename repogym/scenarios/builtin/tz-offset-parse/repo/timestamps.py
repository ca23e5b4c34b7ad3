"""Parse ISO 8601 timestamps from partner feeds into UTC ``datetime`` objects.

Feeds send timestamps such as ``2024-03-10T12:00:00+05:30``, ``2024-03-10T06:30:00Z`` or the
compact ``2024-03-10T12:00:00+0530``, sometimes with fractional seconds. We parse them with a
small regular expression so the accepted format is exactly what is documented here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_TIMESTAMP = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?P<fraction>\.\d{1,6})?"
    r"(?P<offset>[+-]\d{2}:?\d{2})?$"
)


def parse_timestamp(text: str) -> datetime:
    """Parse ``text`` and return the same instant as an aware datetime in UTC.

    The timestamp must carry its UTC offset: ``Z`` (UTC), ``+HH:MM`` or ``+HHMM`` (or ``-``).
    An offset is the local time minus UTC, so ``12:00+05:30`` is ``06:30`` UTC.

    Raises:
        ValueError: If ``text`` is not in that format, has no offset, or is not a valid date.
    """
    match = _TIMESTAMP.match(text.strip())
    if not match:
        raise ValueError(f"not a timestamp: {text!r}")
    if match["offset"] is None:
        raise ValueError(f"timestamp has no UTC offset: {text!r}")
    fraction = match["fraction"] or ".0"
    local = datetime.strptime(f"{match['date']}T{match['time']}", "%Y-%m-%dT%H:%M:%S")
    local = local.replace(microsecond=int(fraction[1:].ljust(6, "0")))
    offset = match["offset"]
    sign = 1 if offset[0] == "+" else -1
    hours = int(offset[1:3])
    return (local + sign * timedelta(hours=hours)).replace(tzinfo=UTC)


def to_iso_utc(moment: datetime) -> str:
    """Format an aware datetime as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC (fractions dropped)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
