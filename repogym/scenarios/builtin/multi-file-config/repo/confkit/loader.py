"""Loading the effective configuration from defaults and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from confkit.merge import merge
from confkit.types import ConfigError, coerce

SEPARATOR = "__"


def load(
    defaults: dict[str, Any],
    env: Mapping[str, str] | None = None,
    prefix: str = "APP_",
) -> dict[str, Any]:
    """Return ``defaults`` with the environment's overrides applied.

    A variable named ``prefix`` + path overrides one setting; ``__`` separates nesting levels
    and names are case-insensitive, so ``APP_DB__PORT=5433`` sets ``config["db"]["port"]``.
    Each value is converted to the type of the default it replaces (see ``coerce``).
    Variables without the prefix are ignored. Neither ``defaults`` nor ``env`` is modified.

    Args:
        defaults: Every known setting with its default value (nested dicts for sections).
        env: The environment to read; ``os.environ`` when None.
        prefix: The prefix that marks a variable as a setting.

    Raises:
        ConfigError: For a variable naming an unknown setting or a whole section, or a value
            that cannot be converted.
    """
    env = os.environ if env is None else env
    overrides: dict[str, Any] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(prefix):
            continue
        path = name[len(prefix):].lower().split(SEPARATOR)
        default = _lookup(defaults, path, name)
        _assign(overrides, path, coerce(raw, default, name))
    return merge(defaults, overrides)


def _lookup(defaults: dict[str, Any], path: list[str], name: str) -> Any:
    """The default value at ``path``; ConfigError if there is no such setting."""
    node: Any = defaults
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise ConfigError(f"{name}: unknown setting {'.'.join(path)!r}")
        node = node[key]
    if isinstance(node, dict):
        raise ConfigError(f"{name}: {'.'.join(path)!r} is a section, not a setting")
    return node


def _assign(tree: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``tree[path[0]][path[1]]...`` to ``value``, creating sections as needed."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value
