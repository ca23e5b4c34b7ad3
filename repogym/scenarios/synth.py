"""Task synthesis by mutation (SWE-smith style): many tasks from one tested package.

:func:`synthesize` takes a local Python package with its own pytest tests and injects bugs
into its functions (:func:`repogym.scenarios.mutation.mutants`: edited in place, so a bug
is formatted like the code around it). A bug is kept when 1 to :data:`MAX_FAIL_TO_PASS`
tests fail with it (more is a crash, not a bug a user would report; a test method that a
mixin gives several test classes counts once, though each class's run is listed), none
goes missing
(an import or collection error) and every other test still passes. Bugs are drawn one per
function, and at most :data:`MAX_CHEAP_SHARE` of them remove a call or return ``None``;
with ``combined`` a share of the tasks hold 2 or 3 bugs in different functions (and files,
where the package has several), each of which fails tests of its own. A bug drawn for a
combination gets its verified check once, as it enters a pool; members are chosen from the
pool before anything runs (:func:`choose_members`: the union of their failing tests within
the cap, their statement within :data:`bug_reports.MAX_CHARS`, the most files, then the
shortest), and each set is run once with every bug in.

Every task gets a bug report as its statement (:mod:`repogym.scenarios.bug_reports`): the
calls its failing tests make into the package are recorded with the bug and without it,
the first call that misbehaves becomes a check (its inputs, what it gives, what it should
give), and the checks become ``reproduction.py``, verified to fail with the bug and pass
without it (for a task of several, each check with its bug alone, then the script with
every bug in and at the gold code). A report that holds a line or a
token of the fix, or a hidden test's name, is refused; a bug with no report is dropped.

Each task folder (:func:`write_task`):

- ``repo/``: the package with the bug, without its test files (those are hidden) and
  without compiled files or packaging file lists;
- ``tests/``: the package's tests (``tests_dest`` by the rule of
  :func:`repogym.scenarios.swebench.hidden_tests_dest`);
- ``fail_to_pass``: the failing tests; ``pass_to_pass``: every other test that passes
  (``p2p_scope = "all"``), or, for a package whose suite takes longer than
  ``slow_suite_s``, every test of the test files that reach the changed files plus a
  seeded sample of the rest (``p2p_scope = "module"``);
- ``solution.patch``: the reverse diff; ``decoys/``: the failing tests deleted, a wrong fix
  at the same place when one exists, and for several bugs each fix that leaves one;
- ``STATEMENT.md``, ``reproduction.py``; ``HINTS.md``: the failing test ids (a hint
  level the env does not show).

The task id is ``<package>-<hash of the mutants' ids>`` and the only tag is ``synthetic``:
agents see both, so neither names the function or the mutation. The tests run through a
:class:`TestRunner`: :class:`HostRunner` (plain host subprocesses, for a package that is
your own code), or the sandboxed one ``repogym synth --pypi`` passes.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import fnmatch
import hashlib
import itertools
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from repogym.sandbox.base import WORKSPACE
from repogym.scenarios import bug_reports
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.history import asserting_script, clock_tests
from repogym.scenarios.mutation import Mutant, file_diff, function_names, mutants
from repogym.scenarios.patches import is_test_file, junit_key
from repogym.scenarios.pypi import METADATA_FILES, is_artefact
from repogym.scenarios.swebench import hidden_tests_dest
from repogym.scenarios.task import pytest_command

#: The pytest plugin that reports per-test outcomes, the functions each test reaches and
#: the calls it makes into the package (copied into sandboxes; stdlib only).
PROBE_DIR = Path(__file__).parent / "probe"
_CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git")


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What a copy of the package leaves out: caches, and of an ``*.egg-info`` folder all
    but the project's metadata (portion reads its own version with ``importlib.metadata``;
    the rest, ``SOURCES.txt``, would list the hidden test files)."""
    out = set(_CACHES(folder, names))
    if fnmatch.fnmatch(Path(folder).name, "*.egg-info"):
        out |= {n for n in names if n not in METADATA_FILES}
    return out


#: Mutants of one function tried before synthesis moves on to another function.
TRIALS_PER_FUNCTION = 4
#: Mutants a synthesis may try per task asked for, unless told otherwise.
MUTANTS_PER_TASK = 30


def mutant_budget(max_tasks: int, max_trials: int | None = None) -> int:
    """Mutants to try at most for ``max_tasks`` tasks: ``max_trials`` when given, else
    :data:`MUTANTS_PER_TASK` per task."""
    return max_trials or MUTANTS_PER_TASK * max_tasks


#: Most tests a task may list as fail_to_pass (more is a crash, not one bug).
MAX_FAIL_TO_PASS = 19
#: Operators whose bug is the easiest kind (a dropped call, ``return None``) ...
CHEAP_OPERATORS = ("return_value", "remove_call")
#: ... and the largest share of a synthesis's bugs they may make.
MAX_CHEAP_SHARE = 0.25
#: A full run of the package's tests longer than this (seconds) makes p2p_scope "module".
SLOW_SUITE_S = 60.0
#: Shortest test-spec timeout of a task; longer for a slow suite (5 full runs).
MIN_TIMEOUT_S = 120
#: Failing tests tried per bug for a report.
_REPORT_TESTS = 4
_CRASH = re.compile(r"\b(ImportError|ModuleNotFoundError|SyntaxError|IndentationError)\b")


class SynthError(ValueError):
    """The package cannot be used for synthesis; the message says why and how to fix it."""


# -- running the package's tests ----------------------------------------------------------
def run_tests(
    root: Path, node_ids: list[str], timeout_s: float
) -> tuple[dict[str, str], dict[str, str]]:
    """(node id -> passed/failed/error/skipped/missing, node id -> failure message), from a
    plain pytest subprocess."""
    with tempfile.TemporaryDirectory(prefix="repogym-synth-") as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    f"--junitxml={report}",
                ],
                cwd=root,
                env=env,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return dict.fromkeys(node_ids, "error"), {}
        cases, messages = _parse(report)
    return (
        {t: cases.get(junit_key(t), "missing") for t in node_ids},
        {t: messages.get(junit_key(t), "") for t in node_ids},
    )


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
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    ids = [line.strip() for line in res.stdout.splitlines() if "::" in line]
    if not ids:
        raise SynthError(
            f"{root}: pytest collected no tests ({res.stdout[-500:]}). Fix: "
            "give a package folder whose tests run with `python -m pytest` there"
        )
    return ids


def probe_records(text: str) -> list[dict]:
    """The JSON objects of the probe's output, one per line (others skipped)."""
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def calls_of(records: list[dict]) -> dict[str, list[dict]]:
    """Node id -> the calls it made into the package, from probe records."""
    return {
        r["calls"]: list(r.get("seq", []))
        for r in records
        if isinstance(r.get("calls"), str) and isinstance(r.get("seq", []), list)
    }


class TestRunner(Protocol):
    """How synthesis runs a package's tests (see :class:`HostRunner`)."""

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        """The node ids to use (every one must pass on the unmutated package)."""
        ...

    def run(
        self, root: Path, node_ids: list[str], timeout_s: float
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(node id -> status, node id -> failure message) for the package as it is now."""
        ...

    def calls(
        self, root: Path, node_ids: list[str], hidden: Collection[str], timeout_s: float
    ) -> dict[str, list[dict]]:
        """Node id -> the calls it makes from the ``hidden`` test files into the package
        (``rg_calls`` records), for the package as it is now."""
        ...

    def script(
        self, root: Path, text: str, hidden: Collection[str], timeout_s: float
    ) -> tuple[int, str]:
        """(exit status, output) of ``python reproduction.py`` holding ``text``, run at
        the root of the package as it is now, without its ``hidden`` files."""
        ...


class HostRunner:
    """Plain host subprocesses (:func:`collect`, :func:`run_tests`): trusted code only."""

    def collect(self, root: Path, timeout_s: float) -> list[str]:
        return collect(root, timeout_s)

    def run(
        self, root: Path, node_ids: list[str], timeout_s: float
    ) -> tuple[dict[str, str], dict[str, str]]:
        return run_tests(root, node_ids, timeout_s)

    def calls(
        self, root: Path, node_ids: list[str], hidden: Collection[str], timeout_s: float
    ) -> dict[str, list[dict]]:
        with tempfile.TemporaryDirectory(prefix="repogym-calls-") as tmp:
            config, out = Path(tmp) / "calls.json", Path(tmp) / "out.jsonl"
            config.write_text(json.dumps({"tests": sorted(hidden)}))
            env = {
                **os.environ,
                "PYTHONDONTWRITEBYTECODE": "1",
                "RG_PROBE_OUT": str(out),
                "RG_PROBE_CALLS": str(config),
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "PYTHONPATH": os.pathsep.join([str(PROBE_DIR), os.environ.get("PYTHONPATH", "")]),
            }
            try:
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        "-p",
                        "rg_probe",
                        *node_ids,
                    ],
                    cwd=root,
                    env=env,
                    capture_output=True,
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return {}
            return calls_of(probe_records(out.read_text() if out.is_file() else ""))

    def script(
        self, root: Path, text: str, hidden: Collection[str], timeout_s: float
    ) -> tuple[int, str]:
        with tempfile.TemporaryDirectory(prefix="repogym-repro-") as tmp:
            work = Path(tmp) / "repo"
            shutil.copytree(root, work, ignore=_ignored)
            for rel in hidden:
                (work / rel).unlink(missing_ok=True)
            (work / "reproduction.py").write_text(text)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            try:
                res = subprocess.run(
                    [sys.executable, "reproduction.py"],
                    cwd=work,
                    env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return 124, f"timed out after {timeout_s}s"
            return res.returncode, (res.stdout + res.stderr)[-3000:]


# -- bugs ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Bug:
    """One or more mutants applied together, and what they break.

    Attributes:
        mutants: The mutants (in different functions).
        failing: The tests that fail with all of them.
        messages: Failure message per failing test.
        parts: For several mutants, the tests each one alone fails.
    """

    mutants: tuple[Mutant, ...]
    failing: tuple[str, ...]
    messages: dict[str, str]
    parts: tuple[tuple[str, ...], ...] = ()

    @property
    def id(self) -> str:
        return "+".join(sorted(m.id for m in self.mutants))

    @property
    def cheap(self) -> int:
        return sum(m.operator in CHEAP_OPERATORS for m in self.mutants)


def merge_sources(original: str, variants: Sequence[str]) -> str | None:
    """``original`` with the edits of every variant (each an edit of ``original``) applied;
    None when two of them change overlapping lines or insert at the same place."""
    base = original.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    for text in variants:
        new = text.splitlines(keepends=True)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, base, new, autojunk=False
        ).get_opcodes():
            if tag != "equal":
                edits.append((i1, i2, new[j1:j2]))
    edits.sort(key=lambda e: (e[0], e[1]))
    for (a1, a2, _), (b1, _, _) in itertools.pairwise(edits):
        if b1 < a2 or b1 == a1:
            return None
    out = list(base)
    for i1, i2, lines in reversed(edits):
        out[i1:i2] = lines
    return "".join(out)


def bug_changes(originals: dict[str, str], mutated: Sequence[Mutant]) -> dict[str, str] | None:
    """File -> buggy text for mutants applied together (None: they clash)."""
    by_file: dict[str, list[str]] = {}
    for m in mutated:
        by_file.setdefault(m.file, []).append(m.source)
    out = {}
    for file, sources in by_file.items():
        merged = merge_sources(originals[file], sources)
        if merged is None:
            return None
        out[file] = merged
    return out


# -- the task folder ----------------------------------------------------------------------
@dataclasses.dataclass
class TaskFiles:
    """Everything a task folder is written from (see :func:`write_task`).

    Attributes:
        id: The task id (also the folder's name).
        repo: The package as it should be (the gold state), with its test files.
        hidden: Repository paths of its test files (left out of ``repo/``, copied to
            ``tests/``).
        tests_dest: Where the hidden tests go at grading.
        buggy: Repository path -> the text with the bug (the gold patch reverts it).
        fail_to_pass, pass_to_pass: The listed tests.
        statement: What the agent is told.
        reproduction: ``reproduction.py`` (also in the statement), or None.
        p2p_scope: ``all`` (every other passing test is listed) or ``module``.
        environment, ini_options: The task's ``[environment]`` and pytest settings.
        plugins: pytest plugins of the dependencies, named with ``-p`` in the command.
        tags, split, timeout_s, max_steps: As in task.toml.
        decoys: Extra decoys, name -> patch (the test-deletion ones are always added).
        hints: The failing test ids, written to ``HINTS.md``.
        comment: A first comment line for task.toml (where the task comes from).
        extra_toml: More TOML tables, appended as they are (e.g. provenance).
    """

    id: str
    repo: Path
    hidden: Sequence[str]
    tests_dest: str
    buggy: dict[str, str]
    fail_to_pass: Sequence[str]
    pass_to_pass: Sequence[str]
    statement: str
    reproduction: str | None = None
    p2p_scope: str = "all"
    environment: DependencySpec | None = None
    ini_options: dict[str, str] = dataclasses.field(default_factory=dict)
    plugins: Sequence[str] = ()
    tags: Sequence[str] = ("synthetic",)
    split: str = "train"
    timeout_s: float = MIN_TIMEOUT_S
    max_steps: int = 30
    decoys: dict[str, str] = dataclasses.field(default_factory=dict)
    hints: Sequence[str] = ()
    comment: str = ""
    extra_toml: str = ""

    def gold(self) -> str:
        """The fix: every buggy file back to its text in ``repo``."""
        return "".join(
            file_diff(rel, text, (self.repo / rel).read_text(encoding="utf-8"))
            for rel, text in sorted(self.buggy.items())
        )


def write_task(files: TaskFiles, out: Path) -> Path:
    """Write ``files`` as the task folder ``out/<id>`` (replacing one that is there):
    ``repo/`` (the package with the bug, without the hidden files, compiled files or
    packaging file lists), ``tests/``, ``solution.patch``, ``decoys/``, ``STATEMENT.md``,
    ``reproduction.py``, ``HINTS.md`` and ``task.toml``."""
    root = out / files.id
    if root.exists():
        shutil.rmtree(root)
    hidden = set(files.hidden)

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(files.repo)
        return {
            n for n in names if (rel / n).as_posix() in hidden or is_artefact((rel / n).as_posix())
        }

    shutil.copytree(files.repo, root / "repo", ignore=ignore)
    for rel, text in files.buggy.items():
        (root / "repo" / rel).write_text(text, encoding="utf-8")
    (root / "tests").mkdir()
    for rel in files.hidden:
        dest = (
            root
            / "tests"
            / (rel if files.tests_dest == "." else os.path.relpath(rel, files.tests_dest))
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(files.repo / rel, dest)
    (root / "solution.patch").write_text(files.gold())
    (root / "decoys").mkdir()
    decoys = {**deletion_decoys(files.repo, list(files.fail_to_pass)), **files.decoys}
    for name, patch in sorted(decoys.items()):
        (root / "decoys" / name).write_text(patch)
    (root / "STATEMENT.md").write_text(files.statement)
    if files.reproduction:
        (root / "reproduction.py").write_text(files.reproduction)
    if files.hints:
        (root / "HINTS.md").write_text(
            "The tests that fail with the bug:\n\n" + "".join(f"- `{t}`\n" for t in files.hints)
        )
    (root / "task.toml").write_text(_toml(files))
    return root


def _toml(f: TaskFiles) -> str:
    q = json.dumps
    ini = "".join(f"{k} = {q(v)}\n" for k, v in sorted(f.ini_options.items()))
    head = "".join(f"# {line}\n" for line in f.comment.splitlines())
    return (
        f"{head}# (the id and tags are shown to agents: they name no function.)\n"
        f'id = {q(f.id)}\nversion = 0\nstatement_file = "STATEMENT.md"\n'
        f"split = {q(f.split)}\ntags = {q(list(f.tags))}\nmax_steps = {f.max_steps}\n\n"
        f"[verifier]\ntests_dest = {q(f.tests_dest)}\n"
        f"command = {q(pytest_command(f.plugins))}\n"
        f"timeout_s = {int(f.timeout_s)}\np2p_scope = {q(f.p2p_scope)}\n"
        f"fail_to_pass = {q(list(f.fail_to_pass))}\n"
        f"pass_to_pass = {q(list(f.pass_to_pass))}\n"
        + (f"\n[verifier.ini_options]\n{ini}" if ini else "")
        + (f"\n{f.environment.to_toml()}" if f.environment else "")
        + (f"\n{f.extra_toml.strip()}\n" if f.extra_toml.strip() else "")
    )


# -- the package ------------------------------------------------------------------------
@dataclasses.dataclass
class _Package:
    root: Path
    name: str
    node_ids: list[str]
    test_files: list[str]
    dest: str
    sources: list[str]
    runner: TestRunner = dataclasses.field(default_factory=HostRunner)
    dependencies: DependencySpec | None = None
    ini_options: dict[str, str] = dataclasses.field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    suite_s: float = 0.0

    @property
    def paths(self) -> list[str]:
        """Workspace folders the package is imported from (``src``)."""
        return [
            str(PurePosixPath(p).relative_to("/workspace"))
            for p in self.ini_options.get("pythonpath", "").split()
            if p.startswith("/workspace/")
        ]


def _scan(root: Path, timeout_s: float, runner: TestRunner, name: str = "") -> _Package:
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts
    )
    test_files = [f for f in files if is_test_file(f) or Path(f).name == "conftest.py"]
    if not test_files:
        raise SynthError(
            f"{name or root}: no test files (test_*.py or *_test.py) in it. "
            "Fix: give a package with its tests (a source distribution without "
            "them cannot be used)"
        )
    dest = hidden_tests_dest(test_files)
    hidden = (
        (lambda f: f in test_files)
        if dest == "."
        else (lambda f: f == dest or f.startswith(dest + "/"))
    )
    sources = [f for f in files if not hidden(f)]
    collected = runner.collect(root, timeout_s)
    clocked = clock_tests(root, collected)  # they pass or fail with the machine's load
    return _Package(
        root,
        root.name,
        [t for t in collected if t not in clocked],
        test_files if dest == "." else [f for f in files if hidden(f)],
        dest,
        sources,
        runner,
    )


def synthesize(
    package_dir: str | Path,
    out: str | Path,
    *,
    max_tasks: int = 10,
    max_trials: int | None = None,
    say: Callable[[str], None] | None = None,
    **options: Any,
) -> list[Path]:
    """Write up to ``max_tasks`` task folders made by mutating ``package_dir``.

    Args:
        package_dir: A folder whose tests pass with ``python -m pytest`` run inside it.
        out: Where task folders are written (``<package>-<hash of the mutants' ids>``).
        max_tasks: Stop after this many tasks.
        seed: Seeds the order mutants are tried in and any pass_to_pass sample.
        combined: Share of the tasks that hold 2 or 3 bugs (0 to 1).
        p2p_sample: Tests sampled outside the changed files' test files when the suite is
            too slow to list whole (``p2p_scope = "module"``).
        max_trials: Mutants to try at most (default ``30 * max_tasks``).
        timeout_s: Limit for one test run.
        runner: Runs the tests (default :class:`HostRunner`).
        name: The package's name in task ids and statements (default: the folder's).
        only: Mutate only these files or the files under these folders (repository
            paths, e.g. ``src/pkg``; default: every file that is not a test).
        environment: The tasks' dependencies, written as ``[environment]``.
        ini_options: Written as the tasks' test spec (``[verifier] ini_options``).
        plugins: pytest plugins the test spec's command names (``-p``).
        split: The tasks' split; a ``test`` task always lists every passing test.
        slow_suite_s: A full run longer than this lists the changed files' tests and a
            sample (on the ``train`` split only).
        note: Appended to every statement (e.g. how to import a src layout).
        say: Told what the synthesis did and where its time went, at the end.
        options: ``seed`` and the rest above, as :class:`Synthesis` takes them.

    Returns:
        The task folders written.

    Raises:
        SynthError: the package has no tests, or they do not all pass unmutated.
    """
    with Synthesis(
        package_dir, out, max_trials=mutant_budget(max_tasks, max_trials), say=say, **options
    ) as synthesis:
        written = synthesis.more(max_tasks)
        if say is not None:
            say(f"{synthesis.name}: {len(written)} tasks; {synthesis.summary()}")
        return written


class Synthesis:
    """A package opened for mutation, whose tasks are drawn in batches.

    ``with Synthesis(...) as s:`` copies the package, runs its tests unmutated and lists
    its functions; each :meth:`more` writes up to that many further task folders, trying
    mutants where the last batch stopped, until ``max_trials`` mutants have been tried
    (:attr:`exhausted`). A caller that keeps only some of the tasks written (those that
    validate) asks for more until it has enough: ``repogym synth --pypi --max-tasks N``
    does. :func:`synthesize` is one batch.

    Args:
        package_dir, out, seed, combined, p2p_sample, timeout_s, runner, name, only,
            environment, ini_options, plugins, split, slow_suite_s, note, say: As
            :func:`synthesize` takes them.
        max_trials: Mutants to try at most over every batch.

    Raises:
        SynthError: (on entering) the package has no tests, or they do not all pass
            unmutated.
    """

    def __init__(
        self,
        package_dir: str | Path,
        out: str | Path,
        *,
        max_trials: int = MUTANTS_PER_TASK * 10,
        seed: int = 0,
        combined: float = 0.0,
        p2p_sample: int = 50,
        timeout_s: float = 120.0,
        runner: TestRunner | None = None,
        name: str | None = None,
        only: Collection[str] | None = None,
        environment: DependencySpec | None = None,
        ini_options: dict[str, str] | None = None,
        plugins: Sequence[str] = (),
        split: str = "train",
        slow_suite_s: float = SLOW_SUITE_S,
        note: str = "",
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.package_dir, self.out = Path(package_dir).resolve(), Path(out)
        self.max_trials, self.combined, self.timeout_s = max_trials, combined, timeout_s
        self.rng = random.Random(seed)
        self.p2p_sample, self.runner, self.only = p2p_sample, runner, only
        self.environment, self.ini_options = environment, dict(ini_options or {})
        self.plugins, self.split, self.slow_suite_s = tuple(plugins), split, slow_suite_s
        self.note, self.say = note, say
        #: The package's name in task ids and statements.
        self.name = name or self.package_dir.name
        self._work: Path | None = None
        self._maker: _Maker | None = None

    def __enter__(self) -> Synthesis:
        self._work = Path(tempfile.mkdtemp(prefix="repogym-synth-"))
        try:
            self._open(self._work)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None

    def _open(self, work: Path) -> None:
        say = self.say
        shutil.copytree(self.package_dir, work / "pkg", ignore=_ignored)
        start = time.monotonic()
        pkg = _scan(work / "pkg", self.timeout_s, self.runner or HostRunner(), self.name)
        if say is not None:
            say(f"{len(pkg.node_ids)} tests collected in {time.monotonic() - start:.0f}s")
        pkg.name = self.name
        pkg.dependencies, pkg.ini_options = self.environment, self.ini_options
        pkg.plugins = self.plugins
        if self.only is not None:
            pkg.sources = [
                f
                for f in pkg.sources
                if any(f == o or f.startswith(o.rstrip("/") + "/") for o in self.only)
            ]
        start = time.monotonic()
        base, _ = pkg.runner.run(pkg.root, pkg.node_ids, self.timeout_s)
        pkg.suite_s = float(getattr(pkg.runner, "suite_seconds", 0.0) or time.monotonic() - start)
        broken = [t for t, s in base.items() if s != "passed"]
        if broken:
            raise SynthError(
                f"{self.package_dir}: tests fail before any mutation: {broken[:5]}. "
                "Fix: synthesise from a package whose tests all pass"
            )
        if not pkg.sources:
            raise SynthError(
                f"{self.name}: no code to mutate: no module of the package was found outside "
                "its tests (looked at the repository's root, under src/ and beside its "
                "*.egg-info"
                + (f", within {', '.join(self.only)}" if self.only else "")
                + "). Fix: synthesise from a package whose code is a module or package there"
            )
        reached = getattr(pkg.runner, "reached_files", None)
        files = reached() if reached is not None else None
        if files is not None and pkg.sources and not set(pkg.sources) & files:
            shown = ", ".join(sorted(pkg.sources)[:3]) + ("..." if len(pkg.sources) > 3 else "")
            raise SynthError(
                f"{self.name}: no test runs the package's code in the repository ({shown}): "
                "the tests exercise another copy of it. pytest imports some packages itself "
                "before any test does (iniconfig, pluggy and packaging are its own "
                "dependencies), and the tests then get that copy, so no bug in the "
                "repository's copy can fail a test. Fix: synthesise from a package that "
                "pytest does not load itself"
            )
        functions = [
            (f, q) for f in pkg.sources for q in function_names((pkg.root / f).read_text())
        ]
        if say is not None:
            say(
                f"a run of every test: {time.monotonic() - start:.1f}s; {len(functions)} "
                f"functions in {len(pkg.sources)} files to mutate"
            )
        self.rng.shuffle(functions)
        self._maker = _Maker(
            pkg,
            self.out,
            self.rng,
            self.timeout_s,
            self.p2p_sample,
            self.split,
            self.slow_suite_s,
            self.note,
            say,
        )
        self._maker.draw_from(functions, self.max_trials)

    def more(self, n: int) -> list[Path]:
        """Up to ``n`` further task folders (fewer once :attr:`exhausted`)."""
        if self._maker is None:
            raise RuntimeError("Synthesis.more() needs the package opened: use `with`")
        return self._maker.make(n, self.combined)

    @property
    def exhausted(self) -> bool:
        """Whether every mutant the budget allows has been tried."""
        return self._maker is not None and self._maker.exhausted

    def summary(self) -> str:
        """What the synthesis did so far (:meth:`_Maker.summary`)."""
        return self._maker.summary() if self._maker is not None else "not opened"


@contextlib.contextmanager
def applied(root: Path, changes: dict[str, str]) -> Iterator[None]:
    """``changes`` (path -> text) written into the tree at ``root`` for the block's
    duration, then each file put back as it was."""
    before = {rel: (root / rel).read_text(encoding="utf-8") for rel in changes}
    for rel, text in changes.items():
        (root / rel).write_text(text, encoding="utf-8")
    try:
        yield
    finally:
        for rel, text in before.items():
            (root / rel).write_text(text, encoding="utf-8")


# -- bug reports ----------------------------------------------------------------------------
class Reporter:
    """Writes verified bug reports for bugs in one package (see :mod:`bug_reports`).

    Args:
        runner: Runs the package's tests, the call recorder and scripts (collected on
            ``root`` already: its pristine state is the gold state).
        root: The package with its tests, in the gold state; a bug's files are written
            into it while its runs last, then put back.
        hidden: Its test files (the recorder's test code; left out of the scripts' runs).
        node_ids: Its listed tests (their names must not appear in a report).
        name: The package's name in the report.
        paths: Folders the package is imported from (``src``), for the script.
        note: Appended to the statement.
        timeout_s: Limit of one run.
    """

    def __init__(
        self,
        runner: TestRunner,
        root: Path,
        hidden: Sequence[str],
        node_ids: Sequence[str],
        *,
        name: str,
        paths: Sequence[str] = (),
        note: str = "",
        timeout_s: float = 120.0,
    ) -> None:
        self.runner, self.root, self.hidden = runner, root, list(hidden)
        self.node_ids, self.name, self.paths = list(node_ids), name, list(paths)
        self.note, self.timeout_s = note, timeout_s
        self._pristine: dict[str, list[dict]] = {}
        self._test_files = set(self.hidden)
        #: Why checks were refused or bugs got no report, reason -> count.
        self.refusals: dict[str, int] = {}

    def _refuse(self, why: str) -> None:
        self.refusals[why] = self.refusals.get(why, 0) + 1

    def applied(self, changes: dict[str, str]) -> contextlib.AbstractContextManager[None]:
        """``changes`` (path -> text) written into ``root`` for the block's duration."""
        return applied(self.root, changes)

    def report(
        self, changes: dict[str, str], parts: Sequence[tuple[dict[str, str], Sequence[str]]]
    ) -> tuple[str, str] | None:
        """(statement, reproduction) for the bug(s) that ``changes`` (path -> buggy text)
        make, or None when no verified report without leaks can be written. ``parts``: each
        bug's own changes and the tests it fails alone (one part, ``(changes, failing)``,
        for a single bug); each gets a check, verified with that bug alone."""
        gold = self.gold(changes)
        buggy_sources = list(changes.values())
        found = []
        for part_changes, tests in parts:
            check = self._check(dict(part_changes), list(tests), gold, buggy_sources)
            if check is None:
                return None
            found.append(check)
        if not found:
            return None
        made, why = self.combined(changes, found, verify=len(found) > 1)
        if made is None:
            self._refuse(f"report: {why}")
        return made

    def gold(self, changes: dict[str, str]) -> str:
        """The fix of ``changes``: each file back to its text in ``root``."""
        return "".join(
            file_diff(f, t, (self.root / f).read_text(encoding="utf-8"))
            for f, t in sorted(changes.items())
        )

    def check(
        self, changes: dict[str, str], tests: Sequence[str], shortest: bool = False
    ) -> tuple[bug_reports.Check, str] | None:
        """A verified check of the one bug ``changes`` makes (and what its script prints
        with the bug), found once and reused in any combination (:meth:`combined`);
        ``shortest``: try the candidates with the shortest scripts first (several checks
        share one statement)."""
        return self._check(
            dict(changes),
            list(tests),
            self.gold(changes),
            list(changes.values()),
            shortest=shortest,
        )

    def draft(self, found: Sequence[tuple[bug_reports.Check, str]]) -> tuple[str, str]:
        """(statement, reproduction) holding the checks ``found`` (runs nothing)."""
        text = bug_reports.script([c for c, _ in found], self.paths)
        return bug_reports.statement(
            self.name, [c for c, _ in found], text, [o for _, o in found], self.note
        ), text

    def combined(
        self,
        changes: dict[str, str],
        found: Sequence[tuple[bug_reports.Check, str]],
        verify: bool = True,
    ) -> tuple[tuple[str, str] | None, str]:
        """((statement, reproduction), "") for the bugs of ``changes`` from their verified
        checks ``found``, or (None, why not). ``verify``: run the script, which must fail
        by its own assertion with every bug in and pass at the gold code."""
        gold, buggy_sources = self.gold(changes), list(changes.values())
        stmt, text = self.draft(found)
        if len(stmt) > bug_reports.MAX_CHARS:
            return None, f"statement over {bug_reports.MAX_CHARS} characters"
        if bug_reports.leaks(stmt, gold, buggy_sources, self.node_ids):
            return None, "statement leaks a fix or a test name"
        if verify and (why := self.verify(text, changes)):
            return None, why
        return (stmt, text), ""

    def verify(self, text: str, changes: dict[str, str]) -> str:
        """Why the reproduction ``text`` is not verified ("" when it is): it must fail by
        its own assertion with ``changes`` in and pass at the gold code."""
        if not self._fails(text, changes)[0]:
            return "script does not fail by its own assertion with the bugs"
        if not self._passes(text):
            return "script fails at the gold code"
        return ""

    def _gold_calls(self, tests: list[str]) -> dict[str, list[dict]]:
        todo = [t for t in tests if t not in self._pristine]
        if todo:
            got = self.runner.calls(self.root, todo, self.hidden, self.timeout_s)
            for t in todo:
                self._pristine[t] = got.get(t, [])
        return {t: self._pristine[t] for t in tests}

    def _with_bug(self, text: str, changes: dict[str, str]) -> tuple[bool, str]:
        """Whether the script ``text`` fails by its own assertion with the bug in
        ``changes``, and its output."""
        with self.applied(changes):
            code, output = self.runner.script(self.root, text, self.hidden, self.timeout_s)
        return code != 0 and bug_reports.fails_itself(output), output

    def _fails(self, text: str, changes: dict[str, str]) -> tuple[bool, str]:
        fails, output = self._with_bug(text, changes)
        return fails, _observed(output)

    def _cut_at_failure(
        self, c: bug_reports.Check, text: str, changes: dict[str, str]
    ) -> bug_reports.Check | None:
        """``c`` cut after the statement its whole script ``text`` fails at with the bug
        (:func:`repogym.scenarios.bug_reports.cut_at_failure`; one run of the script)."""
        if c.source != "test":
            return None
        fails, output = self._with_bug(text, changes)
        return bug_reports.cut_at_failure(c, output, _SCRIPT_CHARS, self.paths) if fails else None

    def _passes(self, text: str) -> bool:
        code, _ = self.runner.script(self.root, text, self.hidden, self.timeout_s)
        return code == 0

    def _candidates(self, changes: dict[str, str], tests: list[str]) -> list[bug_reports.Check]:
        with self.applied(changes):
            buggy = self.runner.calls(self.root, tests, self.hidden, self.timeout_s)
        pristine = self._gold_calls(tests)
        out = [
            c
            for t in tests
            for c in bug_reports.replay_checks(buggy.get(t, []), pristine.get(t, []))
        ]
        for t in tests:
            file = self.root / t.split("::", 1)[0]
            if file.is_file() and (c := bug_reports.inline_check(file.read_text(), t, self._read)):
                named = [r for r in buggy.get(t, []) if r.get("qualname")]
                function = bug_reports.function_of(named[-1]) if named else ""
                out.append(dataclasses.replace(c, function=function))
        return out

    def _read(self, rel: str) -> str | None:
        """A test file's text (None for any other file: scripts inline test code only)."""
        if rel not in self._test_files:
            return None
        return (self.root / rel).read_text(encoding="utf-8", errors="replace")

    def _check(
        self,
        changes: dict[str, str],
        tests: list[str],
        gold: str,
        buggy_sources: list[str],
        shortest: bool = False,
    ) -> tuple[bug_reports.Check, str] | None:
        """A verified check of the bug in ``changes`` (and what it prints with the bug)."""
        candidates = self._candidates(changes, sorted(tests)[:_REPORT_TESTS])
        if not candidates:
            self._refuse("bug: no call that misbehaves, no inline check")
        if shortest:
            candidates.sort(key=lambda c: len(bug_reports.script([c], self.paths)))
        for c in candidates[:6]:
            text = bug_reports.script([c], self.paths)
            if len(text) > _SCRIPT_CHARS:
                # a long test's body, cut after the check that fails with the bug (the
                # whole script's traceback names it), else after a check that fits
                short = self._cut_at_failure(c, text, changes) or bug_reports.shortened(
                    c, _SCRIPT_CHARS, self.paths
                )
                if short is None:
                    self._refuse("check: script too long")
                    continue
                c, text = short, bug_reports.script([short], self.paths)
            if any(path in text for path in (str(self.root), *_RUN_PATHS)) or bug_reports.leaks(
                text, gold, buggy_sources, self.node_ids
            ):
                self._refuse("check: leaks the fix, a path or a test name")
                continue
            fails, observed = self._fails(text, changes)
            if not fails and c.source == "test" and (c := asserting_check(c)) is not None:
                # the test's code raises from the library with the bug (astor's code
                # generator crashing): the script states what it raised as its own failure
                text = bug_reports.script([c], self.paths)
                fails, observed = self._fails(text, changes)
            if c is None or not fails:
                self._refuse("check: does not fail by its own assertion with the bug")
            elif not self._passes(text):
                self._refuse("check: fails without the bug")
            else:
                return c, observed
        return None


#: The longest reproduction script a report holds (the statement's limit, less room for
#: its sentences).
_SCRIPT_CHARS = bug_reports.MAX_CHARS - 600


def asserting_check(check: bug_reports.Check) -> bug_reports.Check | None:
    """``check`` (a test's inlined body) with what follows its definitions and imports
    wrapped so that an error it raises becomes its own AssertionError naming the error
    (:func:`repogym.scenarios.history.asserting_script`), or None where that cannot be
    written within a statement's length."""
    wrapped = asserting_script("\n".join(check.body))
    if wrapped is None or len(wrapped) > _SCRIPT_CHARS:
        return None
    return dataclasses.replace(check, body=tuple(wrapped.rstrip("\n").splitlines()))


#: Paths of a sandbox run that a recorded call can hold (sqlparse's ``main`` was called with
#: ``/workspace/tests/files/...``): a script naming one points into the hidden tests or a
#: folder the agent's run does not have.
_RUN_PATHS = (WORKSPACE + "/", "/tmp/", "/run/repogym")


# -- combining bugs -------------------------------------------------------------------------
#: Sets of pooled bugs run together, at most, each time a bug enters the pool.
_TRIES_PER_BUG = 3


@dataclasses.dataclass(frozen=True)
class Pooled:
    """A bug waiting to be combined, with its verified check (found once, when it entered
    the pool) and what the check's script printed with the bug."""

    bug: Bug
    check: bug_reports.Check
    observed: str


def choose_members(
    pool: Sequence[Pooled],
    k: int,
    *,
    chars: Callable[[Sequence[Pooled]], int],
    same: Callable[[str], str] = str,
    skip: Collection[frozenset[str]] = (),
    refusals: dict[str, int] | None = None,
    judged: set[frozenset[str]] | None = None,
) -> list[Pooled] | None:
    """``k`` bugs of ``pool`` to combine, chosen before running anything, or None: in
    different functions, the union of their failing tests (a test that ``same`` maps
    several node ids to counted once) at most :data:`MAX_FAIL_TO_PASS`, ``chars`` of them
    (the length of their statement) at most :data:`bug_reports.MAX_CHARS`, and not a set of
    ``skip`` (bug ids); of those, the set in the most files, then the shortest.
    ``refusals`` counts why sets were refused (``set: ...``), each set once (``judged``:
    those counted already)."""
    best: tuple[tuple[int, int], list[Pooled]] | None = None
    for members in itertools.combinations(pool, k):
        ids = frozenset(p.bug.id for p in members)
        why = ""
        if ids in skip:
            continue
        functions = {(m.file, m.function) for p in members for m in p.bug.mutants}
        if len(functions) < sum(len(p.bug.mutants) for p in members):
            why = "set: two bugs in one function"
        elif len({same(t) for p in members for t in p.bug.failing}) > MAX_FAIL_TO_PASS:
            why = f"set: over {MAX_FAIL_TO_PASS} failing tests together"
        else:
            length = chars(members)
            if length > bug_reports.MAX_CHARS:
                why = f"set: statement over {bug_reports.MAX_CHARS} characters"
            else:
                key = (-len({m.file for p in members for m in p.bug.mutants}), length)
                if best is None or key < best[0]:
                    best = (key, list(members))
        if why and refusals is not None and (judged is None or ids not in judged):
            refusals[why] = refusals.get(why, 0) + 1
        if judged is not None:
            judged.add(ids)
    return best[1] if best is not None else None


# -- making tasks ---------------------------------------------------------------------------
class _Maker:
    """Draws bugs, writes their reports and their task folders (see :func:`synthesize`)."""

    def __init__(
        self,
        pkg: _Package,
        out: Path,
        rng: random.Random,
        timeout_s: float,
        p2p_sample: int,
        split: str,
        slow_suite_s: float,
        note: str,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.pkg, self.out, self.rng, self.timeout_s = pkg, out, rng, timeout_s
        self.p2p_sample, self.split, self.note = p2p_sample, split, note
        self.slow = split != "test" and pkg.suite_s > slow_suite_s
        self.originals = {f: (pkg.root / f).read_text() for f in pkg.sources}
        self.reporter = Reporter(
            pkg.runner,
            pkg.root,
            pkg.test_files,
            pkg.node_ids,
            name=pkg.name,
            paths=pkg.paths,
            note=note,
            timeout_s=timeout_s,
        )
        self.components = self.cheap = 0
        self.trials = self.singles = self.kept = self.unreported = 0
        self.seconds: dict[str, float] = {}
        #: Why mutants tried were not kept, reason -> count (see :meth:`_why_not`).
        self.drops: dict[str, int] = {}
        #: Combinations: why sets of pooled bugs were refused (``set:``, before running
        #: anything, each set counted once) or tried and refused (``tried:``), and how
        #: many were ``written``.
        self.combos: dict[str, int] = {}
        self.tries = 0
        self._tried: set[frozenset[str]] = set()
        self._judged: set[frozenset[str]] = set()
        #: Statement length of a set of pooled bugs (ids): drafted once, not on every choice.
        self._lengths: dict[frozenset[str], int] = {}
        self.say = say
        self._start = time.monotonic()
        #: The bugs to come (:meth:`draw_from`), drawn by each call of :meth:`make` where
        #: the last one stopped; ``exhausted`` once every mutant the budget allows was tried.
        self._stream: Iterator[Bug] = iter(())
        self.exhausted = False
        self._pool: list[Pooled] = []
        self._group = rng.choice((2, 3))

    # the whole run
    def draw_from(self, functions: list[tuple[str, str]], max_trials: int) -> None:
        """Draw bugs from ``functions``, in their order, trying at most ``max_trials``
        mutants over every call of :meth:`make`."""
        self._stream = self._bugs(functions, max_trials)

    def make(self, max_tasks: int, combined: float) -> list[Path]:
        """Up to ``max_tasks`` further tasks, drawing bugs where the last call stopped."""
        n_combined = round(max_tasks * max(0.0, min(1.0, combined)))
        written: list[Path] = []
        singles = 0
        if max_tasks <= 0:
            return written
        for bug in self._stream:
            if singles < max_tasks - n_combined:
                if (path := self._single(bug)) is not None:
                    written.append(path)
                    singles += 1
                    self.singles += 1
                    self._progress(f"task {path.name} written")
            elif (pooled := self._pooled(bug)) is not None:
                self._pool.append(pooled)
                for _ in range(_TRIES_PER_BUG):  # sets with the new bug, or sets left
                    members = self._members(self._pool, self._group) or self._members(
                        self._pool, 5 - self._group
                    )
                    if members is None:
                        self._progress(
                            f"no set to combine in a pool of {len(self._pool)} yet; "
                            "refused so far: " + self._combos()
                        )
                        break
                    if len(written) >= max_tasks:
                        break
                    self._tried.add(frozenset(p.bug.id for p in members))
                    if (path := self._combination(members)) is not None:
                        written.append(path)
                        self._pool = [p for p in self._pool if p not in members]
                        self._group = self.rng.choice((2, 3))
            if len(written) >= max_tasks:  # before another mutant is tried
                break
        else:
            self.exhausted = True
        if self._pool:
            self._progress(f"{len(self._pool)} pooled bugs left uncombined")
        return written

    def _members(self, pool: list[Pooled], k: int) -> list[Pooled] | None:
        """``k`` bugs of the pool to combine (:func:`choose_members`), or None."""
        return choose_members(
            pool,
            k,
            same=self._same,
            skip=self._tried,
            refusals=self.combos,
            judged=self._judged,
            chars=self._length,
        )

    def _length(self, members: Sequence[Pooled]) -> int:
        ids = frozenset(p.bug.id for p in members)
        if ids not in self._lengths:
            self._lengths[ids] = len(
                self.reporter.draft([(p.check, p.observed) for p in members])[0]
            )
        return self._lengths[ids]

    # drawing bugs
    def _bugs(self, functions: list[tuple[str, str]], max_trials: int) -> Iterator[Bug]:
        """At most one bug per function, functions in ``rng``'s order, each with up to
        :data:`TRIALS_PER_FUNCTION` of its mutants (cheap operators last)."""
        for file, function in functions:
            if self.trials >= max_trials:
                return
            own = [
                m
                for m in mutants(self.originals[file], file, functions={function})
                if m.function == function
            ]
            self.rng.shuffle(own)
            own.sort(key=lambda m: m.operator in CHEAP_OPERATORS)
            for m in own[:TRIALS_PER_FUNCTION]:
                if self.trials >= max_trials:
                    return
                if m.operator in CHEAP_OPERATORS and (self.cheap + 1) > MAX_CHEAP_SHARE * (
                    self.components + 1
                ):
                    continue
                self.trials += 1
                with self._timed("trials"):
                    bug = self._try(m)
                if bug is None and self.trials % 20 == 0:
                    self._progress(
                        "dropped so far: "
                        + ", ".join(f"{n} {why}" for why, n in sorted(self.drops.items()))
                    )
                if bug is not None:
                    self.kept += 1
                    yield bug
                    break

    def _same(self, node_id: str) -> str:
        same = getattr(self.pkg.runner, "same_test", None)
        return same(node_id) if same is not None else node_id

    def _try(self, m: Mutant) -> Bug | None:
        with self.reporter.applied({m.file: m.source}):
            result, messages = self.pkg.runner.run(self.pkg.root, self.pkg.node_ids, self.timeout_s)
        if why := _why_not(result, messages, self._same):
            self.drops[why] = self.drops.get(why, 0) + 1
            return None
        failing = sorted(t for t, s in result.items() if s != "passed")
        tests = len({self._same(t) for t in failing})
        self._progress(
            f"bug kept: {m.id} fails {tests} tests"
            + (
                f" ({len(failing)} node ids: inherited methods run once per class)"
                if tests < len(failing)
                else ""
            )
        )
        return Bug((m,), tuple(failing), {t: messages.get(t, "") for t in failing})

    def _progress(self, message: str) -> None:
        if self.say is not None:
            self.say(
                f"[{time.monotonic() - self._start:.0f}s, {self.trials} tried, "
                f"{self.singles + self.combos.get('written', 0)} tasks] {message}"
            )

    @contextlib.contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - start

    def summary(self) -> str:
        """What the synthesis did, why mutants were dropped and where its time went."""
        times = ", ".join(f"{k} {v:.0f}s" for k, v in sorted(self.seconds.items()))
        drops = ", ".join(
            f"{n} {why}" for why, n in sorted(self.drops.items(), key=lambda kv: -kv[1])
        )
        refused = ", ".join(
            f"{n} {why}" for why, n in sorted(self.reporter.refusals.items(), key=lambda kv: -kv[1])
        )
        combos = self._combos()
        return (
            f"{self.trials} mutants tried, {self.kept} bugs kept, {self.unreported} "
            f"without a report; dropped: {drops or 'none'}; report refusals: "
            f"{refused or 'none'}; "
            + (
                f"combinations ({self.tries} tried): {combos}; "
                if self.tries or self.combos
                else ""
            )
            + times
        )

    def _combos(self) -> str:
        return (
            ", ".join(f"{n} {why}" for why, n in sorted(self.combos.items(), key=lambda kv: -kv[1]))
            or "none"
        )

    def _count(self, bug: Bug) -> None:
        self.components += len(bug.mutants)
        self.cheap += bug.cheap

    # one task per bug, or per combination
    def _single(self, bug: Bug) -> Path | None:
        m = bug.mutants[0]
        with self._timed("reports"):
            made = self.reporter.report(
                {m.file: m.source}, [({m.file: m.source}, list(bug.failing))]
            )
        if made is None:
            self.unreported += 1
            self._progress(f"no verified report for {m.id}: bug dropped")
            return None
        self._count(bug)
        with self._timed("decoys"):
            decoys = self._wrong_fix(m, list(bug.failing))
        return self._write(bug, {m.file: m.source}, made, decoys)

    def _pooled(self, bug: Bug) -> Pooled | None:
        """``bug`` with its verified check (found once, reused in every combination
        tried), or None when it has none (the bug is dropped, as a single would be)."""
        m = bug.mutants[0]
        with self._timed("reports"):
            found = self.reporter.check({m.file: m.source}, bug.failing, shortest=True)
        if found is None:
            self.unreported += 1
            self._progress(f"no verified report for {m.id}: bug not pooled")
            return None
        self._progress(
            f"bug {m.id} pooled for a combination (a check of "
            f"{len(bug_reports.script([found[0]], self.pkg.paths))} characters)"
        )
        return Pooled(bug, *found)

    def _refused(self, why: str, members: Sequence[Pooled]) -> None:
        self.combos[why] = self.combos.get(why, 0) + 1
        self._progress(f"combination {' + '.join(p.bug.id for p in members)} refused: {why}")

    def _combination(self, members: list[Pooled]) -> Path | None:
        """The task of ``members`` together: one run of the suite with all of them (1 to
        :data:`MAX_FAIL_TO_PASS` failing tests, each member failing one of its own), a
        report from their cached checks, its script run with the bugs and at gold."""
        self.tries += 1
        bugs = [p.bug for p in members]
        ms = [b.mutants[0] for b in bugs]
        changes = bug_changes(self.originals, ms)
        if changes is None:
            self._refused("tried: the changes clash", members)
            return None
        found = [(p.check, p.observed) for p in members]
        made, why = self.reporter.combined(changes, found, verify=False)
        if made is None:
            self._refused(f"tried: {why}", members)
            return None
        with self.reporter.applied(changes), self._timed("combinations"):
            result, messages = self.pkg.runner.run(self.pkg.root, self.pkg.node_ids, self.timeout_s)
        if why := _why_not(result, messages, self._same):
            self._refused(f"tried: together, {why}", members)
            return None
        failing = sorted(t for t, s in result.items() if s != "passed")
        if any(not set(b.failing) & set(failing) for b in bugs):
            self._refused("tried: a bug fails none of its own tests with the others", members)
            return None
        with self._timed("combinations"):
            why = self.reporter.verify(made[1], changes)
        if why:
            self._refused(f"tried: {why}", members)
            return None
        bug = Bug(
            tuple(ms),
            tuple(failing),
            {t: messages.get(t, "") for t in failing},
            tuple(b.failing for b in bugs),
        )
        self._count(bug)
        decoys = {}
        for n, m in enumerate(ms):  # every fix that leaves one of the bugs
            left = {f: (m.source if f == m.file else self.originals[f]) for f in changes}
            decoys[f"partial_fix_{n}.patch"] = "".join(
                file_diff(f, changes[f], left[f]) for f in sorted(changes) if left[f] != changes[f]
            )
        path = self._write(bug, changes, made, decoys)
        self.combos["written"] = self.combos.get("written", 0) + 1
        self._progress(
            f"combined task {path.name} written ({len(ms)} bugs, "
            f"{len(failing)} failing tests, {len(made[0])} characters)"
        )
        return path

    # decoys and the folder
    def _wrong_fix(self, m: Mutant, f2p: list[str]) -> dict[str, str]:
        """A wrong fix at the same place (another mutant there that still fails a test)."""
        for other in mutants(self.originals[m.file], m.file, functions={m.function}):
            if (other.function, other.line) != (m.function, m.line) or other.source == m.source:
                continue
            with self.reporter.applied({m.file: other.source}):
                result, _ = self.pkg.runner.run(self.pkg.root, self.pkg.node_ids, self.timeout_s)
            if any(s != "passed" for s in result.values()):
                return {"wrong_fix.patch": file_diff(m.file, m.source, other.source)}
        return {}

    def _p2p(self, failing: Sequence[str], changed: Collection[str]) -> tuple[list[str], str]:
        others = [t for t in self.pkg.node_ids if t not in set(failing)]
        covering = getattr(self.pkg.runner, "covering", None)
        if not self.slow or covering is None:
            return others, "all"
        files = {t.split("::", 1)[0] for t in covering(changed)} | {
            t.split("::", 1)[0] for t in failing
        }
        near = [t for t in others if t.split("::", 1)[0] in files]
        rest = [t for t in others if t.split("::", 1)[0] not in files]
        sample = self.rng.sample(rest, min(self.p2p_sample, len(rest)))
        return sorted(set(near) | set(sample)), "module"

    def _write(
        self, bug: Bug, changes: dict[str, str], made: tuple[str, str], decoys: dict[str, str]
    ) -> Path:
        digest = hashlib.sha1(bug.id.encode()).hexdigest()[:8]
        task_id = re.sub(r"[^a-z0-9._-]", "-", f"{self.pkg.name}-{digest}".lower()).strip("-")
        p2p, scope = self._p2p(bug.failing, set(changes))
        statement, reproduction = made
        timeout = max(MIN_TIMEOUT_S, math.ceil(5 * self.pkg.suite_s))
        return write_task(
            TaskFiles(
                id=task_id,
                repo=self.pkg.root,
                hidden=self.pkg.test_files,
                tests_dest=self.pkg.dest,
                buggy=changes,
                fail_to_pass=list(bug.failing),
                pass_to_pass=p2p,
                statement=statement,
                reproduction=reproduction,
                p2p_scope=scope,
                environment=self.pkg.dependencies,
                ini_options=self.pkg.ini_options,
                plugins=self.pkg.plugins,
                split=self.split,
                timeout_s=timeout,
                decoys=decoys,
                hints=list(bug.failing),
                comment=f"Synthesised by `repogym synth`: {' + '.join(m.id for m in bug.mutants)}",
            ),
            self.out,
        )


def _why_not(
    result: dict[str, str], messages: dict[str, str], same: Callable[[str], str] = str
) -> str:
    """Why a mutant that gives ``result`` is not a bug to keep ("" when it is one).
    ``same``: what a node id is as a test (:meth:`SandboxRunner.same_test`: a method
    that a mixin gives several test classes is one test, run once per class)."""
    failing = [t for t, s in result.items() if s != "passed"]
    if not failing:
        return "no test fails"
    if any(result[t] == "timed out" for t in failing):
        return "its tests time out (an endless loop?)"
    if len({same(t) for t in failing}) > MAX_FAIL_TO_PASS:
        return f"over {MAX_FAIL_TO_PASS} tests fail"
    if any(result[t] == "missing" or _CRASH.search(messages.get(t, "")) for t in failing):
        return "import or collection error"  # not a bug a user would report
    return ""


def _observed(output: str) -> str:
    """The last AssertionError line of a script's output, without memory addresses."""
    lines = [ln for ln in output.splitlines() if "AssertionError" in ln]
    return bug_reports.without_addresses(
        lines[-1].split("AssertionError:", 1)[-1].strip() if lines else ""
    )


# -- test-gaming decoys -------------------------------------------------------------------
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
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name in names
        ):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            drop |= set(range(first, node.end_lineno + 1))
    return "".join(
        line for i, line in enumerate(text.splitlines(keepends=True), 1) if i not in drop
    )
