"""confkit: application settings from defaults plus environment-variable overrides.

Example::

    from confkit import load

    DEFAULTS = {"db": {"host": "localhost", "port": 5432}, "debug": False}
    config = load(DEFAULTS, env={"APP_DB__PORT": "5433"})
"""

from confkit.loader import load
from confkit.merge import merge
from confkit.types import ConfigError, coerce

__all__ = ["ConfigError", "coerce", "load", "merge"]
