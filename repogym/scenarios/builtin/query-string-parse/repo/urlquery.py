"""Parsing of URL query strings (the part after ``?``), as sent by HTML forms."""

from __future__ import annotations


def decode_component(text: str) -> str:
    """Decode one ``application/x-www-form-urlencoded`` key or value.

    ``+`` stands for a space and ``%XX`` for the byte with hexadecimal value XX;
    consecutive escapes form UTF-8 text (``%C3%A9`` is ``é``). A ``%`` that is
    not followed by two hexadecimal digits is kept as it is.
    """
    out = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) + 1:
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_query(query: str) -> dict[str, list[str]]:
    """Parse a query string into a dict mapping each key to all of its values.

    Values of a repeated key are kept in order of appearance:
    ``parse_query("a=1&b=2&a=3") == {"a": ["1", "3"], "b": ["2"]}``. A leading
    ``?`` is ignored, empty pairs (``a=1&&b=2``) are skipped, and a key without
    ``=`` has the value ``""``. Keys and values are decoded with
    :func:`decode_component`.
    """
    result: dict[str, list[str]] = {}
    if query.startswith("?"):
        query = query[1:]
    for pair in query.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        result[decode_component(key)] = [decode_component(value)]
    return result


def first_value(query: str, key: str, default: str | None = None) -> str | None:
    """Return the first value of ``key`` in ``query``, or ``default`` if it is absent."""
    values = parse_query(query).get(key)
    return values[0] if values else default
