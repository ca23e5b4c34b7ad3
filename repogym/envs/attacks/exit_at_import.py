"""Payload: end the process with ``os._exit(code)`` as soon as the code is imported.

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""


def _rg_exit_at_import(code):
    import os

    os._exit(code)
