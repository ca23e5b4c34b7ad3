"""Old name of :mod:`repogym.cli.printing`, kept so that existing imports keep working.

The new module holds the CLI's printing. This module is that module itself (one module
object under both names), so patching or reading an attribute through either name sees the
same thing.
"""

import sys

from repogym.cli import printing as _module

sys.modules[__name__] = _module
