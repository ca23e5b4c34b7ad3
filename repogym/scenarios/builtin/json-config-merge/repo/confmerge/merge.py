"""Merging of nested configuration dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``override`` layered over ``base``.

    When both have a dict under the same key, the two dicts are merged the same
    way, to any depth, so an override only needs to mention the settings it
    changes::

        deep_merge({"db": {"host": "h", "port": 1}}, {"db": {"port": 2}})
        == {"db": {"host": "h", "port": 2}}

    Otherwise the value from ``override`` wins: lists and scalars are replaced,
    not combined, and a dict replaces a scalar (and vice versa). Neither input
    is modified.
    """
    result = dict(base)
    result.update(override)
    return result
