"""Old name of :mod:`repogym.scenarios.bug_reports`, kept so that existing imports keep working.

The new module holds bug reports (written from a diff). This module is that module itself
(one module object under both names), so patching or reading an attribute through either
name sees the same thing.
"""

import sys

from repogym.scenarios import bug_reports as _module

sys.modules[__name__] = _module
