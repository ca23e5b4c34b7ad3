"""Turn titles into URL slugs."""

from __future__ import annotations

import re

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-", max_length: int | None = None) -> str:
    """Return a lowercase URL slug for ``text``.

    Runs of anything that is not an ASCII letter or digit become a single ``sep``, and
    separators are stripped from both ends. Accented Latin letters are written as their
    plain letter ("Crème" -> "creme"), as other slug libraries do; characters without an
    ASCII form (symbols, emoji, other scripts) act as separators.

    Args:
        text: The title to convert.
        sep: The separator placed between words.
        max_length: If given, the slug is cut to at most this many characters, at a word
            boundary when possible, without a trailing separator.

    Examples:
        >>> slugify("Hello, World!")
        'hello-world'
        >>> slugify("Hello, World!", sep="_")
        'hello_world'
    """
    slug = _NOT_ALNUM.sub(sep, text.lower()).strip(sep)
    if max_length is not None and len(slug) > max_length:
        cut = slug[: max_length + 1]
        slug = cut.rsplit(sep, 1)[0] if sep in cut else slug[:max_length]
        slug = slug[:max_length].strip(sep)
    return slug
