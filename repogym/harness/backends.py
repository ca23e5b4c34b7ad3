"""Old name of :mod:`repogym.harness.executors`, kept so that existing imports keep working.

The new module holds the harness's executors. This module is that module itself (one module
object under both names), so patching or reading an attribute through either name sees the
same thing.
"""

import sys

from repogym.harness import executors as _module

sys.modules[__name__] = _module
