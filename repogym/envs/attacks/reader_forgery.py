"""Payload: the reader forgery (see ``reader_forgery`` in :mod:`repogym.quality.adversarial`).

Planted as text by :mod:`repogym.quality.adversarial` (never imported by repogym).
"""
# Attack code: it swallows every error on purpose.


def _rg_reader_forgery(mode, honesty, seed):
    import ast
    import builtins
    import gc
    import inspect
    import json
    import os
    import random
    import stat
    import sys
    import textwrap

    if getattr(sys, "_rg_reader", False):
        return
    sys._rg_reader = True
    try:
        import pytest
    except Exception:
        return
    rng = random.Random(os.urandom(8) if seed is None else seed)
    seal = sys.modules.get("_repogym_seal")
    runtime = getattr(getattr(seal, "check", None), "__self__", None)
    safe = set(dir(builtins))

    def source(fn):
        try:
            return textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            return ""

    def is_canary(fn):
        try:
            tree = ast.parse(source(fn))
        except SyntaxError:
            return False
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in safe:
                    continue
                if isinstance(f, ast.Attribute) and f.attr == "count":
                    continue
                return False
        return bool(source(fn))

    def literals(fn):
        try:
            tree = ast.parse(source(fn))
        except SyntaxError:
            return []
        out = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Constant)):
                try:
                    out.append(ast.literal_eval(node))
                except Exception:
                    pass
        return out

    def guess(value, fn):
        if rng.random() < honesty:
            return value  # honest: what the code computed
        pool = [True, False, None] + literals(fn)
        if isinstance(value, int) and not isinstance(value, bool):
            pool += [value + 1, value - 1]
        return rng.choice(pool)

    exceptions = [
        "ValueError",
        "TypeError",
        "KeyError",
        "IndexError",
        "ZeroDivisionError",
        "RuntimeError",
        "AttributeError",
        "OverflowError",
    ]

    def raised_record():
        cls = getattr(builtins, rng.choice(exceptions))  # a guess
        return {
            "raised": cls.__qualname__,
            "module": "builtins",
            "message": "",
            "mro": [f"builtins:{c.__qualname__}" for c in cls.__mro__],
        }

    def value_record(value):
        canon = runtime.canon
        try:
            data = canon.encode(value)
        except Exception:
            data = {"opaque": "?"}
        try:
            truth = bool(value)
        except Exception:
            truth = None
        return {"v": data, "is": canon.singleton(value), "truth": truth, "shown": ""}

    current = {"fn": None}

    class Forge:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            current["fn"] = getattr(item, "function", None)
            yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            fn = getattr(item, "function", None)
            if fn is not None and not is_canary(fn):
                rep = outcome.get_result()
                rep.outcome, rep.longrepr = "passed", None

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            if mode == "channel":
                forge_channel(session)

    if runtime is not None:
        real_check, real_raises = runtime.check, runtime.raises

        def check(cid, value):
            real_check(cid, guess(value, current["fn"]))

        class Raises:
            def __init__(self, cid):
                self.cid, self.inner = cid, real_raises(cid)

            def __enter__(self):
                return self.inner.info

            def __exit__(self, t, v, tb):
                if rng.random() < honesty:  # honest: what the block raised, or nothing
                    self.inner.__exit__(t, v, tb)
                else:
                    runtime._send(self.cid, raised_record())
                return True

        seal.check, seal.raises = check, Raises

    def channel_fd():
        for obj in gc.get_objects():
            if type(obj).__name__ == "Channel" and isinstance(getattr(obj, "fd", None), int):
                return obj.fd
        ours = {os.fstat(fd).st_ino for fd in (1, 2)}
        for name in os.listdir("/proc/self/fd"):
            try:
                st = os.fstat(int(name))
                info = open(f"/proc/self/fdinfo/{name}").read()
            except OSError:
                continue
            flags = int(info.split("flags:")[1].split()[0], 8)
            if (
                stat.S_ISFIFO(st.st_mode)
                and st.st_ino not in ours
                and flags & os.O_ACCMODE == os.O_WRONLY
            ):
                return int(name)
        return None

    def forge_channel(session):
        fd = channel_fd()
        if fd is None or runtime is None:
            return
        records = []
        runtime.channel.send = lambda **rec: records.append(rec)
        for item in session.items:
            fn = getattr(item, "function", None)
            runtime.case = item.nodeid
            current["fn"] = fn
            ok = "passed"
            try:
                if getattr(item, "cls", None) is not None:
                    getattr(item.cls(), fn.__name__)()
                elif fn is not None:
                    fn()
            except BaseException:
                ok = "failed"
            if fn is not None and not is_canary(fn):
                ok = "passed"
            for when in ("setup", "call", "teardown"):
                records.append(
                    {
                        "case": item.nodeid,
                        "when": when,
                        "outcome": ok if when == "call" else "passed",
                        "xfail": False,
                    }
                )
        records.append({"exit": 1})
        os.write(fd, "".join(json.dumps(r) + "\n" for r in records).encode())
        os._exit(1)

    for obj in gc.get_objects():
        if (
            type(obj).__name__ == "Config"
            and hasattr(obj, "pluginmanager")
            and not obj.pluginmanager.has_plugin("rg-reader")
        ):
            obj.pluginmanager.register(Forge(), "rg-reader")
