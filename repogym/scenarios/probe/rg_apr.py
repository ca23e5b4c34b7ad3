"""The ``apr`` agent's helper inside the sandbox (standard library only; never imported).

The agent (:mod:`repogym.harness.baselines.apr`) writes this file and the task's reproduction
script to ``/tmp/rg-apr/`` with the env's ``write`` tool and runs it with ``bash`` from the
repository root:

- ``python rg_apr.py trace``: runs the reproduction once plainly (exit code, duration) and
  once under a tracer, and reports the traceback's frames in repository files, the
  repository functions it called (in the order of their last call), the lines it ran and
  the text of the files those lines are in;
- ``python rg_apr.py chunk N``: the N-th piece of the last report (reports are zlib- and
  base64-encoded and cut into pieces that fit in one observation);
- ``python rg_apr.py search START SECONDS TIMEOUT [tests]``: applies the candidate edit
  sets of ``candidates.json`` from index START, one at a time, runs the reproduction after
  each (TIMEOUT seconds at most) and puts the files back; the first set with which it
  exits 0 (and, with ``tests``, breaks none of the repository's own tests that passed
  before) is left applied. It stops after SECONDS and says where to go on.

Files are restored from ``orig/`` at the start of every search, so a search killed between
an edit and its undo leaves nothing behind.
"""

import ast
import base64
import hashlib
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import types
import zlib

HOME = os.path.dirname(os.path.abspath(__file__))
REPRO = os.path.join(HOME, "reproduction.py")
REPORT = os.path.join(HOME, "report.b64")
CANDIDATES = os.path.join(HOME, "candidates.json")
ORIG = os.path.join(HOME, "orig")
BASELINE = os.path.join(HOME, "tests-baseline.json")
ZYGOTE = os.path.join(HOME, "zygote.json")
#: A forked run's exit code when the edit could not be patched into the loaded code.
NOT_PATCHED = 97
CHUNK = 12000
#: Seconds the reproduction may run in each of the two runs of ``trace``.
TRACE_S = 25
#: A repository test suite slower than this is not run to check a candidate.
TESTS_BUDGET_S = 30.0
ROOT = os.getcwd()


def emit(data):
    """Store ``data`` as the report and print its first piece."""
    blob = base64.b64encode(zlib.compress(json.dumps(data).encode(), 9)).decode()
    with open(REPORT, "w") as f:
        f.write(blob)
    chunk(0)


def chunk(n):
    with open(REPORT) as f:
        blob = f.read()
    total = (len(blob) + CHUNK - 1) // CHUNK
    print(f"RGAPR-CHUNK {n} {total} {blob[n * CHUNK : (n + 1) * CHUNK]}")


def env():
    out = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out["PYTHONPATH"] = ROOT + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH") else "")
    return out


def run_repro(timeout):
    start = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "repro"],
            check=False,
            cwd=ROOT,
            env=env(),
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        code, out = res.returncode, res.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        code, out = None, "timed out"
    return code, out[-2000:], time.monotonic() - start


def run_reproduction():
    """Run the reproduction in this process as the statement says to run it: as
    ``reproduction.py`` at the repository root (``__file__`` there, so a script that puts
    ``dirname(__file__)/src`` on ``sys.path`` finds a src-layout package), while its code
    keeps this folder's file name, so its own frames are never taken for repository ones."""
    with open(REPRO, encoding="utf-8") as f:
        code = compile(f.read(), REPRO, "exec")
    if sys.path and sys.path[0] == HOME:
        sys.path[0] = ROOT  # not this helper's folder: the repository, as for the script
    elif ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    sys.argv = [os.path.join(ROOT, "reproduction.py")]
    exec(
        code,
        {
            "__name__": "__main__",
            "__file__": sys.argv[0],  # run as the script itself
            "__builtins__": __builtins__,
        },
    )


def workspace_file(path):
    path = os.path.abspath(path)
    return path.startswith(ROOT + os.sep) and not path.startswith(HOME + os.sep)


def rel(path):
    return os.path.relpath(os.path.abspath(path), ROOT)


def _alarm(signum, frame):
    raise TimeoutError(f"the traced reproduction ran past {TRACE_S}s")


def trace():
    code, output, duration = run_repro(TRACE_S)
    calls, lines, order = {}, {}, [0]

    def local(frame, event, arg):
        if event == "line":
            lines.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return local

    def tracer(frame, event, arg):
        if event != "call" or not workspace_file(frame.f_code.co_filename):
            return None
        c = frame.f_code
        key = (c.co_filename, c.co_firstlineno, c.co_name)
        order[0] += 1
        n = calls.get(key, (0, 0))[1]
        calls[key] = (order[0], n + 1)
        lines.setdefault(c.co_filename, set()).add(frame.f_lineno)
        return local

    sys.dont_write_bytecode = True
    error, frames = None, []
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TRACE_S)
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        run_reproduction()
    except SystemExit as e:
        if e.code not in (None, 0):
            error = f"SystemExit: {e.code}"
    except BaseException as e:  # the reproduction's failure is the report
        error = "".join(traceback.format_exception_only(type(e), e)).strip()
        chain = [e]  # the error it was raised from first, as the traceback prints them
        while (
            cause := chain[0].__cause__ or chain[0].__context__
        ) is not None and cause not in chain:
            chain.insert(0, cause)
        frames = [
            [rel(f.filename), f.lineno, f.name]
            for x in chain
            for f in traceback.extract_tb(x.__traceback__)
            if workspace_file(f.filename)
        ]
    finally:
        sys.settrace(None)
        threading.settrace(None)
        signal.alarm(0)
    loaded = [
        [name, rel(m.__file__)]
        for name, m in list(sys.modules.items())
        if isinstance(getattr(m, "__file__", None), str) and workspace_file(m.__file__)
    ]
    with open(ZYGOTE, "w") as f:
        json.dump({"path": list(sys.path), "modules": loaded}, f)
    sources = {}
    for path in lines:
        try:
            sources[rel(path)] = read(path)
        except (OSError, UnicodeDecodeError):
            continue
    emit(
        {
            "exit_code": code,
            "output": output,
            "duration_s": duration,
            "error": error,
            "frames": frames,
            "sources": sources,
            "calls": sorted(
                [
                    [rel(k[0]), k[1], k[2], v[0], v[1]]
                    for k, v in calls.items()
                    if rel(k[0]) in sources
                ],
                key=lambda c: -c[3],
            ),
            "lines": {rel(p): sorted(v) for p, v in lines.items() if rel(p) in sources},
            "test_files": test_files(),
        }
    )


def test_files():
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        out += [
            rel(os.path.join(folder, f))
            for f in files
            if f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py"))
        ]
    return sorted(out)


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def restore(originals):
    for path, text in originals.items():
        if read(os.path.join(ROOT, path)) != text:
            write(os.path.join(ROOT, path), text)


def originals(files):
    """The pristine text of ``files`` (path -> sha256), saved on first use."""
    out = {}
    for path, digest in files.items():
        saved = os.path.join(ORIG, path)
        if not os.path.isfile(saved):
            text = read(os.path.join(ROOT, path))
            if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
                raise SystemExit(f"RGAPR-ERROR {path} changed since it was read")
            os.makedirs(os.path.dirname(saved), exist_ok=True)
            write(saved, text)
        out[path] = read(saved)
    return out


def apply(texts, edits):
    """``texts`` (path -> text) with ``edits`` ([path, start, end, new, ...]) made."""
    out = dict(texts)
    for path, start, end, new, *_ in sorted(edits, key=lambda e: (e[0], -e[1])):
        out[path] = out[path][:start] + new + out[path][end:]
    return out


# -- forked runs: the package imported once, each edit patched into its functions' code ----
class Zygote:
    """The package imported once, as the reproduction imports it; :meth:`run` forks, swaps
    the code of the edited functions for their edited code (no file is written, no module
    is re-executed) and runs the reproduction in the child. Used only where a fresh
    interpreter would see the same program: an edit inside a function body whose code
    object can be swapped (a changed default, a closure whose free variables change, or a
    function the module does not hold as an object fall back to a fresh interpreter)."""

    def __init__(self, texts):
        with open(ZYGOTE) as f:
            data = json.load(f)
        sys.path[:] = data["path"]
        sys.argv = [os.path.join(ROOT, "reproduction.py")]
        self.texts, self.modules, self.old, self.roots, self.live = texts, {}, {}, {}, {}
        for name, path in data["modules"]:
            module = importlib.import_module(name)
            if path in texts and os.path.abspath(getattr(module, "__file__", "")) == os.path.join(
                ROOT, path
            ):
                self.modules[path] = module
                self.old[path] = _code_index(compile(texts[path], module.__file__, "exec"))
                self.roots[path] = _roots(texts[path])
                self.live[path] = _functions(module)

    def run(self, edits, timeout):
        """The reproduction's exit code with ``edits`` patched in (None: timed out;
        NOT_PATCHED: they cannot be patched, run a fresh interpreter)."""
        if any(
            e[5] == "wrong_default" or e[0] not in self.modules or e[4] not in self.roots[e[0]]
            for e in edits
        ):
            return NOT_PATCHED
        pid = os.fork()
        if pid == 0:
            _child(self, edits)
        return _wait(pid, timeout)

    def patch(self, edits):
        """Swap in the edited code of each function ``edits`` touch (raises when one cannot
        be swapped)."""
        for path, root in sorted({(e[0], e[4]) for e in edits}):
            start, end, header, pad = self.roots[path][root]
            own = [
                [e[0], e[1] - start, e[2] - start, e[3]]
                for e in edits
                if (e[0], e[4]) == (path, root)
            ]
            segment = apply({path: self.texts[path][start:end]}, own)[path]
            module = self.modules[path]
            fresh = _code_index(compile("\n" * pad + header + segment, module.__file__, "exec"))
            olds, news = self.old[path].get(root, []), fresh.get(root, [])
            if not olds or len(olds) != len(news):
                raise LookupError(root)
            for old, code in zip(olds, news, strict=True):
                targets = self.live[path].get((root, old.co_firstlineno), [])
                if not targets and old.co_code != code.co_code:
                    raise LookupError(root)
                for fn in targets:
                    fn.__code__ = code  # ValueError when its free variables differ


def _wait(pid, timeout):
    """The exit code of child ``pid`` (None: killed after ``timeout`` seconds)."""

    def expired(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except TimeoutError:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, 9)):
            try:
                kill()
                break
            except OSError:
                continue
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _roots(text):
    """Outermost function qualname -> (start offset, end offset, the headers of its classes,
    blank lines that put its first line where it is in ``text``)."""
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = {}

    def walk(body, classes):
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, [*classes, node])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                header = "".join(
                    re.match(r"[ \t]*", lines[c.lineno - 1]).group() + f"class {c.name}:\n"
                    for c in classes
                )
                qual = ".".join([*(c.name for c in classes), node.name])
                end = starts[min(node.end_lineno, len(lines))]
                out.setdefault(qual, (starts[first - 1], end, header, first - 1 - len(classes)))

    walk(ast.parse(text).body, [])
    return out


def _child(zygote, edits):
    code = 1
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            zygote.patch(edits)
        except Exception:  # any failure to patch: a fresh interpreter decides
            os._exit(NOT_PATCHED)
        try:
            run_reproduction()
            code = 0
        except SystemExit as e:
            code = 0 if e.code in (None, 0) else 1
        except BaseException:  # the reproduction failed
            code = 1
    finally:
        os._exit(code)


def _code_index(code):
    """co_qualname -> the code objects of that name under ``code``, in source order."""
    out = {}
    stack = [code]
    while stack:
        c = stack.pop(0)
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                out.setdefault(const.co_qualname, []).append(const)
                stack.append(const)
    for codes in out.values():
        codes.sort(key=lambda c: c.co_firstlineno)
    return out


def _functions(module):
    """(co_qualname, first line) -> the function objects of ``module``'s file that the
    module holds (module functions, methods, static/class methods, properties, wrapped)."""
    out, seen, stack = {}, set(), list(vars(module).values())
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            stack += list(vars(obj).values())
        elif isinstance(obj, staticmethod | classmethod):
            stack.append(obj.__func__)
        elif isinstance(obj, property):
            stack += [f for f in (obj.fget, obj.fset, obj.fdel) if f is not None]
        elif isinstance(obj, types.FunctionType):
            if obj.__code__.co_filename == module.__file__:
                key = (obj.__code__.co_qualname, obj.__code__.co_firstlineno)
                out.setdefault(key, []).append(obj)
            if hasattr(obj, "__wrapped__"):
                stack.append(obj.__wrapped__)
        elif hasattr(obj, "__wrapped__") and callable(obj):
            stack.append(obj.__wrapped__)
    return out


def failing_tests(timeout):
    """The repository tests that fail now (None: the suite did not finish in time)."""
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *test_files()],
            check=False,
            cwd=ROOT,
            env=env(),
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except subprocess.TimeoutExpired:
        return None
    text = res.stdout.decode("utf-8", "replace")
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.MULTILINE)))


def tests_baseline():
    if os.path.isfile(BASELINE):
        with open(BASELINE) as f:
            return json.load(f)
    start = time.monotonic()
    failing = failing_tests(TESTS_BUDGET_S)
    data = {"failing": failing, "duration_s": time.monotonic() - start}
    with open(BASELINE, "w") as f:
        json.dump(data, f)
    return data


def search(start, seconds, timeout, check_tests):
    deadline = time.monotonic() + seconds
    with open(CANDIDATES) as f:
        spec = json.load(f)
    texts = originals(spec["files"])
    restore(texts)
    base = tests_baseline() if check_tests and test_files() else None
    edits, sets = spec["edits"], spec["sets"]
    try:
        zygote = Zygote(texts) if hasattr(types.CodeType, "co_qualname") else None
    except Exception:  # the package does not import here: fresh runs only
        zygote = None
    i, rejected, forked = start, 0, 0
    while i < len(sets) and time.monotonic() < deadline:
        chosen = [edits[k] for k in sets[i]]
        quick = zygote.run(chosen, timeout) if zygote is not None else NOT_PATCHED
        forked += quick != NOT_PATCHED
        if quick in (NOT_PATCHED, 0) and try_in_files(texts, chosen, timeout, base):
            print(
                "RGAPR "
                + json.dumps(
                    {"found": i, "next": i + 1, "forked": forked, "rejected_by_tests": rejected}
                )
            )
            return
        rejected += quick == 0
        i += 1
    key = "exhausted" if i >= len(sets) else "next"
    print(
        "RGAPR " + json.dumps({key: i, "next": i, "forked": forked, "rejected_by_tests": rejected})
    )


def try_in_files(texts, chosen, timeout, base):
    """Write ``chosen`` into the files and run the reproduction in a fresh interpreter (and
    the repository's tests, with ``base``); keep the edit when it passes, else undo it."""
    new = apply(texts, chosen)
    ok = False
    try:
        for path in sorted({e[0] for e in chosen}):
            write(os.path.join(ROOT, path), new[path])
        code, _, _ = run_repro(timeout)
        ok = code == 0
        if ok and base is not None and base["failing"] is not None:
            now = failing_tests(max(TESTS_BUDGET_S, 3 * base["duration_s"]))
            ok = now is not None and set(now) <= set(base["failing"])
    finally:
        if not ok:
            restore(texts)
    return ok


def main(argv):
    os.makedirs(HOME, exist_ok=True)
    if argv[:1] == ["trace"]:
        trace()
    elif argv[:1] == ["repro"]:
        run_reproduction()
    elif argv[:1] == ["chunk"]:
        chunk(int(argv[1]))
    elif argv[:1] == ["search"]:
        search(int(argv[1]), float(argv[2]), float(argv[3]), argv[4:5] == ["tests"])
    else:
        raise SystemExit(
            "usage: rg_apr.py trace | repro | chunk N | search START SECONDS TIMEOUT [tests]"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
