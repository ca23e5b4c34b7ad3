"""Task synthesis by mutation (SWE-smith style): many tasks from one tested package.

:func:`synthesize` takes a local Python package with its own pytest tests, applies one
mutant at a time to its functions (:func:`repogym.scenarios.mutation.mutants`: edited in
place, so the bug is formatted like the code around it), runs the package's tests with
plain ``subprocess`` pytest (the package is the user's own, trusted code) and keeps a
mutant when at least one test fails and every other test still passes. Each kept mutant
becomes a task folder:

- ``repo/``: the package with the mutant, without its test files (those are hidden);
- ``tests/``: the package's tests (``tests_dest`` by the rule of
  :func:`repogym.scenarios.swebench.hidden_tests_dest`);
- ``fail_to_pass``: the failing tests; ``pass_to_pass``: a seeded sample of the rest;
- ``solution.patch``: the reverse diff (mutant -> original);
- ``decoys/``: the test-gaming fix (the failing tests deleted) and, when one exists, a
  wrong fix at the same place that still fails a test;
- ``STATEMENT.md``: the failing tests, their docstrings and assertion messages, with
  memory addresses, temporary paths and the lines of the fix removed.

The task id is ``<package>-<hash of the mutant's id>`` and the only tag is ``synthetic``:
agents see both, so neither names the function or the mutation.

Emitted tasks should then be checked with ``repogym validate`` (real sandbox).

The tests run through a :class:`TestRunner`: by default :class:`HostRunner` (plain host
subprocesses, for a package that is your own code); ``repogym synth --pypi`` passes one
that runs them in the sandbox with the package's environment, and the task's
``[environment]`` and pytest settings (``ini_options``) are written into task.toml.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Collection
from pathlib import Path
from typing import Protocol

from repogym.scenarios.environment import EnvironmentSpec
from repogym.scenarios.mutation import Mutant, file_diff, function_names, mutants
from repogym.scenarios.patches import is_test_file, junit_key
from repogym.scenarios.swebench import hidden_tests_dest

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git", "*.egg-info")
#: Mutants of one function tried before synthesis moves on to another function.
TRIALS_PER_FUNCTION = 4
# CPython's default repr shows a memory address, different on every run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|\b0x[0-9a-fA-F]{8,}\b")


class SynthError(ValueError):
    """The package cannot be used for synthesis; the message says why and how to fix it."""


# -- running the package's tests ----------------------------------------------------------
def run_tests(root: Path, node_ids: list[str],
              timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
    """(node id -> passed/failed/error/skipped/missing, node id -> failure message), from a
    plain pytest subprocess."""
    with tempfile.TemporaryDirectory(prefix="repogym-synth-") as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            f"--junitxml={report}"], cwd=root, env=env, capture_output=True,
                           timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return dict.fromkeys(node_ids, "error"), {}
        cases, messages = _parse(report)
    return ({t: cases.get(junit_key(t), "missing") for t in node_ids},
            {t: messages.get(junit_key(t), "") for t in node_ids})


def _parse(report: Path) -> tuple[dict, dict]:
    cases, messages = {}, {}
    if not report.is_file():
        return cases, messages
    for case in ET.parse(report).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                messages[key] = child.get("message", "")
        cases.setdefault(key, status)
    return cases, messages


def collect(root: Path, timeout_s: float) -> list[str]:
    """The package's pytest node ids."""
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True,
                         timeout=timeout_s, check=False,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    ids = [line.strip() for line in res.stdout.splitlines() if "::" in line]
    if not ids:
        raise SynthError(f"{root}: pytest collected no tests ({res.stdout[-500:]}). Fix: "
                         "give a package folder whose tests run with `python -m pytest` there")
    return ids


class TestRunner(Protocol):
    """How synthesis runs a package's tests (see :class:`HostRunner`)."""

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        """The node ids to use (every one must pass on the unmutated package)."""
        ...

    def run(self, root: Path, node_ids: list[str],
            timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
        """(node id -> status, node id -> failure message) for the package as it is now."""
        ...


class HostRunner:
    """Plain host subprocesses (:func:`collect`, :func:`run_tests`): trusted code only."""

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        return collect(root, timeout_s)

    def run(self, root: Path, node_ids: list[str],
            timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
        return run_tests(root, node_ids, timeout_s)


# -- writing tasks ------------------------------------------------------------------------
def _clean(message: str, pkg: _Package, fix_lines: set[str]) -> str:
    """A failure message without memory addresses, temporary paths or the fix's code."""
    text = message.replace(str(pkg.root) + "/", "").replace(str(pkg.root), pkg.name)
    text = re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s'\"]*", "<tmp>", text)
    text = _ADDRESS.sub("", text)
    for line in fix_lines:
        text = text.replace(line, "...")
    return " ".join(text.split())[:300]


def _docstrings(pkg: _Package, node_ids: list[str]) -> dict[str, str]:
    """First docstring line of each test function, by node id."""
    out: dict[str, str] = {}
    trees: dict[str, ast.Module] = {}
    for t in node_ids:
        file, *names = t.split("::")
        if file not in trees:
            try:
                trees[file] = ast.parse((pkg.root / file).read_text())
            except (OSError, SyntaxError):
                continue
        scope: list[ast.stmt] = trees[file].body
        for name in names:
            name = name.split("[")[0]
            found = [n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                    | ast.ClassDef) and n.name == name]
            if not found:
                break
            node, scope = found[0], found[0].body
        else:
            doc = ast.get_docstring(node) if names else None
            if doc:
                out[t] = doc.strip().splitlines()[0]
    return out


def _statement(pkg: _Package, failing: list[str], messages: dict[str, str],
               fix_lines: set[str]) -> str:
    docs = _docstrings(pkg, failing)
    lines = [f"Some behaviour of `{pkg.name}` is broken: these tests fail.", ""]
    for t in failing:
        msg = _clean(messages.get(t, ""), pkg, fix_lines)
        doc = _clean(docs.get(t, ""), pkg, fix_lines)
        lines.append(f"- `{t}`" + (f" ({doc})" if doc else "") + (f": {msg}" if msg else ""))
    lines += ["", ("Fix the library code so that they pass; the tests themselves are correct, "
              "and every other test must keep passing.")]
    return "\n".join(lines) + "\n"


def _toml(task_id: str, mutant: Mutant, pkg: _Package, f2p: list[str], p2p: list[str]) -> str:
    dest = pkg.dest
    ini = ""
    if pkg.ini_options:
        ini = "\n[verifier.ini_options]\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in sorted(pkg.ini_options.items()))
    env = "\n" + pkg.environment.to_toml() if pkg.environment else ""
    return f"""# Synthesised by `repogym synth`: mutant {mutant.id}
# (the id and tags are shown to agents, so they do not name the function or the operator).
id = "{task_id}"
version = 0
statement_file = "STATEMENT.md"
split = "train"
tags = ["synthetic"]
max_steps = 30

[verifier]
tests_dest = "{dest}"
command = "python -m pytest -q -p no:cacheprovider"
timeout_s = 120
fail_to_pass = {json.dumps(f2p)}
pass_to_pass = {json.dumps(p2p)}
{ini}{env}"""


@dataclasses.dataclass
class _Package:
    root: Path
    name: str
    node_ids: list[str]
    test_files: list[str]
    dest: str
    sources: list[str]
    runner: TestRunner = dataclasses.field(default_factory=HostRunner)
    environment: EnvironmentSpec | None = None
    ini_options: dict[str, str] = dataclasses.field(default_factory=dict)


def _scan(root: Path, timeout_s: float, runner: TestRunner) -> _Package:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if "__pycache__" not in p.parts)
    test_files = [f for f in files if is_test_file(f) or Path(f).name == "conftest.py"]
    if not test_files:
        raise SynthError(f"{root}: no test files (test_*.py). Fix: give a package with tests")
    dest = hidden_tests_dest(test_files)
    hidden = (lambda f: f in test_files) if dest == "." else (
        lambda f: f == dest or f.startswith(dest + "/"))
    sources = [f for f in files if not hidden(f)]
    return _Package(root, root.name, runner.collect(root, timeout_s), test_files if dest == "."
                    else [f for f in files if hidden(f)], dest, sources, runner)


def synthesize(package_dir: str | Path, out: str | Path, *, max_tasks: int = 10,
               seed: int = 0, p2p_sample: int = 20, max_trials: int | None = None,
               timeout_s: float = 120.0, runner: TestRunner | None = None,
               name: str | None = None, only: Collection[str] | None = None,
               environment: EnvironmentSpec | None = None,
               ini_options: dict[str, str] | None = None) -> list[Path]:
    """Write up to ``max_tasks`` task folders made by mutating ``package_dir``.

    Args:
        package_dir: A folder whose tests pass with ``python -m pytest`` run inside it.
        out: Where task folders are written (``<package>-<hash of the mutant's id>``).
        max_tasks: Stop after this many kept mutants.
        seed: Seeds the order mutants are tried in and the pass_to_pass sample.
        p2p_sample: Largest pass_to_pass list.
        max_trials: Mutants to try at most (default ``20 * max_tasks``).
        timeout_s: Limit for one test run.
        runner: Runs the tests (default :class:`HostRunner`).
        name: The package's name in task ids and statements (default: the folder's).
        only: Mutate only these files or the files under these folders (repository
            paths, e.g. ``src/pkg``; default: every file that is not a test).
        environment: Written as the tasks' ``[environment]``.
        ini_options: Written as the tasks' ``[verifier] ini_options``.

    Returns:
        The task folders written.

    Raises:
        SynthError: the package has no tests, or they do not all pass unmutated.
    """
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="repogym-synth-"))
    try:
        shutil.copytree(Path(package_dir).resolve(), work / "pkg", ignore=_IGNORE)
        pkg = _scan(work / "pkg", timeout_s, runner or HostRunner())
        pkg.name = name or Path(package_dir).resolve().name
        pkg.environment, pkg.ini_options = environment, dict(ini_options or {})
        if only is not None:
            pkg.sources = [f for f in pkg.sources
                           if any(f == o or f.startswith(o.rstrip("/") + "/") for o in only)]
        base, _ = pkg.runner.run(pkg.root, pkg.node_ids, timeout_s)
        broken = [t for t, s in base.items() if s != "passed"]
        if broken:
            raise SynthError(f"{package_dir}: tests fail before any mutation: {broken[:5]}. "
                             "Fix: synthesise from a package whose tests all pass")
        functions = [(f, q) for f in pkg.sources
                     for q in function_names((pkg.root / f).read_text())]
        rng.shuffle(functions)
        return _keep(pkg, functions, Path(out), rng, max_tasks, p2p_sample,
                     max_trials or 20 * max_tasks, timeout_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _try(pkg: _Package, m: Mutant, timeout_s: float) -> tuple[dict[str, str], dict]:
    path = pkg.root / m.file
    original = path.read_text()
    path.write_text(m.source)
    try:
        return pkg.runner.run(pkg.root, pkg.node_ids, timeout_s)
    finally:
        path.write_text(original)


def _keep(pkg: _Package, functions: list[tuple[str, str]], out: Path, rng: random.Random,
          max_tasks: int, p2p_sample: int, max_trials: int, timeout_s: float) -> list[Path]:
    """At most one task per function: functions in ``rng``'s order, each with up to
    :data:`TRIALS_PER_FUNCTION` of its mutants (made only when the function is reached)."""
    written: list[Path] = []
    trials = 0
    for file, function in functions:
        if len(written) >= max_tasks or trials >= max_trials:
            break
        own = [m for m in mutants((pkg.root / file).read_text(), file, functions={function})
               if m.function == function]
        rng.shuffle(own)
        for m in own[:min(TRIALS_PER_FUNCTION, max_trials - trials)]:
            trials += 1
            result, messages = _try(pkg, m, timeout_s)
            failing = [t for t, s in result.items() if s != "passed"]
            passing = [t for t, s in result.items() if s == "passed"]
            if not failing or not passing or any(result[t] == "missing" for t in failing):
                continue
            p2p = sorted(rng.sample(passing, min(p2p_sample, len(passing))))
            written.append(_write(pkg, m, out, failing, p2p, messages, own, timeout_s))
            break
    return written


def _write(pkg: _Package, m: Mutant, out: Path, f2p: list[str], p2p: list[str],
           messages: dict, candidates: list[Mutant], timeout_s: float) -> Path:
    digest = hashlib.sha1(m.id.encode()).hexdigest()[:8]
    task_id = re.sub(r"[^a-z0-9._-]", "-", f"{pkg.name}-{digest}".lower()).strip("-")
    root = out / task_id
    if root.exists():
        shutil.rmtree(root)
    hidden = set(pkg.test_files)
    shutil.copytree(pkg.root, root / "repo", ignore=lambda d, names: [
        n for n in names if str((Path(d) / n).relative_to(pkg.root)) in hidden
        or n in ("__pycache__", ".pytest_cache")])
    (root / "repo" / m.file).write_text(m.source)
    (root / "tests").mkdir()
    for f in pkg.test_files:
        rel = f if pkg.dest == "." else os.path.relpath(f, pkg.dest)
        (root / "tests" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pkg.root / f, root / "tests" / rel)
    original = (pkg.root / m.file).read_text()
    gold = file_diff(m.file, m.source, original)
    (root / "solution.patch").write_text(gold)
    (root / "decoys").mkdir()
    _write_decoys(pkg, m, root, f2p, f2p + p2p, candidates, timeout_s)
    fix_lines = {line[1:].strip() for line in gold.splitlines()
                 if line[:1] in "+-" and line[:3] not in ("+++", "---")}
    (root / "STATEMENT.md").write_text(_statement(pkg, f2p, messages,
                                                  {x for x in fix_lines if len(x) >= 6}))
    (root / "task.toml").write_text(_toml(task_id, m, pkg, f2p, p2p))
    return root


def _write_decoys(pkg: _Package, m: Mutant, root: Path, f2p: list[str], listed: list[str],
                  candidates: list[Mutant], timeout_s: float) -> None:
    """The failing tests deleted (test gaming), and a wrong fix at the same place if any."""
    for name, patch in deletion_decoys(pkg.root, f2p).items():
        (root / "decoys" / name).write_text(patch)
    for other in candidates:
        if (other.file, other.function, other.line) != (m.file, m.function, m.line) \
                or other.source == m.source:
            continue
        result, _ = _try(pkg, other, timeout_s)
        if any(result[t] != "passed" for t in listed):
            (root / "decoys" / "wrong_fix.patch").write_text(
                file_diff(m.file, m.source, other.source))
            return


def deletion_decoys(root: Path, f2p: list[str]) -> dict[str, str]:
    """``delete_failing_tests_<n>.patch`` -> a patch deleting the failing tests of one test file
    under ``root`` (the test-gaming decoy)."""
    by_file: dict[str, set[str]] = {}
    for t in f2p:
        by_file.setdefault(t.split("::")[0], set()).add(t.split("::")[1].split("[")[0])
    out = {}
    for n, (file, names) in enumerate(sorted(by_file.items())):
        text = (root / file).read_text()
        out[f"delete_failing_tests_{n}.patch"] = file_diff(file, text, _without(text, names))
    return out


def _without(text: str, names: set[str]) -> str:
    """``text`` with its top-level functions or classes called ``names`` removed (lines cut,
    the rest of the file untouched)."""
    drop: set[int] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            drop |= set(range(first, node.end_lineno + 1))
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True), 1)
                   if i not in drop)
