"""pytest plugin of repogym's sandboxed test probe (runs inside the sandbox, stdlib only).

Loaded with ``-p rg_probe``; writes one JSON object per line to ``$RG_PROBE_OUT``:
``{"case": node id, "when": phase, "outcome": ..., "message": ...}`` per test phase,
``{"collect": node id}`` per collector that failed, ``{"seal": n, "case": node id, "got":
...}`` per value a sealed check reported (the grader's launcher's runtime),
``{"collected": [node id, ...]}`` and ``{"defined": {node id: "file:line", ...}}`` (where
each test's function is written) once collection is done and, with ``RG_PROBE_TRACE=1``,
``{"trace": node id, "spans": [[file, first line, last line], ...], "spawns": bool}``: the
functions of the working folder that each test called (numbered at import by
:mod:`rg_reach`, not traced), and whether it started another process (whose calls are not
seen); ``{"unhooked": [file, ...]}``: files of the working folder whose code ran without
being numbered (their changes reach every test); ``{"loading": spans}``: the functions
called before any test ran (at import: a module-level table built by a function), and,
with ``RG_PROBE_CALLS=<config.json>`` (``{"tests": [test file, ...]}``),
``{"calls": node id, "seq": [call, ...]}``: the calls each test made into the package, with
their arguments and outcomes (:mod:`rg_calls`). With ``RG_PROBE_MAXFAIL=n`` the run stops
once more than ``n`` tests failed. ``{"finished": exit status}`` ends a run that was not
killed. With ``RG_PROBE_ENV=<json object>`` the tests run with
that environment (the grader's), not the probe's.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

_out = None
_root = os.getcwd().rstrip("/") + "/"


def _send(**record: object) -> None:
    if _out is not None:
        _out.write(json.dumps(record) + "\n")
        _out.flush()


class _Channel:
    """The launcher's channel interface, onto the probe's output file."""

    @staticmethod
    def send(**record: object) -> None:
        _send(**record)


_seals = None


def _install_seals() -> None:
    """The sealed-check runtime the grader's launcher gives graded tests (its ``Seals``),
    so test files sealed as the grader seals them run here too."""
    global _seals
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:  # in a sandbox the runtime is copied beside this file; on the host it is repogym's
        import canon
        from launch import Seals
    except ImportError:
        try:
            from repogym.grading.launcher import canon
            from repogym.grading.launcher.launch import Seals
        except ImportError:
            return  # no sealed checks can run here (none were planted)
    finally:
        sys.path.remove(here)
    _seals = Seals(_Channel(), canon)
    sys.modules["_repogym_seal"] = _seals.module()


#: The probe's settings (``RG_PROBE_*``), read before the tests' environment replaces ours.
_conf: dict = {}

_reach = None
if os.environ.get("RG_PROBE_TRACE") == "1":
    # Installed as the plugin is imported, before any conftest imports the package: a
    # module imported earlier runs unnumbered (and is reported so).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import rg_reach as _reach
    finally:
        sys.path.pop(0)
    _reach.install(_root)


def pytest_configure(config) -> None:
    global _out
    _conf.update({k: v for k, v in os.environ.items() if k.startswith("RG_PROBE_")})
    _out = open(_conf["RG_PROBE_OUT"], "w", encoding="utf-8")
    _install_seals()
    if "RG_PROBE_ENV" in _conf:
        # The tests see the grader's environment (no PYTHONPATH, ...): a test that starts
        # ``python -m pkg`` gets what it gets when graded (this process's imports are set).
        os.environ.clear()
        os.environ.update(json.loads(_conf["RG_PROBE_ENV"]))


def pytest_runtest_logstart(nodeid, location) -> None:
    if _seals is not None:
        _seals.case = nodeid
        _seals.calls.clear()


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _seals is not None:
        _seals.finish()


def pytest_sessionfinish(session, exitstatus) -> None:
    _send(finished=int(exitstatus))


def pytest_unconfigure(config) -> None:
    global _out
    if _out is not None:
        _out.close()
        _out = None


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(report.longrepr or "")[-500:]


def pytest_runtest_logreport(report) -> None:
    _send(
        case=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        message=_message(report) if report.failed else "",
    )


def pytest_collectreport(report) -> None:
    if report.failed:
        _send(collect=report.nodeid)


def pytest_collection_finish(session) -> None:
    if _reach is not None:  # what ran before any test: imports, tables built at import
        _send(loading=_reach.take(modules=False)[0])
        _send_unhooked()
    _send(collected=[item.nodeid for item in session.items])
    _send(
        defined={item.nodeid: at for item in session.items if (at := _defined_at(item)) is not None}
    )


_failed: set = set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``RG_PROBE_MAXFAIL=n``, stop the session once more than ``n`` tests failed
    (a test a mixin gives several classes counts once, as synthesis counts it): such a
    mutant is dropped whatever the other tests do."""
    outcome = yield
    limit = _conf.get("RG_PROBE_MAXFAIL")
    if not limit or not outcome.get_result().failed:
        return
    _, bracket, params = item.nodeid.partition("[")
    _failed.add((_defined_at(item) or item.nodeid) + bracket + params)
    if len(_failed) > int(limit):
        item.session.shouldstop = f"rg_probe: over {limit} tests failed"


def _defined_at(item) -> str | None:
    """Where the test function of ``item`` is written (``file:line`` in the working folder),
    so that one method a mixin gives several test classes is known as one test."""
    fn = getattr(item, "function", None)
    while hasattr(fn, "__wrapped__"):  # a decorator's wrapper (hypothesis.given, ...)
        fn = fn.__wrapped__
    code = getattr(fn, "__code__", None)
    if code is None or not code.co_filename.startswith(_root):
        return None
    return f"{code.co_filename[len(_root) :]}:{code.co_firstlineno}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _conf.get("RG_PROBE_CALLS"):
        yield from _record_calls(item)
        return
    if _reach is None:
        yield
        return
    _reach.take()  # what ran between tests is no test's
    yield
    spans, spawns = _reach.take()
    _send(trace=item.nodeid, spans=spans, spawns=spawns)
    _send_unhooked()


_unhooked_sent = [0]


def _send_unhooked() -> None:
    """The files that ran unnumbered so far, when there are more than last sent."""
    if _reach is not None and len(_reach.unhooked) > _unhooked_sent[0]:
        _unhooked_sent[0] = len(_reach.unhooked)
        _send(unhooked=_reach.pending_unhooked())


def _record_calls(item):
    import rg_calls

    with open(_conf["RG_PROBE_CALLS"], encoding="utf-8") as f:
        config = json.load(f)
    recorder = rg_calls.Recorder(_root, set(config.get("tests", [])))
    previous = sys.gettrace()
    sys.settrace(recorder.trace)
    try:
        yield
    finally:
        sys.settrace(previous)
    _send(calls=item.nodeid, seq=recorder.calls)
