"""Comparison of semantic version strings (https://semver.org, section 11).

A version looks like ``MAJOR.MINOR.PATCH`` with an optional pre-release part
after a hyphen: ``1.4.2``, ``2.0.0-rc.1``, ``1.0.0-alpha.beta``.
"""

from __future__ import annotations

from collections.abc import Iterable


def _sort_key(version: str) -> tuple:
    """Return a key that orders version strings by semantic-version precedence."""
    release, _, prerelease = version.partition("-")
    return (release.split("."), prerelease)


def compare(a: str, b: str) -> int:
    """Compare two versions by precedence.

    Numeric parts compare as numbers (``1.10.0 > 1.9.0``). A pre-release is
    lower than the release it precedes (``1.0.0-rc.1 < 1.0.0``); pre-release
    identifiers compare one by one, numbers numerically, other identifiers
    in ASCII order, numbers below non-numbers, and a shorter list of identifiers
    is lower when all shared ones are equal (``alpha < alpha.1``).

    Returns:
        -1 if ``a`` comes before ``b``, 1 if after, 0 if they are equal.
    """
    key_a, key_b = _sort_key(a), _sort_key(b)
    return (key_a > key_b) - (key_a < key_b)


def is_newer(candidate: str, current: str) -> bool:
    """Return True if ``candidate`` has higher precedence than ``current``."""
    return compare(candidate, current) > 0


def latest(versions: Iterable[str]) -> str:
    """Return the version with the highest precedence.

    Raises:
        ValueError: If ``versions`` is empty.
    """
    return max(versions, key=_sort_key)
