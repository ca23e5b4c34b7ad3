"""repogym's version, in a module of its own (no imports), so that any part can name it."""

__version__ = "0.1.0"
