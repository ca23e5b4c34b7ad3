"""Checks of a built task beyond validation: nothing of the fix leaks, the bug report's
reproduction works, and a regression anywhere else is graded.

- :func:`leak_scan` runs a scanner inside a real sandbox of each task (the agent's view:
  its workspace, its dependencies, the sandbox's root file system) that walks every
  readable file and looks for the fix: each hunk of the gold patch as the fixed code reads
  (the restored lines with two lines of context each side, compared line by line without
  indentation), found with ``grep -F`` on its most distinctive line and then confirmed.
  The file system outside the workspace is the same for the tasks of one set of dependencies, so
  it is walked once per set of dependencies (in the first task's sandbox, for every task's
  fix); each workspace is walked in its own task's sandbox, where a match in a file the
  bug changed is not counted (sibling functions of one signature hold the same lines).
- :func:`artefacts` lists compiled files, caches and packaging file lists in ``repo/``.
- :func:`check_reproduction` runs ``reproduction.py`` in a sandbox of the task, without
  the fix (it must fail with an AssertionError) and with the gold patch (it must exit 0).
- :func:`sabotage` grades the gold patch together with another task's bug (a function
  the other task's failing tests reach), or, where no task of the package lends one, with
  a mutant of another function that the package's tests reach and catch: with every
  passing test listed, that must not earn full reward.
- :func:`scope` runs each package's whole test suite once, traced, on the fixed code: the
  test files no graded test comes from (with why), and for each task the listed
  pass_to_pass tests that reach the code its bug changed (coverage at gold: a regression
  beside the fix is graded only where such tests exist).
- :func:`stability` grades the gold patch and no change under the usual conditions, under
  another ``PYTHONHASHSEED`` and beside a CPU hog: no test's outcome may change (a test
  that asserts an exact ``hash()``, a set's order or a wall-clock threshold does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from repogym.quality.sandboxed_tests import SandboxRunner, run_reproduction, test_files
from repogym.quality.validate import PatchGrader
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.base import WORKSPACE, SandboxError
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios import bug_reports
from repogym.scenarios.mutation import (
    Mutant,
    changed_lines,
    file_diff,
    function_names,
    iter_sources,
    mutants,
    touched_functions,
)
from repogym.scenarios.patches import is_test_file, split_diff
from repogym.scenarios.pypi import is_artefact
from repogym.scenarios.task import Task

SCANNER = Path(__file__).parent / "data" / "leak_scanner.py"
#: Lines of unchanged code kept each side of a hunk's restored lines.
CONTEXT = 2
#: Seconds the scan of one file system may take.
SCAN_TIMEOUT_S = 900
_BIND = "rgleakscan"  # the scanner's own folder (it holds the needles): never scanned


# -- what to look for --------------------------------------------------------------------
def fix_blocks(gold: str, buggy: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(key line, block) per hunk of ``gold``: the block is the code as the fix leaves it
    around the lines it restores (:data:`CONTEXT` lines each side; stripped, blank lines
    dropped, joined by newlines), the key its longest restored line that the buggy file
    does not hold (else its longest line), which ``grep -F`` looks for first."""
    out = []
    for patch in split_diff(gold):
        have = {ln.strip() for ln in (buggy or {}).get(patch.new, "").splitlines()}
        for hunk in _hunks(patch.text):
            new = [(k, t) for k, t in hunk if k in " +"]
            added = [i for i, (k, _) in enumerate(new) if k == "+"]
            if added:
                lo, hi = added[0] - CONTEXT, added[-1] + CONTEXT
            else:  # a deletion: the lines around it, now adjacent
                at = next((i for i, (k, _) in enumerate(hunk) if k == "-"), 0)
                before = sum(1 for k, _ in hunk[:at] if k == " ")
                lo, hi = before - CONTEXT, before + CONTEXT - 1
            window = [t.strip() for _, t in new[max(lo, 0) : hi + 1] if t.strip()]
            restored = [t.strip() for k, t in new if k == "+" and t.strip()]
            fresh = [t for t in restored if t not in have]
            key = max(fresh or restored or window, key=len, default="")
            if window and key:
                out.append((key, "\n".join(window)))
    return out


def _hunks(text: str) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if line.startswith("@@"):
            out.append([])
        elif out and line[:1] in " +-" and not line.startswith(("+++", "---")):
            out[-1].append((line[:1], line[1:]))
    return out


def _buggy(task: Task, gold: str) -> dict[str, str]:
    out = {}
    for p in split_diff(gold):
        path = task.repo_dir / p.new
        if path.is_file():
            out[p.new] = path.read_text(encoding="utf-8", errors="replace")
    return out


# -- scanning ------------------------------------------------------------------------------
def _scan(
    task: Task, templates: TemplateCache, needles: list[dict], mode: str, sandbox: str
) -> list[dict]:
    """Hits of one scanner run in a sandbox of ``task`` (``mode``: ``system`` walks
    everything but the workspace, ``workspace`` only the workspace)."""
    with tempfile.TemporaryDirectory(prefix="repogym-scan-") as tmp:
        folder = Path(tmp) / _BIND
        folder.mkdir()
        shutil.copy(SCANNER, folder / "scan.py")
        (folder / "needles.json").write_text(
            json.dumps({"needles": needles, "mode": mode, "skip_name": _BIND})
        )
        for p in (folder, *folder.iterdir()):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        template = templates.get(task.repo_dir, task.sandbox_dependencies())
        limits = Limits(timeout_s=SCAN_TIMEOUT_S, cpu_s=SCAN_TIMEOUT_S)
        sb = make_sandbox(sandbox, SandboxSpec(template, limits))
        try:
            py = shlex.quote(sb.interpreter.executable)
            res = sb.run_with_binds(
                f'{py} -S -s "$RG_{_BIND.upper()}/scan.py" "$RG_{_BIND.upper()}/needles.json"',
                ro={_BIND: folder},
                timeout_s=SCAN_TIMEOUT_S,
            )
        finally:
            sb.close()
    if res.exit_code != 0:
        raise SandboxError(
            f"{task.id}: the leak scanner failed ({res.exit_code}): {res.output.strip()[-800:]}"
        )
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def leak_scan(
    tasks: Iterable[Task], *, sandbox: str = "bwrap", on_task: Callable[[str], None] | None = None
) -> dict[str, list[str]]:
    """Task id -> where a sandbox of it can read its fix (see the module docstring), for
    the tasks that leak; also a workspace holding compiled files or packaging file lists
    (:func:`artefacts`).

    Raises:
        SandboxError: a scanner run failed (an infrastructure fault, not a leak).
    """
    tasks = list(tasks)
    found: dict[str, list[str]] = {}
    groups: dict[object, list[Task]] = {}
    for t in tasks:
        if bad := artefacts(t):
            found.setdefault(t.id, []).append(f"{t.id}: repo/ holds {', '.join(bad[:5])}")
        groups.setdefault(t.dependencies, []).append(t)
    templates = TemplateCache()
    try:
        for group in groups.values():
            needles = []
            for t in group:
                gold = t.solution_patch.read_text()
                needles += [
                    {"task": t.id, "key": k, "block": b}
                    for k, b in fix_blocks(gold, _buggy(t, gold))
                ]
            hits = _scan(group[0], templates, needles, "system", sandbox) if needles else []
            for t in group:
                gold = t.solution_patch.read_text()
                own = [
                    {"task": t.id, "key": k, "block": b}
                    for k, b in fix_blocks(gold, _buggy(t, gold))
                ]
                mine = [h for h in hits if h["task"] == t.id]
                # the buggy files themselves may hold the same lines elsewhere (sibling
                # functions with one signature): code to read, not a copy of the fix
                buggy = {f"{WORKSPACE}/{p.new}" for p in split_diff(gold)}
                mine += [
                    h
                    for h in (_scan(t, templates, own, "workspace", sandbox) if own else [])
                    if h["path"] not in buggy
                ]
                for h in mine:
                    found.setdefault(t.id, []).append(
                        f"{h['path']} holds the fixed code around {h['key']!r}"
                    )
                if on_task:
                    on_task(t.id)
    finally:
        templates.close()
    return found


def artefacts(task: Task) -> list[str]:
    """Paths in ``repo/`` that a workspace must not hold (compiled files, caches, build
    output, an egg-info's list of files)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(task.repo_dir):
        for name in [*dirnames, *filenames]:
            rel = (Path(dirpath) / name).relative_to(task.repo_dir).as_posix()
            if is_artefact(rel):
                out.append(rel)
    return sorted(out)


# -- the reproduction ----------------------------------------------------------------------
def check_reproduction(
    task: Task, *, sandbox: str = "bwrap", templates: TemplateCache | None = None
) -> str | None:
    """Why the task's ``reproduction.py`` does not do its job (None: it fails with an
    AssertionError without the fix and exits 0 with the gold patch), run as the agent
    would: ``python reproduction.py`` at the root of a sandbox of the task."""
    script = task.path / "reproduction.py"
    if not script.is_file():
        return f"{task.id}: no reproduction.py"
    own = templates is None
    templates = templates or TemplateCache()
    try:
        template = templates.get(task.repo_dir, task.sandbox_dependencies())
        results = []
        for patch in ("", task.solution_patch.read_text()):
            sb = make_sandbox(sandbox, SandboxSpec(template, Limits(timeout_s=120)))
            try:
                if patch:
                    applied = sb.run("git apply --whitespace=nowarn -", stdin=patch.encode())
                    if applied.exit_code != 0:
                        return f"{task.id}: solution.patch does not apply: {applied.output}"
                res = run_reproduction(sb, script.read_text(), 120)
                results.append((res.exit_code, res.stdout))
            finally:
                sb.close()
    finally:
        if own:
            templates.close()
    (bug_code, bug_out), (fix_code, fix_out) = results
    if bug_code == 0 or not bug_reports.fails_itself(bug_out):
        return (
            f"{task.id}: reproduction.py does not fail with an AssertionError of its own "
            f"without the fix (exit {bug_code}): {bug_out.strip()[-300:]}"
        )
    if fix_code != 0:
        return (
            f"{task.id}: reproduction.py fails with the gold patch (exit {fix_code}): "
            f"{fix_out.strip()[-300:]}"
        )
    return None


# -- regressions -----------------------------------------------------------------------------
@dataclasses.dataclass
class Sabotage:
    """Gold plus another task's bug, graded.

    Attributes:
        task: The task graded.
        other: The task whose bug was added.
        reward: The binary reward (must be below 1).
        broken: The listed tests that did not pass.
    """

    task: str
    other: str
    reward: float
    broken: list[str]
    #: For a regression made here (a mutant of another function, no task's bug): the
    #: package's tests that fail with it, run plainly on the fixed package.
    caught_by: list[str] = dataclasses.field(default_factory=list)
    #: Why no regression could be made for the task (its package's suite did not run).
    error: str = ""

    @property
    def problem(self) -> str | None:
        """What full reward here shows (or why nothing was graded), or None."""
        if self.error:
            return f"{self.task}: no regression beside the fix could be graded: {self.error}"
        if self.reward < 1.0:
            return None
        if self.caught_by:
            return (
                f"{self.task}: gold plus a regression in {self.other.rsplit('::', 1)[0]} "
                f"({self.other}), which the package's {self.caught_by[0]} catches, earns "
                "full reward"
            )
        return f"{self.task}: gold plus the bug of {self.other} earns full reward"


#: Mutants of other functions tried per task for a regression the package's tests catch,
#: where no other task of its package lends a bug.
REGRESSION_TRIES = 12


def _git_apply(folder: Path, patch: str, *args: str) -> bool:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CEILING_DIRECTORIES": str(folder.parent),
    }
    res = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *args, "-"],
        cwd=folder,
        input=patch.encode(),
        capture_output=True,
        env=env,
        check=False,
    )
    return res.returncode == 0


def sabotaged_diff(task: Task, other: Task) -> str | None:
    """``task``'s gold patch with ``other``'s bug added (None when the two do not apply
    together): the files both touch, fixed by one and broken by the other."""
    gold, theirs = task.solution_patch.read_text(), other.solution_patch.read_text()
    files = sorted({p.new for p in split_diff(gold)} | {p.new for p in split_diff(theirs)})
    with tempfile.TemporaryDirectory(prefix="repogym-sabotage-") as tmp:
        work = Path(tmp) / "repo"
        for rel in files:
            if (task.repo_dir / rel).is_file():
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(task.repo_dir / rel, work / rel)
        before = {rel: (work / rel).read_text() for rel in files if (work / rel).is_file()}
        if not _git_apply(work, gold) or not _git_apply(work, theirs, "-R"):
            return None
        return "".join(
            file_diff(rel, before[rel], (work / rel).read_text()) for rel in files if rel in before
        )


def sabotage(
    tasks: Iterable[Task],
    *,
    sandbox: str = "bwrap",
    on_task: Callable[[Sabotage], None] | None = None,
    regression: bool = True,
    tries: int = REGRESSION_TRIES,
) -> list[Sabotage]:
    """For each task, its gold patch with a regression in another function, graded: the bug
    of another task of the same package (breaking tests the task lists as pass_to_pass), or,
    where none lends one (with ``regression``), a mutant of another function that the
    package's tests reach and catch (:func:`_regressions`). A task that gets neither is
    left out of the result; one whose package's suite could not be run for it comes back
    with :attr:`Sabotage.error`."""
    tasks = list(tasks)
    by_package: dict[Path, list[Task]] = {}
    for t in tasks:
        by_package.setdefault(t.path.parent, []).append(t)
    out = []
    alone: dict[Path, list[Task]] = {}
    with PatchGrader(sandbox) as grader:
        for t in tasks:
            fixed = {p.new for p in split_diff(t.solution_patch.read_text())}
            for other in by_package[t.path.parent]:
                # the other bug must break a test this task lists besides its own failing
                # ones (two bugs may share failing tests; those prove nothing here)
                extra = set(other.test_spec.fail_to_pass) - set(t.test_spec.fail_to_pass)
                if other.id == t.id or not extra or not extra <= set(t.test_spec.pass_to_pass):
                    continue
                diff = sabotaged_diff(t, other)
                if diff is None or not fixed:
                    continue
                res = grader.grade(t, diff)
                broken = sorted(n for n, s in res.tests.items() if s != "passed")
                out.append(Sabotage(t.id, other.id, res.reward, broken))
                if on_task:
                    on_task(out[-1])
                break
            else:
                alone.setdefault(t.path.parent, []).append(t)
        if regression:
            for group in alone.values():
                try:
                    found = list(_regressions(group, grader, sandbox, tries))
                except Exception as e:  # an audit reports, never crashes
                    why = f"{type(e).__name__}: {e}"
                    found = [Sabotage(t.id, "", 0.0, [], error=why) for t in group]
                for one in found:
                    out.append(one)
                    if on_task:
                        on_task(one)
    return out


def _regressions(
    group: list[Task], grader: PatchGrader, sandbox: str, tries: int
) -> Iterator[Sabotage]:
    """For tasks of one package (one folder), each one's gold patch with a regression the
    package's own tests catch, graded: a single-site mutant (:mod:`repogym.scenarios.mutation`)
    of a function the fix does not touch, which the traced run of the package's suite shows
    some test reaching (coverage at gold decides what "covered" means), and which makes one
    of those tests fail when the suite runs plainly on the fixed package. Functions are
    drawn in an order seeded by the task's id; at most ``tries`` covered mutants are run per
    task (a mutant no test catches is an equivalent or untested change: the next is tried).
    A task none of whose tries is caught is not yielded."""
    first = group[0]
    spec = first.test_spec
    with (
        tempfile.TemporaryDirectory(prefix="repogym-regression-") as tmp,
        SandboxRunner(
            first.sandbox_dependencies(), spec.ini_options, sandbox=sandbox, plugins=spec.plugins()
        ) as runner,
    ):
        pkg = pristine(first, Path(tmp) / "pkg")
        runner.collect(pkg, spec.timeout_s)
        tests = set(test_files(pkg))
        dest = None if spec.tests_dest == "." else spec.tests_dest.rstrip("/") + "/"
        sources = {
            rel: text
            for rel, text in iter_sources(pkg)
            if rel not in tests
            and not is_test_file(rel)
            and not (dest and rel.startswith(dest))
            and Path(rel).name != "conftest.py"
        }
        by_file: dict[str, dict[str, list[Mutant]]] = {}  # each module parsed once

        def mutants_of(rel: str, fn: str) -> list[Mutant]:
            if rel not in by_file:
                by_file[rel] = {}
                for m in mutants(sources[rel], rel):
                    by_file[rel].setdefault(m.function, []).append(m)
            return by_file[rel].get(fn, [])

        for t in group:
            gold = t.solution_patch.read_text()
            touched = {
                (rel, fn)
                for rel, lines in changed_lines(gold).items()
                if rel in sources
                for fn in touched_functions(sources[rel], lines)
            }
            candidates = [
                (rel, fn)
                for rel, text in sorted(sources.items())
                for fn in function_names(text)
                if (rel, fn) not in touched
            ]
            random.Random(t.id).shuffle(candidates)
            if found := _caught(t, pkg, sources, candidates, mutants_of, runner, grader, tries):
                yield found


def _caught(
    task: Task,
    pkg: Path,
    sources: dict[str, str],
    candidates: list[tuple[str, str]],
    mutants_of: Callable[[str, str], list[Mutant]],
    runner: SandboxRunner,
    grader: PatchGrader,
    tries: int,
) -> Sabotage | None:
    """The first covered mutant of ``candidates`` (``mutants_of(file, function)``) the
    package's tests catch, graded with ``task``'s gold patch (None after ``tries`` covered
    mutants none catches)."""
    gold_files = {p.new for p in split_diff(task.solution_patch.read_text())}
    tried = 0
    for rel, fn in candidates:
        for m in mutants_of(rel, fn)[:2]:
            if tried >= tries:
                return None
            reached = runner.selected({rel: m.source})
            if not reached:  # no test calls it, or it runs at import (any test may read it)
                continue
            tried += 1
            (pkg / rel).write_text(m.source, encoding="utf-8")
            try:
                result, _ = runner.run(pkg, sorted(reached), task.test_spec.timeout_s)
            finally:
                (pkg / rel).write_text(sources[rel], encoding="utf-8")
            caught = sorted(n for n in reached if result.get(n) != "passed")
            if not caught:
                continue
            diff = "".join(
                file_diff(
                    f,
                    (task.repo_dir / f).read_text() if (task.repo_dir / f).is_file() else None,
                    m.source if f == rel else (pkg / f).read_text(),
                )
                for f in sorted(gold_files | {rel})
            )
            res = grader.grade(task, diff)
            broken = sorted(n for n, s in res.tests.items() if s != "passed")
            return Sabotage(task.id, m.id, res.reward, broken, caught)
    return None


# -- stability -----------------------------------------------------------------------------
@dataclasses.dataclass
class Unstable:
    """A grading whose outcome changed with a condition it must not depend on.

    Attributes:
        task: The task.
        patch: ``gold`` or ``noop`` (no change).
        condition: ``PYTHONHASHSEED=N`` or ``beside a CPU hog``.
        changed: Listed test -> (its outcome as usual, its outcome under the condition).
        infra_error: What failed, when a grading could not finish (nothing was compared).
    """

    task: str
    patch: str
    condition: str
    changed: dict[str, tuple[str, str]]
    infra_error: str = ""

    def __str__(self) -> str:
        if self.infra_error:
            return f"{self.task}: {self.patch} under {self.condition}: {self.infra_error}"
        tests = ", ".join(f"{t} {a} -> {b}" for t, (a, b) in sorted(self.changed.items()))
        return f"{self.task}: {self.patch} under {self.condition}: {tests}"


@contextlib.contextmanager
def cpu_hog(processes: int | None = None) -> Iterator[None]:
    """``processes`` (default: one per CPU) busy loops on the host for the block's duration."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(processes or os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait()


def stability(
    tasks: Iterable[Task],
    *,
    sandbox: str = "bwrap",
    hash_seed: int | None = None,
    hog: bool = True,
    on_task: Callable[[str, list[Unstable]], None] | None = None,
) -> tuple[int, list[Unstable]]:
    """Grade each task's gold patch and no change as usual (``PYTHONHASHSEED=0``), under
    ``hash_seed`` (default: one drawn at random) and, with ``hog``, beside a CPU hog; every
    test whose outcome changed is an :class:`Unstable`. Returns the seed and the findings
    (gold values are recorded under the usual seed whichever grading records them)."""
    seed = hash_seed or random.Random().randrange(1, 2**32)
    out: list[Unstable] = []
    with PatchGrader(sandbox) as grader:
        for task in tasks:
            found: list[Unstable] = []
            for name, diff in (("gold", task.solution_patch.read_text()), ("noop", "")):
                usual = grader.grade(task, diff)
                runs = [(f"PYTHONHASHSEED={seed}", grader.grade(task, diff, hash_seed=seed))]
                if hog:
                    with cpu_hog():
                        runs.append(("beside a CPU hog", grader.grade(task, diff)))
                for condition, res in runs:
                    if error := usual.infra_error or res.infra_error:
                        found.append(Unstable(task.id, name, condition, {}, error))
                        continue
                    changed = {
                        t: (usual.tests.get(t, "missing"), res.tests.get(t, "missing"))
                        for t in task.test_spec.all_tests
                        if usual.tests.get(t) != res.tests.get(t)
                    }
                    if changed:
                        found.append(Unstable(task.id, name, condition, changed))
            out += found
            if on_task:
                on_task(task.id, found)
    return seed, out


# -- scope: what is graded, and what reaches each fix --------------------------------------
@dataclasses.dataclass
class PackageScope:
    """What a package's graded tests leave out, and reach.

    Attributes:
        package: The package folder's name (one package at one release).
        ungraded: Test file -> why no test of it is listed (the tests that ran there, by
            reason, or that it collects none).
        reach: Task id -> its listed pass_to_pass tests that called a function its bug
            changes, on the fixed code (``None``: the bug changes code outside any
            function, which every test may reach).
        error: Why the package's suite could not be run ("" when it ran).
    """

    package: str
    ungraded: dict[str, str] = dataclasses.field(default_factory=dict)
    reach: dict[str, list[str] | None] = dataclasses.field(default_factory=dict)
    error: str = ""

    def reaching(self) -> dict[str, int | None]:
        """Task id -> how many listed pass_to_pass tests reach its fix (None: the fix is
        outside every function): what a suite's index records as a task's scope."""
        return {t: None if r is None else len(r) for t, r in self.reach.items()}


def pristine(task: Task, dest: Path) -> Path:
    """The package as released, in ``dest``: the task's repo/ with the gold patch applied and
    the hidden test files back where the package keeps them."""
    shutil.copytree(task.repo_dir, dest, symlinks=False)
    if not _git_apply(dest, task.solution_patch.read_text()):
        raise ValueError(f"{task.id}: the gold patch does not apply to repo/")
    base = dest if task.test_spec.tests_dest == "." else dest / task.test_spec.tests_dest
    shutil.copytree(task.tests_dir, base, dirs_exist_ok=True)
    return dest


def _ungraded(files: list[str], listed: set[str], dropped: dict[str, str]) -> dict[str, str]:
    """Test file -> why none of its tests is listed (its dropped tests counted by reason)."""
    graded = {t.split("::", 1)[0] for t in listed}
    why: dict[str, Counter[str]] = {}
    for t, reason in dropped.items():
        why.setdefault(t.split("::", 1)[0], Counter())[reason] += 1
    return {
        rel: "; ".join(f"{n} {r}" for r, n in why[rel].most_common())
        if rel in why
        else "no test of it ran on the pristine package (none collected, or its import failed)"
        for rel in files
        if rel not in graded
    }


def scope(
    tasks: Iterable[Task],
    *,
    sandbox: str = "bwrap",
    on_package: Callable[[PackageScope], None] | None = None,
) -> list[PackageScope]:
    """For each package of ``tasks`` (tasks of one folder share a package at one release):
    its test suite run once on the fixed code, traced (as synthesis runs it), giving the
    test files that no listed test comes from, and each task's listed pass_to_pass tests
    that called a function its bug changes (:meth:`SandboxRunner.selected`)."""
    by_package: dict[Path, list[Task]] = {}
    for t in tasks:
        by_package.setdefault(t.path.parent, []).append(t)
    out = []
    for folder, group in by_package.items():
        first = group[0]
        spec = first.test_spec
        found = PackageScope(folder.name)
        with tempfile.TemporaryDirectory(prefix="repogym-scope-") as tmp:
            try:
                pkg = pristine(first, Path(tmp) / "pkg")
                with SandboxRunner(
                    first.sandbox_dependencies(),
                    spec.ini_options,
                    sandbox=sandbox,
                    plugins=spec.plugins(),
                ) as runner:
                    runner.collect(pkg, spec.timeout_s)
                    listed = {n for t in group for n in t.test_spec.all_tests}
                    found.ungraded = _ungraded(test_files(pkg), listed, runner.dropped)
                    for t in group:
                        changes = {
                            p.new: (t.repo_dir / p.new).read_text()
                            for p in split_diff(t.solution_patch.read_text())
                            if (t.repo_dir / p.new).is_file()
                        }
                        reached = runner.selected(changes)
                        f2p = set(t.test_spec.fail_to_pass)
                        p2p = set(t.test_spec.pass_to_pass)
                        found.reach[t.id] = (
                            None if reached is None else sorted((reached - f2p) & p2p)
                        )
            except Exception as e:  # an audit reports, never crashes
                found.error = f"{type(e).__name__}: {e}"
        out.append(found)
        if on_package:
            on_package(found)
    return out
