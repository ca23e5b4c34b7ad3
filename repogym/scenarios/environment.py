"""Old name of :mod:`repogym.scenarios.dependencies`, kept so that existing imports keep working.

The new module holds a task's dependencies (the packages its repository needs). This module
is that module itself (one module object under both names), so patching or reading an
attribute through either name sees the same thing.
"""

import sys

from repogym.scenarios import dependencies as _module

sys.modules[__name__] = _module
