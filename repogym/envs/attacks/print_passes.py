"""Payload: at exit, print ``PASSED <node id>`` for every collected test (fools log parsers).

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""


def _rg_print_passes():
    import atexit

    def write():
        import gc
        import sys

        for obj in gc.get_objects():
            if type(obj).__name__ == "Session" and getattr(obj, "items", None):
                for i in obj.items:
                    sys.__stdout__.write(f"PASSED {i.nodeid}\n")
                    sys.__stderr__.write(f"PASSED {i.nodeid}\n")

    atexit.register(write)
