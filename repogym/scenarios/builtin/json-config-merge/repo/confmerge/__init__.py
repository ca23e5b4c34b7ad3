"""Layered JSON configuration: defaults, then environment files, then local overrides."""

from confmerge.layers import ConfigError, get, load_files, load_layers
from confmerge.merge import deep_merge

__all__ = ["ConfigError", "deep_merge", "get", "load_files", "load_layers"]
