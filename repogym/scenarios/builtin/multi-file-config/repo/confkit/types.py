"""Converting raw environment strings to the types of the defaults they override."""

from __future__ import annotations

from typing import Any

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class ConfigError(ValueError):
    """A setting is unknown or its value cannot be converted."""


def coerce(raw: str, default: Any, name: str = "value") -> Any:
    """Convert ``raw`` to the type of ``default``.

    Args:
        raw: The string read from the environment.
        default: The default value the string overrides; its type decides the conversion.
        name: The variable's name, used in error messages.

    Returns:
        ``True``/``False`` for a bool default (accepting, case-insensitively, the words in
        ``TRUE_WORDS`` and ``FALSE_WORDS``), an ``int`` or ``float`` for numeric defaults,
        and ``raw`` unchanged otherwise.

    Raises:
        ConfigError: If ``raw`` cannot be converted.
    """
    try:
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, bool):
            word = raw.strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
            raise ValueError(word)
        if isinstance(default, float):
            return float(raw)
    except ValueError as exc:
        kind = type(default).__name__
        raise ConfigError(f"{name}: cannot convert {raw!r} to {kind}") from exc
    return raw
