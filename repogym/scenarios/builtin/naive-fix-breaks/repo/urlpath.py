"""Helpers for building URL paths such as ``/api/v1/users``."""

from __future__ import annotations


def join(*parts: str) -> str:
    """Join URL path segments with exactly one ``/`` between consecutive segments.

    Slashes where two segments meet are merged into one. A leading ``/`` on the first
    segment is kept (the result is then an absolute path), and so is a trailing ``/`` on the
    last one (a "directory" URL). Empty segments are skipped. Slashes inside a segment are
    left alone.

    Examples:
        >>> join("api", "v1", "users")
        'api/v1/users'
        >>> join("/api", "users/")
        '/api/users/'
        >>> join("/")
        '/'
        >>> join()
        ''
    """
    return "/".join(part for part in parts if part)


def split(path: str) -> list[str]:
    """Split a URL path into its non-empty segments: ``"/a//b/"`` -> ``["a", "b"]``."""
    return [segment for segment in path.split("/") if segment]
