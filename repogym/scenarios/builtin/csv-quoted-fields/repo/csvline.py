"""Parse one line of a CSV export (RFC 4180 style) into its fields."""

from __future__ import annotations


def parse_line(line: str, delimiter: str = ",", quote: str = '"') -> list[str]:
    """Split one CSV record into fields.

    A field may be wrapped in ``quote`` characters; inside a quoted field the delimiter is
    ordinary text and a doubled quote (``""``) stands for one quote character. The quotes
    around a field are not part of its value. A line with ``n`` delimiters outside quotes has
    ``n + 1`` fields, so an empty line is one empty field.

    Args:
        line: The record, without its line terminator.
        delimiter: The one-character field separator.
        quote: The one-character quote.

    Examples:
        >>> parse_line('id,name,city')
        ['id', 'name', 'city']
        >>> parse_line('7,"Smith, Jane",Oslo')
        ['7', 'Smith, Jane', 'Oslo']
    """
    fields = []
    for raw in line.split(delimiter):
        if len(raw) >= 2 and raw[0] == quote and raw[-1] == quote:
            raw = raw[1:-1]
        fields.append(raw)
    return fields


def parse(text: str, delimiter: str = ",", quote: str = '"') -> list[list[str]]:
    """Parse every non-empty line of ``text`` with :func:`parse_line`."""
    return [parse_line(line, delimiter, quote) for line in text.splitlines() if line]
