"""Payload: at exit, write passing records for every collected test to every pipe, then end
the process with ``code``.

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""


def _rg_pipe_records(code):
    import atexit

    def write():
        import gc
        import json
        import os
        import stat

        items = []
        for obj in gc.get_objects():
            if type(obj).__name__ == "Session" and getattr(obj, "items", None):
                items = [i.nodeid for i in obj.items]
        lines = [
            json.dumps({"case": n, "when": w, "outcome": "passed", "xfail": False})
            for n in items
            for w in ("setup", "call", "teardown")
        ]
        data = ("\n".join([*lines, json.dumps({"exit": code})]) + "\n").encode()
        for fd in range(3, 256):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, data)
            except OSError:
                pass
        os._exit(code)

    atexit.register(write)
