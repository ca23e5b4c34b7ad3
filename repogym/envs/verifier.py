"""Old name of :mod:`repogym.envs.grading_run`, kept so that existing imports keep working.

The new module holds a grading run's launch, channel and verdict. This module is that module
itself (one module object under both names), so patching or reading an attribute through
either name sees the same thing.
"""

import sys

from repogym.envs import grading_run as _module

sys.modules[__name__] = _module
