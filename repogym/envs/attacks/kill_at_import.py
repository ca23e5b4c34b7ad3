"""Payload: the process kills itself with SIGKILL.

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""


def _rg_kill_at_import():
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
