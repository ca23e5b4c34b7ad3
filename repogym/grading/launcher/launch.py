"""repogym's launcher of a grading run. It runs *inside* the grading sandbox, before any
workspace code.

The grader starts it with an environment built from scratch and an interpreter that reads
no ``PYTHON*`` variable, no user site and no ``site``/``.pth`` processing::

    python -s -S -P launch.py --site DIR... --ini FILE --conftests FILE -- PYTEST_ARGS...

It then makes these things true before pytest (or anything from the workspace) is imported:

1. **The standard library and the trusted sites come first, by construction.** ``sys.path``
   is the interpreter's standard library, then the trusted site folders (processed with
   ``site.addsitedir``), then the workspace last; and a finder placed before Python's own
   path finder resolves every top-level module that the standard library or a trusted site
   provides *only* from there. A ``json.py``, ``pytest/`` or ``_pytest`` in the workspace, or
   one that pytest's rootdir insertion puts first on ``sys.path``, is never imported.
2. **Configuration is the grader's.** pytest reads the grader's ini file only (``-c``), with
   ``--rootdir`` and ``--confcutdir`` at the workspace; plugin auto-loading is off (the
   grader sets ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``); a ``-p`` plugin must come from a
   trusted site; a ``conftest.py`` on the way to a test file must be one the grader lists
   (the pristine repository's or the hidden tests'), byte for byte, or nothing runs.
3. **Results travel on a channel the workspace's code cannot find by name.** The process's
   original standard output becomes the channel (a private descriptor, closed on exec);
   standard output is then pointed at standard error, where the human-readable log goes.
   One JSON object per line: ``{"case": ...}`` per test phase, ``{"collect": ...}`` per
   collector that failed or was skipped, ``{"refused": ...}`` when a rule above refused to run, and
   a final ``{"exit": N}``. Subprocesses the tests start, and processes left behind, never have it,
   and cannot take it either: the launcher makes itself non-dumpable
   (``prctl(PR_SET_DUMPABLE, 0)``), so a process of the same uid (a test's subprocess running
   the agent's code) can open neither ``/proc/<launcher>/fd/*`` nor ``/proc/<launcher>/mem``.
   (Only ``/proc/self/environ`` of the launcher itself becomes unreadable; ``exec`` makes
   children dumpable again.) The channel need not be secret: nothing on it can earn credit
   that the run did not earn, because credit rests on the sealed checks (4).
4. **Sealed checks report values, never verdicts.** The grader rewrote the hidden tests'
   literal assertions into calls of the module ``_repogym_seal`` (made here): ``check(n,
   value)`` sends the value the code computed, canonically encoded (``canon.py``), and
   ``raises(n)`` is a context manager that sends what its block raised: one exception's
   class (module and qualified name), that class's bases in order (its MRO) and its
   message. The expected values never enter the sandbox; the grader compares.

This file imports only the standard library until pytest is imported from a trusted site.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import reprlib
import site
import sys
import types

REFUSED = 4  # pytest's "usage error": the run did not happen
PR_SET_DUMPABLE = 4


class TrustedFinder(importlib.abc.MetaPathFinder):
    """Resolves top-level names that the trusted paths provide from those paths only."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = list(paths)

    def find_spec(self, name, path=None, target=None):
        if path is not None:
            return None  # a submodule: its parent package (already resolved) decides
        spec = importlib.machinery.PathFinder.find_spec(name, self.paths)
        if spec is not None and spec.loader is not None:
            return spec
        if name in sys.stdlib_module_names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class Channel:
    """Writes result records to the private descriptor, one JSON object per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **record: object) -> None:
        data = (json.dumps(record, ensure_ascii=True) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data) :]


def _load_canon():
    """``canon.py`` from this file's own folder (the grader's, never the workspace's)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "canon.py")
    spec = importlib.util.spec_from_file_location("_repogym_canon", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Longest ``shown`` text (the computed value's repr, for the log) a record carries.
SHOWN_CHARS = 1000
#: Distinct values sent per (test case, check): past it, one "overflow" record (which holds
#: against no expectation). A literal expectation in a loop repeats one value.
RECORDS_PER_CHECK = 256


class ExceptionInfo:
    """What a sealed ``raises`` block gives its ``as`` name (as ``pytest.raises`` does)."""

    def __init__(self) -> None:
        self.type = self.value = self.tb = None

    @property
    def typename(self) -> str:
        return self.type.__name__ if self.type else ""

    @property
    def exception(self):
        """The exception, as unittest's ``assertRaises`` context gives it."""
        return self.value

    def errisinstance(self, exc) -> bool:
        return isinstance(self.value, exc)

    def match(self, regexp) -> bool:
        import re

        assert re.search(regexp, str(self.value)), (
            f"Regex pattern did not match.\n Regex: {regexp!r}\n Input: {str(self.value)!r}"
        )
        return True


class Seals:
    """The sandbox's side of the sealed checks: report what the code computed."""

    def __init__(self, channel: Channel, canon) -> None:
        self.channel, self.canon = channel, canon
        self.case = ""
        self.sent: dict[tuple[str, int], set[str]] = {}
        self.calls: dict[int, int] = {}
        self.repr = reprlib.Repr()
        self.repr.maxstring = self.repr.maxother = 160

    def module(self) -> types.ModuleType:
        m = types.ModuleType("_repogym_seal", "Sealed checks (made by repogym's launcher).")
        m.check, m.raises, m.hold = self.check, self.raises, self.hold
        m.contains = self.contains
        m.handle, m.at, m.equal = _Handle, self.at, self.equal
        return m

    def equal(self, cid: int, value, other, left: bool) -> None:
        """``assert value == other`` (``other == value`` unless ``left``) whose ``value`` is
        also reported for gold check ``cid``: the equality with a local stays the test's."""
        self.check(cid, value)
        assert (value == other) if left else (other == value)

    def contains(self, cid: int, value) -> None:
        """Report what a hidden text is looked for in (``assert "<h1>" in value``) for check
        ``cid``: a text or a container as it is; another iterable (a cache, a tree's
        children) as the list of its items, which is what ``in`` searches in it."""
        if not isinstance(value, str | bytes | list | tuple | set | frozenset | dict):
            try:
                if hasattr(value, "__iter__"):
                    value = list(value)
            except Exception:  # an iteration that fails is the code's own: sent as it was
                pass
        self.check(cid, value)

    def at(self, expected, use: int, value):
        """In an expectation helper, where it compares ``value`` with ``expected``: for a
        handle (a sealed call passed one), report ``value`` for that use's check and give
        what the comparison accepts; for any other argument, ``value`` itself."""
        if type(expected) is not _Handle:
            return value
        self.check(expected.cids[use], value)
        return _MET

    @staticmethod
    def hold(value) -> None:
        """An ordinary assertion (the unsealed part of ``assert a and b``)."""
        assert value

    def finish(self) -> None:
        """Report how often each check of the test case that ends was reached."""
        for cid, n in sorted(self.calls.items()):
            self.channel.send(seal=cid, case=self.case, got={"calls": n})
        self.calls.clear()
        self.case = ""

    def _send(self, cid: int, got: dict) -> None:
        key = (self.case, int(cid))
        self.calls[int(cid)] = self.calls.get(int(cid), 0) + 1
        text = self.canon.dumps(got)
        seen = self.sent.setdefault(key, set())
        if text in seen:
            return
        if len(seen) >= RECORDS_PER_CHECK:
            got = {"overflow": True}
            text = self.canon.dumps(got)
            if text in seen:
                return
        seen.add(text)
        self.channel.send(seal=int(cid), case=self.case, got=got)

    def _shown(self, value) -> str:
        try:
            return self.repr.repr(value)
        except Exception as e:  # a broken __repr__ is the code's own
            return f"<{type(value).__name__}: repr failed: {type(e).__name__}>"

    def check(self, cid: int, value) -> None:
        """Report ``value`` for sealed check ``cid``."""
        try:
            data = self.canon.encode(value)
        except Exception as e:  # e.g. a set whose items cannot be ordered
            data = {"opaque": f"{type(value).__qualname__} ({type(e).__name__})"}
        try:
            truth = bool(value)
        except Exception:  # e.g. an array's ambiguous truth value
            truth = None
        got = {
            "is": self.canon.singleton(value),
            "truth": truth,
            "shown": self._shown(value)[:SHOWN_CHARS],
        }
        text = self.canon.dumps(data)
        if len(text) > self.canon.VALUE_BYTES:
            got["digest"] = self.canon.digest(data)
        else:
            got["v"] = data
        self._send(cid, got)

    def raises(self, cid: int) -> _Raises:
        """A context manager that reports what its block raised for sealed check ``cid``."""
        return _Raises(self, int(cid))


class _Handle:
    """What a sealed call passes an expectation helper instead of the expected value."""

    __slots__ = ("cids",)

    def __init__(self, *cids: int) -> None:
        self.cids = tuple(int(c) for c in cids)

    def __repr__(self) -> str:
        return "<sealed>"


class _Met:
    """Equal to anything: the comparison of a reported check is the grader's to make."""

    __hash__ = None

    def __eq__(self, other) -> bool:
        return True

    def __ne__(self, other) -> bool:
        return False

    def __repr__(self) -> str:
        return "<sealed>"


_MET = _Met()


class _Raises:
    def __init__(self, seals: Seals, cid: int) -> None:
        self.seals, self.cid, self.info = seals, cid, ExceptionInfo()

    def __enter__(self) -> ExceptionInfo:
        return self.info

    def __exit__(self, etype, value, tb) -> bool:
        if etype is None:
            self.seals._send(self.cid, {"raised": None, "message": ""})
            return False
        if issubclass(etype, KeyboardInterrupt) or (
            not issubclass(etype, Exception | SystemExit) and etype.__module__.startswith("_pytest")
        ):
            return False  # skip, fail, exit and ^C keep their meaning, as in pytest.raises
        try:
            message = str(value)
        except Exception as e:
            message = f"<str() failed: {type(e).__name__}>"
        canon = self.seals.canon
        # exactly one exception: its class and that class's bases (the grader accepts it when
        # the chain holds an expected class; it never takes a list of candidates)
        self.seals._send(
            self.cid,
            {
                "raised": _text(etype.__qualname__),
                "module": _text(etype.__module__),
                "mro": [
                    f"{_text(c.__module__)}:{_text(c.__qualname__)}"
                    for c in etype.__mro__[: canon.MAX_MRO]
                ],
                "message": message[: canon.MESSAGE_CHARS],
            },
        )
        self.info.type, self.info.value, self.info.tb = etype, value, tb
        return True


def _text(name: object) -> str:
    """A class's ``__module__`` or ``__qualname__`` as text (a class may set either to
    anything)."""
    return name[:256] if isinstance(name, str) else "?"


class Reporter:
    """The pytest plugin object (registered by object, not importable by name)."""

    def __init__(self, channel: Channel, seals: Seals) -> None:
        self.channel, self.seals = channel, seals

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.seals.case = nodeid
        self.seals.calls.clear()

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.seals.finish()

    def pytest_runtest_logreport(self, report) -> None:
        self.channel.send(
            case=report.nodeid,
            when=report.when,
            outcome=report.outcome,
            xfail=bool(getattr(report, "wasxfail", None) is not None),
        )

    def pytest_collectreport(self, report) -> None:
        if report.failed or report.skipped:
            self.channel.send(collect=report.nodeid, outcome=report.outcome)


def _not_dumpable() -> str | None:
    """Make this process non-dumpable (see the module docstring); the error, if any."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}"
    except (ImportError, OSError, AttributeError) as e:
        return f"cannot make the grading run non-dumpable: {e}"
    return None


def _take_stdout() -> Channel:
    fd = os.dup(1)
    os.set_inheritable(fd, False)
    os.dup2(2, 1)
    return Channel(fd)


def _conftest_problem(allowed: dict[str, str], root: str, targets: list[str]) -> str | None:
    """A conftest.py pytest would load on the way to ``targets`` that is not in ``allowed``."""
    dirs = {root}
    for t in targets:
        path = os.path.normpath(os.path.join(root, t.split("::")[0]))
        d = path if os.path.isdir(path) else os.path.dirname(path)
        while d.startswith(root):
            dirs.add(d)
            if d == root:
                break
            d = os.path.dirname(d)
    for d in sorted(dirs):
        path = os.path.join(d, "conftest.py")
        rel = os.path.relpath(path, root)
        if not os.path.lexists(path):
            continue
        if os.path.islink(path) or not os.path.isfile(path):
            return f"{rel} is not a regular file"
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if allowed.get(rel) != digest:
            return f"{rel} is not the repository's or the hidden tests' conftest.py"
    return None


def main(argv: list[str]) -> int:
    hardening_error = _not_dumpable()
    channel = _take_stdout()
    if hardening_error:
        channel.send(refused="launcher", why=hardening_error)
        return REFUSED
    p = argparse.ArgumentParser(prog="launch.py")
    p.add_argument("--site", action="append", default=[])
    p.add_argument("--ini", required=True)
    p.add_argument("--conftests", required=True)
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    pytest_args = [a for a in args.pytest_args if a != "--"]
    root = os.getcwd()
    sys.dont_write_bytecode = True
    for d in [*site.getsitepackages(), *args.site]:
        if os.path.isdir(d):
            site.addsitedir(d)
    trusted = [p for p in sys.path if p and os.path.abspath(p) != root]
    finder = TrustedFinder(trusted)
    at = next(
        (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
        len(sys.meta_path),
    )
    sys.meta_path.insert(at, finder)
    sys.path.append(root)

    with open(args.conftests, encoding="utf-8") as f:
        allowed = json.load(f)
    targets = [a for a in pytest_args if not a.startswith("-")]
    if problem := _conftest_problem(allowed, root, targets):
        channel.send(refused="conftest", why=problem)
        return REFUSED
    for i, a in enumerate(pytest_args):
        name = pytest_args[i + 1] if a == "-p" and i + 1 < len(pytest_args) else None
        if (
            name
            and not name.startswith("no:")
            and importlib.machinery.PathFinder.find_spec(name.split(".")[0], trusted) is None
        ):
            channel.send(refused="plugin", why=f"-p {name}: not installed in a trusted site")
            return REFUSED

    seals = Seals(channel, _load_canon())
    sys.modules["_repogym_seal"] = seals.module()

    import pytest

    code = pytest.main(
        [
            "-c",
            args.ini,
            f"--rootdir={root}",
            f"--confcutdir={root}",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            *pytest_args,
        ],
        plugins=[Reporter(channel, seals)],
    )
    code = int(code)
    channel.send(exit=code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
