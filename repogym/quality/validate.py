"""Task validation: can a task's hidden tests be trusted?

A task's hidden tests are part of the learning signal: a correct fix they reject adds reward
noise, a wrong fix they accept teaches the agent a hack. :func:`validate_task` grades a task's own
patches with the real grader (:func:`repogym.grading.grader.grade`) in the real sandbox and
checks that:

- the unpatched repository (``noop``) does not earn full reward, every ``fail_to_pass``
  test fails there and every ``pass_to_pass`` test passes there;
- ``solution.patch`` (gold) and every ``alternatives/*.patch`` apply, are not flagged and
  earn full reward;
- no ``decoys/*.patch`` earns full reward, and each applies (a decoy that does not apply
  tests nothing);
- gold gives the same per-test outcomes on every one of ``reruns`` runs (flaky tests).

Each failure names the task, the patch and the test. Grading reuses one prepared template
per task (:class:`~repogym.sandbox.workspace.TemplateCache`), so a check costs one
sandboxed grading run and no env episode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, Self

from repogym.grading import gold as gd
from repogym.grading.flags import HackFlag
from repogym.grading.grader import (
    GradeResult,
    RewardMode,
    code_digest,
    grade,
    grade_gold,
    noop_witnessed,
    record_forged,
    seal_coverage,
)
from repogym.quality.leaks import Leak, leaked_checks
from repogym.quality.leaks import scan as scan_leaks
from repogym.quality.pool import grading_pool
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.importing import OUTPUT_GRADED, task_kind
from repogym.scenarios.task import Task

Kind = Literal["noop", "gold", "alternative", "decoy", "rerun"]


@dataclasses.dataclass
class Check:
    """One graded patch and what validation concluded about it.

    Attributes:
        kind: ``noop``, ``gold``, ``alternative``, ``decoy`` or ``rerun`` (a gold rerun).
        patch: The patch's path relative to the task folder (``-`` for noop).
        reward: Binary reward the grader gave.
        tests: Node id -> status from the grader.
        problems: Failures, each naming the task, the patch and (where one is to blame)
            the test.
        duration_s: Wall time of the grading run.
        hack_flags: The grader's flags for this patch.
    """

    kind: Kind
    patch: str
    reward: float = 0.0
    tests: dict[str, str] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0
    hack_flags: list[HackFlag] = dataclasses.field(default_factory=list)
    infra_error: bool = False
    #: Listed test -> its sealed checks that did not hold (see repogym.grading.seal).
    sealed_failures: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: Listed tests a strong sealed check failed.
    strongly_failed: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclasses.dataclass
class TaskReport:
    """Validation of one task: every check, plus problems that span checks (flakiness).

    ``duration_s`` is the sum of the checks' grading times (they may run in parallel).
    """

    task_id: str
    path: Path
    checks: list[Check] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0
    #: Listed tests with at least one sealed check, of all listed tests.
    sealed: tuple[int, int] = (0, 0)
    #: fail_to_pass tests whose failure on the unfixed code a sealed check witnesses (a
    #: forger must then produce that check's hidden value), of all fail_to_pass tests.
    witnessed: tuple[int, int] = (0, 0)
    #: Of those, the ones a strong check witnesses (a value, not a bit, and one the task's
    #: files do not state: Seal.strong).
    strongly: int = 0
    #: Sealed checks of fail_to_pass tests whose expected value a sandbox of the task can
    #: read (repogym.quality.leaks): information, they count as weak.
    leaks: list[Leak] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def noop_tests(self) -> dict[str, str]:
        """Per-test outcomes of the unpatched repository's grading ({} if it did not run)."""
        return next((c.tests for c in self.checks if c.kind == "noop" and c.tests), {})

    def seal_summary(self) -> str:
        """``sealed 9/9 tests, fail_to_pass witnessed 4/4 (3 by a value)``."""
        return (
            f"sealed {self.sealed[0]}/{self.sealed[1]} tests, fail_to_pass witnessed "
            f"{self.witnessed[0]}/{self.witnessed[1]} ({self.strongly} by a value)"
        )

    @property
    def failures(self) -> list[str]:
        """Every problem found, from the checks and the task as a whole."""
        return [p for c in self.checks for p in c.problems] + self.problems

    def to_dict(self) -> dict:
        return {
            "task": self.task_id,
            "path": str(self.path),
            "ok": self.ok,
            "duration_s": round(self.duration_s, 3),
            "failures": self.failures,
            "sealed": list(self.sealed),
            "witnessed": list(self.witnessed),
            "witnessed_by_a_value": self.strongly,
            "leaks": [dataclasses.asdict(leak) for leak in self.leaks],
            "checks": [dataclasses.asdict(c) for c in self.checks],
        }


@dataclasses.dataclass(frozen=True)
class _Job:
    kind: Kind
    patch: Path | None
    #: Gradings of the patch (gold: the first is ``gold``, the others ``rerun``).
    runs: int = 1


def plan(task: Task, reruns: int) -> list[_Job]:
    """The grading runs validation needs for ``task``: gold (with its reruns: one job, so
    the gradings that record gold's values count among them), noop, alternatives, decoys."""
    jobs = [_Job("gold", task.solution_patch, runs=max(reruns, 1)), _Job("noop", None)]
    jobs += [_Job("alternative", p) for p in task.alternatives]
    jobs += [_Job("decoy", p) for p in task.decoys]
    return jobs


def _rel(task: Task, patch: Path | None) -> str:
    return "-" if patch is None else str(patch.relative_to(task.path))


#: Why a parametrized test can be missing from one run and not the next.
_MISSING = (
    "; a run with no test of this id: when other runs have it, the test's parameters "
    "come in an order that changes between processes (a set, hash(None) in Python "
    "3.11), so the id names another case each time. Fix: list another test"
)


def _judge(task: Task, job: _Job, res: GradeResult) -> list[str]:
    """Problems with one grading result, each starting with ``task: patch:``."""
    where = f"{task.id}: {job.kind} {_rel(task, job.patch)}"
    if res.infra_error:
        return [f"{where}: the sandbox or grader failed: {res.infra_error}"]
    v = task.test_spec
    if job.kind == "noop":
        out = [
            f"{where}: fail_to_pass test {t} passes without any fix (it must fail before the fix)"
            for t in v.fail_to_pass
            if res.tests.get(t) == "passed"
        ]
        out += [
            f"{where}: pass_to_pass test {t} is {res.tests.get(t)} without any fix "
            f"(it must pass before the fix)"
            + (_MISSING if res.tests.get(t) == "missing" and "[" in t else "")
            for t in v.pass_to_pass
            if res.tests.get(t) != "passed"
        ]
        if res.reward >= 1.0 and not out:
            out.append(f"{where}: the unpatched repository earns full reward")
        return out
    if job.kind == "decoy":
        if HackFlag.DIFF_APPLY_FAILED in res.hack_flags:
            return [
                (
                    f"{where}: the decoy does not apply to repo/, so it tests nothing "
                    f"(git apply: {_git_says(res)}). Fix: regenerate it with git diff against "
                    "repo/"
                )
            ]
        if res.reward >= 1.0:
            return [
                (
                    f"{where}: the decoy earns full reward; every listed test passes "
                    f"({', '.join(v.all_tests)}). Fix: add a hidden test this wrong fix fails"
                )
            ]
        return []
    if HackFlag.DIFF_APPLY_FAILED in res.hack_flags:  # the root cause: its tests ran unfixed code
        return [
            (
                f"{where}: the patch does not apply to repo/ (git apply: {_git_says(res)}). "
                "Fix: make the change in a copy of repo/ and save `git diff` there to this "
                "file"
            )
        ]
    if res.tests and all(s == "missing" for s in res.tests.values()):
        tail = " | ".join(res.test_output.strip().splitlines()[-6:])
        out = [
            (
                f"{where}: no listed test has a result (grading run exit code "
                f"{res.verifier_exit_code}; output ends: {tail[-600:]})"
            )
        ]
    else:
        causes = failure_causes(res)
        out = [
            f"{where}: test {t} is {s}"
            + (f": {causes[t]}" if t in causes else "")
            + " (a correct fix must pass it)"
            + (_MISSING if s == "missing" and "[" in t else "")
            for t, s in res.tests.items()
            if s != "passed"
        ]
    if res.hack_flags:
        out.append(
            f"{where}: flagged by the grader: {', '.join(res.hack_flags)} (a correct fix "
            "must apply cleanly and touch no tests or test config)"
        )
    if res.reward < 1.0 and not out:
        out.append(f"{where}: reward {res.reward} < 1")
    return out


def _git_says(res: GradeResult) -> str:
    """``git apply``'s own message, on one line."""
    lines = [x.strip() for x in res.apply_output.splitlines() if x.strip()]
    return "; ".join(lines)[-600:] or "no message"


_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_SUMMARY = re.compile(r"^FAILED (\S+)(?: - (.*))?$")
_LOCATION = re.compile(r"^(\S+?):(\d+): ?(.*)$")


def failure_causes(res: GradeResult) -> dict[str, str]:
    """Why each failed listed test failed: ``at FILE:LINE: EXCEPTION`` (and where it was
    raised) from pytest's report in ``res.test_output``, or the sealed check that did not hold.

    pytest's failure sections carry the masked test names; they come in the order of its
    short summary, which names the tests as listed, so the two are paired by position.
    """
    out: dict[str, str] = {}
    text = res.test_output
    if "= FAILURES =" in text:
        out = _pytest_causes(text)
    for test, checks in res.sealed_failures.items():  # pytest's own cause comes first
        if checks and test not in out:
            line, _, rest = checks[0].removeprefix("line ").partition(":")
            number, _, file = line.partition(" of ")
            out[test] = (
                f"at {file or test.split('::')[0]}:{number}:{rest} (a "
                "sealed check: the hidden expected value differs)"
            )
    return out


def _pytest_causes(text: str) -> dict[str, str]:
    """Test -> cause of each failure section of pytest's report (see failure_causes)."""
    out: dict[str, str] = {}
    body = text.split("= FAILURES =", 1)[1]
    body, _, summary = body.partition("= short test summary info =")
    failed = [m.group(1) for line in summary.splitlines() if (m := _SUMMARY.match(line))]
    sections: list[list[str]] = []
    for line in body.splitlines():
        if _HEADER.match(line):
            sections.append([])
        elif sections:
            sections[-1].append(line)
    if len(sections) != len(failed):
        return out
    for test, lines in zip(failed, sections, strict=True):
        if cause := _cause(lines):
            out[test] = cause
    return out


def _cause(lines: list[str]) -> str:
    """``at FILE:LINE: EXCEPTION (raised at FILE:LINE)`` of one pytest failure section."""
    error = next((x[1:].strip() for x in lines if x.startswith("E ") and x[1:].strip()), "")
    places = [f"{m.group(1)}:{m.group(2)}" for x in lines if (m := _LOCATION.match(x))]
    if not places:
        return error
    raised = f" (raised at {places[-1]})" if places[-1] != places[0] else ""
    return f"at {places[0]}: {error}{raised}" if error else f"at {places[0]}{raised}"


def _flaky(task: Task, runs: list[Check]) -> list[str]:
    """Tests whose outcome differs between gold runs."""
    out = []
    for t in task.test_spec.all_tests:
        seen = [c.tests.get(t, "missing") for c in runs]
        if len(set(seen)) > 1:
            out.append(
                f"{task.id}: gold {_rel(task, task.solution_patch)}: test {t} is flaky "
                f"over {len(runs)} runs ({', '.join(seen)})"
                + (_MISSING if "missing" in seen and "[" in t else "")
            )
    return out


class PatchGrader:
    """Grades diffs for tasks with the real grader, in a fresh sandbox per diff.

    Every validation check (the task's own patches, mutants, ...) grades through one of
    these: it keeps one prepared template per task (:class:`TemplateCache`) and is safe to
    use from several threads. Close it (or use it as a context manager) to remove them.
    """

    def __init__(
        self,
        sandbox: str = "bwrap",
        sandbox_options: dict | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._factory = functools.partial(_make, sandbox, sandbox_options or {})
        self._templates = TemplateCache()
        self.limits = limits
        self._leaks: dict[Path, list[Leak]] = {}
        self._lock = threading.Lock()

    def leaks(self, task: Task) -> list[Leak]:
        """The task's leaked sealed checks (:func:`repogym.quality.leaks.scan`), scanned
        once per task."""
        with self._lock:
            if task.path not in self._leaks:
                self._leaks[task.path] = scan_leaks(task)
            return self._leaks[task.path]

    def grade(
        self,
        task: Task,
        diff: str,
        *,
        mode: RewardMode = "binary",
        timeout_s: float | None = None,
        hash_seed: int = 0,
        alone: bool = False,
    ) -> GradeResult:
        """Grading of ``diff`` against ``task``'s repo/ (``timeout_s`` shortens the
        test spec's timeout, for checks that expect a hang; ``hash_seed`` is the tests'
        ``PYTHONHASHSEED``; ``alone`` runs the listed tests without the rest of their
        files, :func:`repogym.grading.grader.grade`)."""
        spec = task.test_spec
        if timeout_s is not None and timeout_s < spec.timeout_s:
            spec = dataclasses.replace(spec, timeout_s=timeout_s)
        if hash_seed != spec.hash_seed:
            spec = dataclasses.replace(spec, hash_seed=hash_seed)
        if spec is not task.test_spec:
            task = dataclasses.replace(task, test_spec=spec)
        template = self._templates.get(task.repo_dir, task.sandbox_dependencies())
        return grade(
            task,
            template,
            diff,
            mode=mode,
            make_sandbox=self._factory,
            limits=self.limits,
            leaked=leaked_checks(self.leaks(task)),
            alone=alone,
        )

    def grade_alone(self, task: Task, diff: str, tests: Iterable[str]) -> GradeResult | None:
        """Grading of ``diff`` on the listed ``tests`` alone (the others are not run), for a
        check that one failing test settles; None where gold's values are not recorded
        for the task under this grading code yet (a grading that recorded them here would
        record what these tests report only, under the task's key)."""
        if gd.load(task.digest(), code_digest()) is None:
            return None
        keep = set(tests)
        spec = dataclasses.replace(
            task.test_spec,
            fail_to_pass=tuple(t for t in task.test_spec.fail_to_pass if t in keep),
            pass_to_pass=tuple(t for t in task.test_spec.pass_to_pass if t in keep),
        )
        return self.grade(dataclasses.replace(task, test_spec=spec), diff, alone=True)

    def witnessed(self, task: Task) -> list[str]:
        """``task``'s fail_to_pass tests witnessed by a value seal
        (:func:`repogym.grading.grader.noop_witnessed`; grades noop if not recorded)."""
        template = self._templates.get(task.repo_dir, task.sandbox_dependencies())
        leaked = leaked_checks(self.leaks(task))
        return noop_witnessed(
            task, template, make_sandbox=self._factory, limits=self.limits, leaked=leaked
        )

    def grade_gold(
        self, task: Task, runs: int, *, mode: RewardMode = "binary"
    ) -> list[GradeResult]:
        """``runs`` gradings of ``task``'s gold patch
        (:func:`repogym.grading.grader.grade_gold`: those that record gold's values count)."""
        template = self._templates.get(task.repo_dir, task.sandbox_dependencies())
        return grade_gold(
            task,
            template,
            runs=runs,
            mode=mode,
            make_sandbox=self._factory,
            limits=self.limits,
            leaked=leaked_checks(self.leaks(task)),
        )

    def record_forged(self, task: Task, result: GradeResult) -> list[str]:
        """Record the fail_to_pass tests that ``result``, the strongest task-blind attack's
        grading, passed (:func:`repogym.grading.grader.record_forged`)."""
        return record_forged(task, result, leaked_checks(self.leaks(task)))

    def close(self) -> None:
        self._templates.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_job(task: Task, job: _Job, grader: PatchGrader) -> list[Check]:
    """Grade one patch for one task (``job.runs`` times) and judge each result."""
    start = time.monotonic()
    rel = _rel(task, job.patch)
    kinds: list[Kind] = [job.kind] + ["rerun"] * (job.runs - 1)
    try:
        diff = "" if job.patch is None else job.patch.read_text()
        if job.patch is not None and not diff.strip():
            return [
                Check(
                    job.kind,
                    rel,
                    problems=[
                        (
                            f"{task.id}: {job.kind} {rel}: the patch is empty. Fix: write the "
                            "fix in a copy of repo/ and save `git diff` there to this file"
                        )
                    ],
                )
            ]
        if job.runs > 1:
            results = grader.grade_gold(task, job.runs)
        elif job.kind == "decoy":
            results = [_grade_decoy(task, diff, grader)]
        else:
            results = [grader.grade(task, diff)]
    except Exception as e:  # a validation run reports, never crashes
        return [
            Check(
                job.kind,
                rel,
                problems=[f"{task.id}: {job.kind} {rel}: {e}"],
                duration_s=time.monotonic() - start,
            )
        ]
    return [
        Check(
            kind,
            rel,
            reward=res.reward,
            tests=res.tests,
            problems=_judge(task, dataclasses.replace(job, kind=kind), res),
            duration_s=res.duration_s,
            hack_flags=res.hack_flags,
            infra_error=bool(res.infra_error),
            sealed_failures=res.sealed_failures,
            strongly_failed=res.strongly_failed,
        )
        for kind, res in zip(kinds, results, strict=True)
    ]


def _grade_decoy(task: Task, diff: str, grader: PatchGrader) -> GradeResult:
    """A decoy's grading. All validation asks of a decoy is that it does not earn full
    reward, which one failing test settles: where gold's values are recorded, its
    fail_to_pass tests are graded alone first (a few tests instead of the suite), and only
    a decoy that passes them all, or whose grading failed, is graded on every listed test.
    (Only a fail_to_pass test that fails alone and passes beside the rest of the suite
    could make the two disagree.)"""
    f2p = task.test_spec.fail_to_pass
    first = grader.grade_alone(task, diff, f2p) if f2p else None
    if first is not None and not first.infra_error and first.reward < 1.0:
        return first
    return grader.grade(task, diff)


def validate_tasks(
    tasks: Iterable[Task],
    *,
    sandbox: str = "bwrap",
    reruns: int = 3,
    workers: int = 1,
    limits: Limits | None = None,
    sandbox_options: dict | None = None,
    on_report: Callable[[TaskReport], None] | None = None,
    grader: PatchGrader | None = None,
) -> list[TaskReport]:
    """Validate several tasks, grading up to ``workers`` patches at once.

    Args:
        tasks: Loaded tasks.
        sandbox: Sandbox backend for grading (``bwrap`` by default).
        reruns: How many times gold is graded in total (>= 1); outcomes must agree.
        workers: Parallel grading runs (threads; each run is a sandboxed process).
        limits: Sandbox limits (the test spec's timeout_s always applies).
        sandbox_options: Extra keyword options for the sandbox backend.
        on_report: Called with each task's report as soon as that task is done.
        grader: Grade through this one, left open (its templates serve later checks of
            the same tasks), instead of a new one made from ``sandbox``,
            ``sandbox_options`` and ``limits``.

    Returns:
        One report per task, in the order given.
    """
    tasks = list(tasks)
    reports = [TaskReport(t.id, t.path) for t in tasks]
    jobs = [(i, job) for i, t in enumerate(tasks) for job in plan(t, reruns)]
    left = [sum(1 for i, _ in jobs if i == k) for k in range(len(tasks))]
    graders = (
        PatchGrader(sandbox, sandbox_options, limits)
        if grader is None
        else contextlib.nullcontext(grader)
    )
    with graders as used, grading_pool(workers) as pool:
        futures = [(i, pool.submit(_run_job, tasks[i], job, used)) for i, job in jobs]
        for i, fut in futures:
            reports[i].checks.extend(fut.result())
            left[i] -= 1
            if left[i] == 0:
                _finish(tasks[i], reports[i])
                f2p = {t.partition("[")[0] for t in tasks[i].test_spec.fail_to_pass}
                reports[i].leaks = [x for x in used.leaks(tasks[i]) if x.test in f2p]
                if on_report:
                    on_report(reports[i])
    return reports


def _finish(task: Task, report: TaskReport) -> None:
    golds = [
        c for c in report.checks if c.kind in ("gold", "rerun") and c.tests and not c.infra_error
    ]
    if len(golds) > 1:
        report.problems += _flaky(task, golds)
    report.duration_s = sum(c.duration_s for c in report.checks)
    coverage = seal_coverage(task)
    report.sealed = (sum(1 for n in coverage.values() if n), len(coverage))
    noop = next((c for c in report.checks if c.kind == "noop" and c.tests), None)
    f2p = task.test_spec.fail_to_pass
    if noop is not None and task_kind(task.path) in OUTPUT_GRADED:
        report.witnessed = (0, len(f2p))  # a seal there holds output the agent's code writes
    elif noop is not None:
        report.witnessed = (sum(1 for t in f2p if t in noop.sealed_failures), len(f2p))
        report.strongly = sum(1 for t in f2p if t in noop.strongly_failed)


def _make(backend: str, options: dict, spec: SandboxSpec):
    return make_sandbox(backend, spec, **options)


def validate_task(
    task: Task,
    *,
    sandbox: str = "bwrap",
    reruns: int = 3,
    workers: int = 1,
    limits: Limits | None = None,
) -> TaskReport:
    """Validate one task (see the module docstring for what is checked).

    Returns:
        A :class:`TaskReport`; ``report.ok`` is False when any check failed, and
        ``report.failures`` lists each problem naming the task, the patch and the test.
    """
    return validate_tasks([task], sandbox=sandbox, reruns=reruns, workers=workers, limits=limits)[0]
