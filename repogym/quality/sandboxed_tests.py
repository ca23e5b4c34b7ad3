"""A package's own tests run in the sandbox, with its dependencies (``repogym synth --pypi``).

:class:`SandboxRunner` is a :class:`repogym.scenarios.synth.TestRunner` for code that is
not yours (a PyPI download): every run starts a fresh sandbox from one template of the
pristine package, writes in the files that differ from it (the mutant), and runs pytest
with the package's dependencies, plugin auto-loading off and the grader's configuration
(only ``ini_options``, as the grader writes it), so what synthesis sees is what grading
will see. Per-test outcomes and failure messages come from a small plugin
(``probe/rg_probe.py``) as JSON lines; paths inside the sandbox are removed from messages.

The first run (:meth:`SandboxRunner.collect`) also records which functions each test calls;
a second one runs the test files masked as the grader masks hidden tests (renamed, with
canaries) and keeps only the tests that still pass (one that depends on its own name, e.g.
a reference file named after it, cannot be a hidden test), and a third only collects. A
parametrized test whose ids differ between the three runs is left out whole: its ids follow
something that changes from one process to the next (isodate parametrizes over a set of
tuples, one holding ``None``, whose hash in Python 3.11 is its address), so an id listed
today names another case, or nothing, in the next grading.
A later run with changed files reruns only the tests that called a function whose lines
changed (every test when a change lies outside any function, or in one that ran before
any test did, at import: python-slugify builds a module-level table with a function), and
every test that started
another process (its child's calls are not traced): a test that never reaches the change
passes as it did on the pristine package, and is reported so without running.
Candidates found this way are then graded for real by ``repogym validate``.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import os
import random
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from repogym.grading.canaries import Masked, mask_test_file
from repogym.grading.grading_run import LAUNCHER_DIR, ini_text, launcher_env
from repogym.grading.seal import judge_case
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.base import WORKSPACE, ExecResult, PackageSite, Sandbox, SandboxError
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.patches import is_test_file
from repogym.scenarios.pypi import MARK_PLUGINS
from repogym.scenarios.synth import PROBE_DIR, SynthError, calls_of, probe_records
from repogym.scenarios.task import PLUGIN_OPTIONS

_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_UNKNOWN_MARK = re.compile(r"PytestUnknownMarkWarning: Unknown pytest\.mark\.(\w+)")
_OUT = "/tmp/rg-probe.jsonl"
_LOG = "/tmp/rg-probe.log"
#: Largest probe output read back (a traced run of a large suite writes tens of megabytes).
_MAX_RECORDS_BYTES = 512 << 20
#: The first run (the package's functions numbered) and a run recording calls (traced)
#: may take this many times the timeout of a plain run.
TRACE_SLOWDOWN = 4
#: A mutant's run is stopped once it takes this many times a run of every listed test on
#: the pristine package (at least :data:`MUTANT_MIN_S`): a mutant that loops would hold
#: the whole timeout (pyrsistent: 300 s a mutant, against 17 s for the suite).
MUTANT_SLOWDOWN = 5
MUTANT_MIN_S = 60.0
#: Past this many selected tests, their files are run instead of their ids (one shell word
#: is limited to 128 KiB).
_MAX_IDS = 800
_SKIP_DIRS = {
    ".git",
    ".tox",
    ".nox",
    "build",
    "dist",
    "docs",
    "doc",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
    "benchmarks",
    "bench",
}


def test_files(root: Path) -> list[str]:
    """The package's test files (``test_*.py``/``*_test.py``), outside build and docs folders."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if not _SKIP_DIRS & set(rel.parts[:-1]) and is_test_file(str(rel)):
            out.append(str(rel))
    return out


def statuses(records: list[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """(node id -> passed/failed/error/skipped, node id -> failure message) from probe records."""
    phases: dict[str, dict[str, tuple[str, str]]] = {}
    for r in records:
        if isinstance(r.get("case"), str):
            phases.setdefault(r["case"], {})[str(r.get("when"))] = (
                str(r.get("outcome")),
                str(r.get("message", "")),
            )
    status, messages = {}, {}
    for node, p in phases.items():
        setup, call, teardown = (p.get(w, ("", "")) for w in ("setup", "call", "teardown"))
        if setup[0] == "failed" or teardown[0] == "failed":
            status[node], messages[node] = "error", setup[1] or teardown[1]
        elif call[0]:
            status[node], messages[node] = (
                {"passed": "passed", "failed": "failed"}.get(call[0], "skipped"),
                call[1],
            )
        else:
            status[node] = "skipped" if setup[0] == "skipped" else "error"
    return status, messages


def seal_records(records: list[dict]) -> dict[tuple[str, int], list[object]]:
    """(test case, sealed check) -> the values it reported, from probe records."""
    out: dict[tuple[str, int], list[object]] = {}
    for r in records:
        if isinstance(r.get("seal"), int) and isinstance(r.get("case"), str):
            out.setdefault((r["case"], r["seal"]), []).append(r.get("got"))
    return out


def stable_ids(samples: list[set[str]]) -> set[str]:
    """The node ids every sample (one pytest run's ids) holds, less every parametrized test
    whose ids are not the same in all samples."""

    def families(ids: set[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for node in ids:
            base, bracket, _ = node.partition("[")
            if bracket:
                out.setdefault(base, set()).add(node)
        return out

    if not samples:
        return set()
    fams = [families(s) for s in samples]
    unstable = {base for f in fams for base in f if any(g.get(base) != f[base] for g in fams)}
    return {n for n in set.intersection(*samples) if n.partition("[")[0] not in unstable}


def renameable(root: Path, node_ids: Iterable[str]) -> set[str]:
    """The ids the grader can follow when it renames the hidden tests: a module-level test
    function, a test method written in the body of a module-level ``Test*`` class (both
    renamed, and mapped back), or any test of a module-level class whose name does not
    start with ``Test`` (a ``unittest.TestCase`` subclass such as ``LRUCacheTest``, whose
    methods may be inherited from a mixin: the grader leaves such a class and its methods
    their names). A method a ``Test*`` class inherits is reported under the renamed class
    but is not mapped back (it would be ``missing``), and so is a method that shares its
    name with a renamed test; synthesis lists neither."""
    trees: dict[str, tuple[dict[str, set[str]], set[str]] | None] = {}
    out = set()
    for node in node_ids:
        file, *parts = node.split("[", 1)[0].split("::")
        if file not in trees:
            trees[file] = _test_names(root / file)
        facts = trees[file]
        if facts is None:
            continue
        classes, renamed = facts
        if len(parts) == 1:
            out.add(node)
        elif len(parts) == 2 and parts[0].startswith("Test"):
            if parts[1] in classes.get(parts[0], set()):
                out.add(node)
        elif len(parts) == 2 and parts[0] in classes and parts[1] not in renamed:
            out.add(node)
    return out


def _test_names(path: Path) -> tuple[dict[str, set[str]], set[str]] | None:
    """(module-level class -> the methods written in its body, the names the grader
    renames: module-level ``test*`` functions and ``test*`` methods of ``Test*`` classes),
    or None for a file that does not parse."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    fn = ast.FunctionDef | ast.AsyncFunctionDef
    classes = {
        n.name: {m.name for m in n.body if isinstance(m, fn)}
        for n in tree.body
        if isinstance(n, ast.ClassDef)
    }
    renamed = {n.name for n in tree.body if isinstance(n, fn) and n.name.startswith("test")}
    renamed |= {
        m
        for c, methods in classes.items()
        if c.startswith("Test")
        for m in methods
        if m.startswith("test")
    }
    return classes, renamed


def run_reproduction(sb: Sandbox, text: str, timeout_s: float, *, first: str = "") -> ExecResult:
    """Write ``text`` as ``reproduction.py`` at the workspace root of ``sb`` and run it as
    the agent would, ``python reproduction.py``, after the shell command ``first`` if any:
    the exit code is the script's, stdout the last 3,000 characters of its output (stdout
    and stderr)."""
    sb.write_file("reproduction.py", text)
    return sb.run(
        f"{first}python reproduction.py 2>&1 | tail -c 3000; exit ${{PIPESTATUS[0]}}",
        timeout_s=timeout_s,
    )


class SandboxRunner:
    """Runs a package's tests in a fresh sandbox per run (see the module docstring).

    Args:
        dependencies: The package's built dependencies (None: the sandbox's pytest only).
        ini_options: The pytest settings the tasks' test spec will use.
        sandbox: Sandbox backend.
        sandbox_options: Extra options for the backend.
        limits: Sandbox limits (each run's timeout comes from the caller).
        plugins: pytest plugins to load by name (``-p``), as the tasks' command does.
        stop_after: A run with changed files (a mutant) stops once more than this many
            tests failed (counted as :meth:`same_test` counts them): synthesis drops such a
            mutant whatever the rest do, so the rest need not run. None: every run is whole.
        select: Run for a change only the tests that called a function it touches
            (:meth:`selected`); False runs every test for every change (the baseline of
            ``bench/synthesis.py``).
    """

    def __init__(
        self,
        dependencies: PackageSite | None,
        ini_options: dict[str, str] | None = None,
        *,
        sandbox: str = "bwrap",
        sandbox_options: dict | None = None,
        limits: Limits | None = None,
        plugins: Iterable[str] = (),
        stop_after: int | None = None,
        select: bool = True,
    ) -> None:
        self.dependencies = dependencies
        self.stop_after = stop_after
        self.select = select
        self.backend, self.options = sandbox, dict(sandbox_options or {})
        self.limits = limits or Limits()
        self.plugins = tuple(plugins)
        self._templates = TemplateCache()
        self._template: Path | None = None
        self._snapshot: dict[str, bytes] = {}
        self._files: list[str] = []
        self._probe = Path(tempfile.mkdtemp(prefix="repogym-probe-"))
        for name in ("rg_probe.py", "rg_calls.py", "rg_reach.py"):
            shutil.copy(PROBE_DIR / name, self._probe / name)
        for name in ("launch.py", "canon.py"):  # the sealed checks' runtime, as graded
            shutil.copy(LAUNCHER_DIR / name, self._probe / name)
        (self._probe / "pytest.ini").write_text(ini_text(ini_options or {}))
        self._probe.chmod(0o755)
        #: The log tail of the latest run (for error messages).
        self.log = ""
        #: Whether the latest run was stopped at its time limit.
        self.timed_out = False
        #: The tests that passed on the pristine package (set by :meth:`collect`).
        self.collected: list[str] = []
        #: Wall time of one run of every collected test (set by :meth:`collect`).
        self.suite_seconds = 0.0
        #: The tests that ran on the pristine package and are not collected, with why (set
        #: by :meth:`collect`).
        self.dropped: dict[str, str] = {}
        self._calls: dict[str, list[tuple[str, int, int]]] = {}
        self._defined: dict[str, str] = {}
        self._spawning: set[str] = set()
        self._loading: list[tuple[str, int, int]] = []
        self._unhooked: set[str] = set()
        #: What :meth:`run` did with changed files: sandboxed runs, runs left out (no
        #: collected test reaches the change), tests run, and the seconds those runs took.
        self.stats = {"runs": 0, "no test reaches the change": 0, "tests run": 0, "seconds": 0.0}

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        """Take ``root`` as the pristine package; the ids of the tests that pass there."""
        self._template = self._templates.get(root, self.dependencies)
        self._snapshot = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.py")}
        self._files = test_files(root)
        if not self._files:
            raise SynthError(
                f"{root.name}: no test files (test_*.py or *_test.py). Fix: "
                "synthesise from a package that ships its tests"
            )
        # The traced run numbers the package's functions at import (``rg_reach``); its limit
        # is kept as wide as when it traced every call, several times slower.
        records = self._sandboxed({}, self._files, TRACE_SLOWDOWN * timeout_s, trace=True)
        if records and not any("finished" in r for r in records):
            raise SynthError(self._killed(root, records))
        found, messages = statuses(records)
        named = renameable(root, found)
        passing = {t for t, s in found.items() if s == "passed" and t in named}
        start = time.monotonic()
        still, masked_ids = self._pass_when_masked(root, passing, timeout_s)
        self.suite_seconds = time.monotonic() - start
        listing = self._sandboxed({}, self._files, timeout_s, collect_only=True)
        only = next((r["collected"] for r in listing if isinstance(r.get("collected"), list)), [])
        self._defined = next(
            (r["defined"] for r in listing if isinstance(r.get("defined"), dict)), {}
        )
        steady = stable_ids([set(found), masked_ids, set(only)])
        self.collected = sorted(passing & still & steady)
        self.dropped = {}
        for t, status in found.items():
            if status != "passed":
                self.dropped[t] = f"{status} on the pristine package"
            elif t not in named:
                self.dropped[t] = "the grader cannot follow it under a fresh name"
            elif t not in still:
                self.dropped[t] = "fails once its file is masked and its checks sealed"
            elif t not in steady:
                self.dropped[t] = "its parametrize ids change from run to run"
        self._calls = {
            r["trace"]: [tuple(x) for x in r.get("spans", [])]
            for r in records
            if isinstance(r.get("trace"), str)
        }
        self._spawning = {
            r["trace"] for r in records if isinstance(r.get("trace"), str) and r.get("spawns")
        }
        self._loading = [
            tuple(x) for r in records if isinstance(r.get("loading"), list) for x in r["loading"]
        ]
        self._unhooked = {
            f for r in records if isinstance(r.get("unhooked"), list) for f in r["unhooked"]
        }
        if not self.collected:
            raise SynthError(self._none_listed(root, found, messages, named))
        return self.collected

    def traced(self) -> dict:
        """What the traced run found for the listed tests: ``{"reached": {test: [[file,
        first line, last line], ...]}, "spawning": [test, ...], "loading": [[file, first,
        last], ...]}`` (the functions each reached, the tests that started a process, the
        functions run at import), as a mutant's run selects its tests by."""
        return {
            "reached": {t: sorted(map(list, self._calls.get(t, []))) for t in self.collected},
            "spawning": sorted(self._spawning & set(self.collected)),
            "loading": sorted(map(list, self._loading)),
            "unhooked": sorted(self._unhooked),
        }

    def reached_files(self) -> set[str] | None:
        """The repository files whose functions the listed tests ran, as traced when they
        were collected (with those run at import); None when a listed test started another
        process, whose calls were not traced."""
        if self._spawning & set(self.collected):
            return None
        return (
            {f for t in self.collected for f, _, _ in self._calls.get(t, [])}
            | {f for f, _, _ in self._loading}
            | self._unhooked
        )

    def _killed(self, root: Path, records: list[dict]) -> str:
        """Why a run that wrote records but never finished stopped, naming the cause."""
        started = [r["case"] for r in records if r.get("when") == "setup"]
        last = f" (the last one started: {started[-1]})" if started else ""
        return (
            f"{root.name}: the first run of its tests stopped after {len(started)} tests"
            f"{last} without finishing: the process was killed, by the sandbox's memory limit "
            f"({self.limits.memory_mb} MB) or a signal of its own. Synthesis runs every test "
            "the grader can run, including tests the project deselects in its own pytest "
            "options (addopts such as -m 'not slow'), which neither synthesis nor the grader "
            "reads. Fix: synthesise from a package whose tests fit the sandbox's limits. "
            f"Last output: {self.log[-600:]}"
        )

    def _none_listed(
        self, root: Path, found: dict[str, str], messages: dict[str, str], named: set[str]
    ) -> str:
        """Why no test can be listed, naming the cause and the fix."""
        passed = [t for t, s in found.items() if s == "passed"]
        missing = sorted(
            {m.group(1) for msg in messages.values() for m in [_NO_MODULE.search(msg)] if m}
        )
        missing += sorted({m.group(1) for m in _NO_MODULE.finditer(self.log)} - set(missing))
        head = f"{root.name}: of its {len(found)} tests {len(passed)} pass in the sandbox"
        if missing:
            return (
                f"{head}; they fail to import {', '.join(missing[:5])}. Fix: add the "
                f"test requirements the package does not declare, e.g. "
                f"{' '.join(f'--requirement {m}' for m in missing[:3])}"
            )
        if not found and (mark := _UNKNOWN_MARK.search(self.log)):
            plugin = MARK_PLUGINS.get(mark.group(1))
            return (
                f"{head}: pytest stopped collecting at the unknown marker "
                f"`{mark.group(1)}` (a plugin's, not registered without it; its "
                "filterwarnings makes the warning an error). Fix: add the plugin that "
                "defines it, " + (f"--requirement {plugin}" if plugin else "--requirement PLUGIN")
            )
        if not found:
            return (
                f"{head}: pytest collected nothing. Last run:\n{self.log}\nFix: check "
                "that its tests run with plain pytest (no plugin it does not declare)"
            )
        if passed and not set(passed) & named:
            return (
                f"{head}, and none of those is a test the grader can list (a module-level "
                "function, a method written in a module-level class, or any method of a "
                "class not named Test*). Fix: pick another package"
            )
        if passed:
            return (
                f"{head}, and none passes again with its file masked as the grader masks "
                "hidden tests (renamed, with canaries), or their ids change between runs. "
                "Fix: pick another package"
            )
        return (
            f"{head}. Last run:\n{self.log}\nFix: read the failures above (a missing "
            "data file, a network access, a test requirement pip could not guess: "
            "--requirement)"
        )

    def _pass_when_masked(
        self, root: Path, tests: set[str], timeout_s: float
    ) -> tuple[set[str], set[str]]:
        """The ``tests`` that still pass with their files masked as the grader masks hidden
        tests (tests renamed, assertions sealed, canaries added): a test that depends on its
        own name (a reference file named after it, a registry keyed by it) cannot be a
        hidden test, nor one whose sealed checks do not hold at gold (a value the grader
        cannot compare, such as an object of the package's own that equals a literal).
        Also every id the masked run reported, under its own name."""
        files = sorted({t.split("::", 1)[0] for t in tests})
        if not files:
            return set(), set()
        rng = random.Random(0)
        changes: dict[str, str] = {}
        back = Masked()
        for rel in files:
            text = (root / rel).read_text(encoding="utf-8", errors="surrogateescape")
            changes[rel], masked = mask_test_file(text, rel, rng, seal=True)
            back.renamed.update(masked.renamed)
            back.case_ids.update(masked.case_ids)
            back.seals += masked.seals
        records = self._sandboxed(changes, files, timeout_s)
        ran, _ = statuses(records)
        values = seal_records(records)
        seals = [s for s in back.seals if not s.gold or s.cases]  # no gold recorded here
        passed, seen = set(), set()
        for node, status in ran.items():
            name = back.original(node)  # unrenamed: under its own name
            seen.add(name)
            if status == "passed" and not judge_case(node, seals, values).failed:
                passed.add(name)
        return passed & tests, seen

    def run(
        self, root: Path, node_ids: list[str], timeout_s: float
    ) -> tuple[dict[str, str], dict[str, str]]:
        changes = self._ready(root)
        selected = self.selected(changes) if changes and self.select else None
        found = dict.fromkeys(self.collected, "passed")
        messages: dict[str, str] = {}
        if changes and selected is not None and not selected:
            self.stats["no test reaches the change"] += 1
        if selected is None or selected:
            args = self._files if selected is None else sorted(selected)
            if len(args) > _MAX_IDS:
                args = sorted({t.split("::", 1)[0] for t in args})
            # Stop early only when nothing but listed tests runs: a whole file also runs
            # tests that fail on the pristine package (humanize's benchmarks), which
            # would stop the run before the listed ones.
            by_id = selected is not None and args == sorted(selected)
            start = time.monotonic()
            limit = timeout_s
            if changes and self.suite_seconds:
                limit = min(timeout_s, max(MUTANT_MIN_S, MUTANT_SLOWDOWN * self.suite_seconds))
            records = self._sandboxed(
                changes, args, limit, stop_after=self.stop_after if changes and by_id else None
            )
            timed_out = self.timed_out
            if changes:
                self.stats["runs"] += 1
                self.stats["tests run"] += len(self.collected if selected is None else selected)
                self.stats["seconds"] += time.monotonic() - start
            ran, messages = statuses(records)
            # a test that should have run and did not is missing, never passed; a run
            # stopped at its limit (an endless loop) leaves each "timed out"
            ran = {
                t: "timed out" if timed_out else ran.get(t, "missing")
                for t in (self.collected if selected is None else selected)
            }
            found.update(ran)
        return (
            {t: found.get(t, "missing") for t in node_ids},
            {t: messages.get(t, "") for t in node_ids},
        )

    def calls(
        self, root: Path, node_ids: list[str], hidden: Iterable[str], timeout_s: float
    ) -> dict[str, list[dict]]:
        """Node id -> the calls it makes from the ``hidden`` files into the package, for
        the package as ``root`` holds it now (``rg_calls`` records)."""
        changes = self._ready(root)
        (self._probe / "calls.json").write_text(json.dumps({"tests": sorted(hidden)}))
        os.chmod(self._probe / "calls.json", 0o644)
        args = (
            sorted(node_ids)
            if len(node_ids) <= _MAX_IDS
            else sorted({t.split("::", 1)[0] for t in node_ids})
        )
        return calls_of(self._sandboxed(changes, args, TRACE_SLOWDOWN * timeout_s, calls=True))

    def script(
        self, root: Path, text: str, hidden: Iterable[str], timeout_s: float
    ) -> tuple[int, str]:
        """(exit status, output tail) of ``python reproduction.py`` holding ``text``, run at
        the workspace root of a sandbox of the package as ``root`` holds it now, with the
        ``hidden`` files removed (as the agent's workspace is)."""
        changes = self._ready(root)
        sb = make_sandbox(
            self.backend,
            SandboxSpec(
                self._template,
                dataclasses.replace(
                    self.limits, timeout_s=timeout_s, cpu_s=max(self.limits.cpu_s, int(timeout_s))
                ),
            ),
            **self.options,
        )
        try:
            for rel, body in changes.items():
                sb.write_file(rel, body)
            gone = " ".join(shlex.quote(h) for h in sorted(hidden))
            res = run_reproduction(sb, text, timeout_s, first=f"rm -f -- {gone}; ")
        except SandboxError as e:
            return 125, str(e)
        finally:
            sb.close()
        return (124 if res.timed_out else res.exit_code), res.stdout

    def same_test(self, node_id: str) -> str:
        """What ``node_id`` is as a test: where its function is written, with its
        parameters; so a method that a mixin gives several test classes (cachetools'
        ``CacheTestMixin``, inherited by each cache's ``TestCase``) is one test however
        many classes run it. The node id itself when the collection did not say."""
        at = self._defined.get(node_id)
        if not isinstance(at, str):
            return node_id
        _, bracket, params = node_id.partition("[")
        return at + bracket + params

    def covering(self, files: Iterable[str]) -> set[str]:
        """The collected tests that reached code in ``files`` on the pristine package."""
        wanted = set(files)
        return {
            t for t, spans in self._calls.items() if any(f in wanted for f, _, _ in spans)
        } & set(self.collected)

    def _ready(self, root: Path) -> dict[str, str]:
        if self._template is None:
            raise RuntimeError("SandboxRunner used before collect. Fix: call collect() first")
        return self._changes(root)

    def selected(self, changes: dict[str, str]) -> set[str] | None:
        """The collected tests that called a function a change touches (None: all of them,
        for a change outside every function), and every test that started another process
        (python-slugify's ``python -m slugify``: what the child ran was not traced)."""
        out: set[str] = set(self._spawning)
        for rel, text in changes.items():
            old = self._snapshot[rel].decode("utf-8")
            lines = _changed_lines(old, text)
            inside = _function_lines(old)
            if not lines or any(n not in inside for n in lines):
                return None
            if rel in self._unhooked:
                return None  # its code ran without its functions numbered: any test
            if any(f == rel and a <= n <= b for f, a, b in self._loading for n in lines):
                return None  # a function run at import: what it made, any test may read
            for test, spans in self._calls.items():
                if any(f == rel and a <= n <= b for f, a, b in spans for n in lines):
                    out.add(test)
        return out & set(self.collected)

    def _changes(self, root: Path) -> dict[str, str]:
        out = {}
        for rel, data in self._snapshot.items():
            now = (root / rel).read_bytes() if (root / rel).is_file() else b""
            if now != data:
                out[rel] = now.decode("utf-8")
        return out

    def _command(
        self,
        sb: Sandbox,
        args: list[str],
        trace: bool,
        collect_only: bool = False,
        calls: bool = False,
        stop_after: int | None = None,
    ) -> str:
        py = shlex.quote(sb.interpreter.executable)
        words = " ".join(
            shlex.quote(a) for a in (["--collect-only", *args] if collect_only else args)
        )
        plugins = "".join(f" -p {shlex.quote(p)}" for p in self.plugins) + "".join(
            f" {o}" for p in self.plugins for o in PLUGIN_OPTIONS.get(p, ())
        )
        record = ' RG_PROBE_CALLS="$RG_PROBE/calls.json"' if calls else ""
        if stop_after is not None:
            record += f" RG_PROBE_MAXFAIL={int(stop_after)}"
        # The tests get the grader's process environment: without it a test whose subprocess needs
        # the package's requirements (python-slugify's `python -m slugify`) passes here and
        # fails every grading.
        record += " RG_PROBE_ENV=" + shlex.quote(json.dumps(launcher_env(**sb.interpreter.env)))
        return (
            f'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH="$RG_PROBE:$PYTHONPATH" '
            f"RG_PROBE_TRACE={int(trace)}{record} RG_PROBE_OUT={_OUT} {py} -m pytest "
            f'-c "$RG_PROBE/pytest.ini" --rootdir=. -p no:cacheprovider -p rg_probe -q'
            f"{plugins} --continue-on-collection-errors --tb=short {words} > {_LOG} 2>&1; "
            f"echo exit=$?"
        )

    def _sandboxed(
        self,
        changes: dict[str, str],
        args: list[str],
        timeout_s: float,
        trace: bool = False,
        collect_only: bool = False,
        calls: bool = False,
        stop_after: int | None = None,
    ) -> list[dict]:
        """Probe records of one pytest run over ``args`` with ``changes`` written in."""
        assert self._template is not None
        limits = dataclasses.replace(
            self.limits, timeout_s=timeout_s, cpu_s=max(self.limits.cpu_s, int(timeout_s))
        )
        self.timed_out = False
        sb = make_sandbox(self.backend, SandboxSpec(self._template, limits), **self.options)
        try:
            for rel, text in changes.items():
                sb.write_file(rel, text)
            res = sb.run_with_binds(
                self._command(sb, args, trace, collect_only, calls, stop_after),
                ro={"probe": self._probe},
                timeout_s=timeout_s,
            )
            self.timed_out = res.timed_out
            if res.timed_out:
                self.log = f"timed out after {timeout_s}s"
                return []
            # read from the host, not through a command's output, which its cap cuts: the
            # traced run of a suite of 20,000 tests writes more than that
            try:
                out = sb.take_tmp_file(_OUT.removeprefix("/tmp/"), limit=_MAX_RECORDS_BYTES)
            except FileNotFoundError:
                out = ""
            self.log = sb.run(f"tail -c 3000 {_LOG}", timeout_s=60).stdout
        except SandboxError as e:
            self.log = str(e)
            return []
        finally:
            sb.close()
        records = probe_records(out)
        for rec in records:
            if isinstance(rec.get("message"), str):
                rec["message"] = rec["message"].replace(WORKSPACE + "/", "")
        return records

    def close(self) -> None:
        self._templates.close()
        shutil.rmtree(self._probe, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _changed_lines(old: str, new: str) -> set[int]:
    """Lines of ``old`` (1-based) that ``new`` replaces or deletes, or next to an insertion."""
    a, b = old.splitlines(), new.splitlines()
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.update(range(i1 + 1, i2 + 1) if i2 > i1 else (i1, i1 + 1))
    return out


def _function_lines(source: str) -> set[int]:
    """Lines inside a function (its ``def`` line, signature included, to its end)."""
    out: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out
