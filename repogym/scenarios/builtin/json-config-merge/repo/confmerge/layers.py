"""Loading configuration from several JSON layers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration layer is not valid."""


def load_layers(texts: Iterable[str]) -> dict[str, Any]:
    """Parse JSON documents and merge them in order.

    Each document must be a JSON object. Later layers override earlier ones;
    nested sections are merged key by key as described in
    :func:`confmerge.merge.deep_merge`.

    Raises:
        ConfigError: If a layer is not a JSON object.
    """
    config: dict[str, Any] = {}
    for index, text in enumerate(texts):
        layer = json.loads(text)
        if not isinstance(layer, dict):
            raise ConfigError(f"layer {index} must be a JSON object, got {type(layer).__name__}")
        config.update(layer)
    return config


def load_files(paths: Iterable[str | Path], missing_ok: bool = False) -> dict[str, Any]:
    """Read JSON files in order and merge them like :func:`load_layers`.

    Args:
        paths: The files, lowest priority first (e.g. defaults, production, local).
        missing_ok: Skip files that do not exist instead of raising.
    """
    texts = []
    for path in map(Path, paths):
        if missing_ok and not path.exists():
            continue
        texts.append(path.read_text(encoding="utf-8"))
    return load_layers(texts)


def get(config: Mapping[str, Any], dotted_key: str, default: Any = None) -> Any:
    """Return the setting at ``dotted_key`` (``"db.pool.size"``), or ``default``."""
    node: Any = config
    for part in dotted_key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node
