"""A package's own tests run in the sandbox, with its environment (``repogym synth --pypi``).

:class:`SandboxRunner` is a :class:`repogym.scenarios.synth.TestRunner` for code that is
not yours (a PyPI download): every run starts a fresh sandbox from one template of the
pristine package, writes in the files that differ from it (the mutant), and runs pytest
with the package's environment, plugin auto-loading off and the grader's configuration
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
changed (every test when a change lies outside any function): a test that never reaches
the change passes as it did on the pristine package, and is reported so without running.
Candidates found this way are then graded for real by ``repogym validate``.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import random
import shlex
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from repogym.envs.canaries import add_canaries
from repogym.envs.verifier import ini_text
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.base import WORKSPACE, Environment, Sandbox, SandboxError
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.patches import is_test_file
from repogym.scenarios.synth import SynthError

PROBE_DIR = Path(__file__).parent / "probe"
_OUT = "/tmp/rg-probe.jsonl"
_LOG = "/tmp/rg-probe.log"
#: The first run (profiled) may take this many times the timeout of a plain run.
TRACE_SLOWDOWN = 4
#: Past this many selected tests, their files are run instead of their ids (one shell word
#: is limited to 128 KiB).
_MAX_IDS = 800
_SKIP_DIRS = {".git", ".tox", ".nox", "build", "dist", "docs", "doc", "__pycache__", ".venv",
              "venv", "node_modules", "benchmarks", "bench"}


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
                str(r.get("outcome")), str(r.get("message", "")))
    status, messages = {}, {}
    for node, p in phases.items():
        setup, call, teardown = (p.get(w, ("", "")) for w in ("setup", "call", "teardown"))
        if setup[0] == "failed" or teardown[0] == "failed":
            status[node], messages[node] = "error", setup[1] or teardown[1]
        elif call[0]:
            status[node], messages[node] = {"passed": "passed", "failed": "failed"}.get(
                call[0], "skipped"), call[1]
        else:
            status[node] = "skipped" if setup[0] == "skipped" else "error"
    return status, messages


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
    function, or a test method written in the body of a module-level ``Test*`` class. A
    method a class inherits is reported under the renamed class but is not mapped back (it
    would be ``missing``), so synthesis never lists one."""
    trees: dict[str, dict[str, set[str]] | None] = {}
    out = set()
    for node in node_ids:
        file, *parts = node.split("[", 1)[0].split("::")
        if file not in trees:
            try:
                tree = ast.parse((root / file).read_text(encoding="utf-8"))
                trees[file] = {n.name: {m.name for m in n.body
                                        if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
                               for n in tree.body if isinstance(n, ast.ClassDef)}
            except (OSError, SyntaxError, UnicodeDecodeError):
                trees[file] = None
        classes = trees[file]
        if classes is None:
            continue
        if len(parts) == 1 or (len(parts) == 2 and parts[0].startswith("Test")
                               and parts[1] in classes.get(parts[0], set())):
            out.add(node)
    return out


class SandboxRunner:
    """Runs a package's tests in a fresh sandbox per run (see the module docstring).

    Args:
        environment: The package's built environment (None: the sandbox's pytest only).
        ini_options: The pytest settings the tasks' verifier will use.
        sandbox: Sandbox backend.
        sandbox_options: Extra options for the backend.
        limits: Sandbox limits (each run's timeout comes from the caller).
    """

    def __init__(self, environment: Environment | None, ini_options: dict[str, str] | None = None,
                 *, sandbox: str = "bwrap", sandbox_options: dict | None = None,
                 limits: Limits | None = None) -> None:
        self.environment = environment
        self.backend, self.options = sandbox, dict(sandbox_options or {})
        self.limits = limits or Limits()
        self._templates = TemplateCache()
        self._template: Path | None = None
        self._snapshot: dict[str, bytes] = {}
        self._files: list[str] = []
        self._probe = Path(tempfile.mkdtemp(prefix="repogym-probe-"))
        shutil.copy(PROBE_DIR / "rg_probe.py", self._probe / "rg_probe.py")
        (self._probe / "pytest.ini").write_text(ini_text(ini_options or {}))
        self._probe.chmod(0o755)
        #: The log tail of the latest run (for error messages).
        self.log = ""
        #: The tests that passed on the pristine package (set by :meth:`collect`).
        self.collected: list[str] = []
        self._calls: dict[str, list[tuple[str, int, int]]] = {}

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        """Take ``root`` as the pristine package; the ids of the tests that pass there."""
        self._template = self._templates.get(root, self.environment)
        self._snapshot = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.py")}
        self._files = test_files(root)
        if not self._files:
            raise SynthError(f"{root.name}: no test files (test_*.py or *_test.py). Fix: "
                             "synthesise from a package that ships its tests")
        # Profiling every call makes this run several times slower than the later ones.
        records = self._sandboxed({}, self._files, TRACE_SLOWDOWN * timeout_s, trace=True)
        found, _ = statuses(records)
        named = renameable(root, found)
        passing = {t for t, s in found.items() if s == "passed" and t in named}
        still, masked_ids = self._pass_when_masked(root, passing, timeout_s)
        only = next((r["collected"] for r in self._sandboxed({}, self._files, timeout_s,
                                                              collect_only=True)
                     if isinstance(r.get("collected"), list)), [])
        steady = stable_ids([set(found), masked_ids, set(only)])
        self.collected = sorted(passing & still & steady)
        self._calls = {r["trace"]: [tuple(x) for x in r.get("spans", [])]
                       for r in records if isinstance(r.get("trace"), str)}
        if not self.collected:
            passed = sum(s == "passed" for s in found.values())
            raise SynthError(
                f"{root.name}: of its {len(found)} tests {passed} pass in the sandbox, and "
                "none of those is a module-level test function or a method written in a "
                "module-level Test* class (the only tests the grader can list). Last run:\n"
                f"{self.log}\nFix: add missing test requirements (--requirement), or pick "
                "another package")
        return self.collected

    def _pass_when_masked(self, root: Path, tests: set[str],
                          timeout_s: float) -> tuple[set[str], set[str]]:
        """The ``tests`` that still pass with their files masked as the grader masks hidden
        tests (tests renamed, canaries added): a test that depends on its own name (a
        reference file named after it, a registry keyed by it) cannot be a hidden test.
        Also every id the masked run reported, under its own name."""
        files = sorted({t.split("::", 1)[0] for t in tests})
        if not files:
            return set(), set()
        rng = random.Random(0)
        changes: dict[str, str] = {}
        back: dict[str, str] = {}
        for rel in files:
            text = (root / rel).read_text(encoding="utf-8", errors="surrogateescape")
            changes[rel], masked = add_canaries(text, rel, rng)
            back.update(masked.renamed)
        ran, _ = statuses(self._sandboxed(changes, files, timeout_s))
        passed, seen = set(), set()
        for node, status in ran.items():
            base, bracket, params = node.partition("[")
            if base in back:
                name = back[base] + bracket + params
                seen.add(name)
                if status == "passed":
                    passed.add(name)
        return passed & tests, seen

    def run(self, root: Path, node_ids: list[str],
            timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
        if self._template is None:
            raise RuntimeError("SandboxRunner.run before collect. Fix: call collect() first")
        changes = self._changes(root)
        selected = self.selected(changes) if changes else None
        found = dict.fromkeys(self.collected, "passed")
        messages: dict[str, str] = {}
        if selected is None or selected:
            args = self._files if selected is None else sorted(selected)
            if len(args) > _MAX_IDS:
                args = sorted({t.split("::", 1)[0] for t in args})
            records = self._sandboxed(changes, args, timeout_s)
            ran, messages = statuses(records)
            if selected is not None:
                ran = {t: ran.get(t, "missing") for t in selected}
            found.update(ran)
        return ({t: found.get(t, "missing") for t in node_ids},
                {t: messages.get(t, "") for t in node_ids})

    def selected(self, changes: dict[str, str]) -> set[str] | None:
        """The collected tests that called a function a change touches (None: all of them,
        for a change outside every function)."""
        out: set[str] = set()
        for rel, text in changes.items():
            old = self._snapshot[rel].decode("utf-8")
            lines = _changed_lines(old, text)
            inside = _function_lines(old)
            if not lines or any(n not in inside for n in lines):
                return None
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

    def _command(self, sb: Sandbox, args: list[str], trace: bool,
                 collect_only: bool = False) -> str:
        py = shlex.quote(sb.interpreter.executable)
        words = " ".join(shlex.quote(a) for a in (["--collect-only", *args] if collect_only
                                                   else args))
        return (f'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH="$RG_PROBE:$PYTHONPATH" '
                f"RG_PROBE_TRACE={int(trace)} RG_PROBE_OUT={_OUT} {py} -m pytest "
                f'-c "$RG_PROBE/pytest.ini" --rootdir=. -p no:cacheprovider -p rg_probe -q '
                f"--continue-on-collection-errors --tb=short {words} > {_LOG} 2>&1; "
                f"echo exit=$?")

    def _sandboxed(self, changes: dict[str, str], args: list[str], timeout_s: float,
                   trace: bool = False, collect_only: bool = False) -> list[dict]:
        """Probe records of one pytest run over ``args`` with ``changes`` written in."""
        assert self._template is not None
        limits = dataclasses.replace(self.limits, timeout_s=timeout_s,
                                     cpu_s=max(self.limits.cpu_s, int(timeout_s)))
        sb = make_sandbox(self.backend, SandboxSpec(self._template, limits), **self.options)
        try:
            for rel, text in changes.items():
                sb.write_file(rel, text)
            res = sb.run_with_binds(self._command(sb, args, trace, collect_only),
                                    ro={"probe": self._probe},
                                    timeout_s=timeout_s)
            if res.timed_out:
                self.log = f"timed out after {timeout_s}s"
                return []
            out = sb.run(f"cat {_OUT} 2>/dev/null; true", timeout_s=60).stdout
            self.log = sb.run(f"tail -c 3000 {_LOG}", timeout_s=60).stdout
        except SandboxError as e:
            self.log = str(e)
            return []
        finally:
            sb.close()
        records = []
        for line in out.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                if isinstance(rec.get("message"), str):
                    rec["message"] = rec["message"].replace(WORKSPACE + "/", "")
                records.append(rec)
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
