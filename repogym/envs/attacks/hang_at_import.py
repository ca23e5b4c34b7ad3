"""Payload: sleep past the grading run's timeout.

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""


def _rg_hang_at_import():
    import time

    time.sleep(10**6)
