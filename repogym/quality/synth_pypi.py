"""``repogym synth --pypi NAME[==VERSION]``: tasks from a real package's source distribution.

:func:`synthesize_pypi` downloads the sdist with pip (:mod:`repogym.scenarios.pypi`),
unpacks it as the task repository, derives and builds its environment (its install and
test requirements; pinned to what was installed, so the tasks rebuild the same versions),
runs its own tests in the sandbox to find the ones that pass there
(:class:`~repogym.quality.sandboxed_tests.SandboxRunner`; the pytest plugins of its test
requirements are named with ``-p``, as the tasks' command names them), then mutates its
code and writes a bug report per task (:func:`repogym.scenarios.synth.synthesize`). Every
task written is graded by ``repogym validate`` (noop, gold, reruns, decoys) and its
sandbox is scanned for the fix (:func:`repogym.quality.audit.leak_scan`) before it reaches
``out``; the ones that fail are dropped and reported.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import Requirement

from repogym.quality import audit
from repogym.quality.sandboxed_tests import SandboxRunner
from repogym.quality.validate import TaskReport, validate_tasks
from repogym.scenarios import dependencies as deps
from repogym.scenarios import pypi
from repogym.scenarios.synth import MAX_FAIL_TO_PASS, SynthError, synthesize
from repogym.scenarios.task import load_task


@dataclasses.dataclass
class PypiSynthesis:
    """What :func:`synthesize_pypi` did.

    Attributes:
        sdist: The downloaded archive.
        environment: The tasks' (pinned) environment.
        written: Task folders that validated, now under ``out``.
        dropped: Task id -> the validation failures that dropped it.
        passing_tests: How many of the package's tests pass in the sandbox.
        tests: Those tests (what a task's pass_to_pass lists, but its failing ones).
        plugins: The pytest plugins the tasks' command names.
        suite_seconds: Wall time of one run of those tests in the sandbox.
    """

    sdist: pypi.Sdist
    environment: deps.DependencySpec
    written: list[Path]
    dropped: dict[str, list[str]]
    passing_tests: int
    tests: list[str] = dataclasses.field(default_factory=list)
    plugins: list[str] = dataclasses.field(default_factory=list)
    suite_seconds: float = 0.0


def prepare(project: str, work: Path, *, extra: Iterable[str] = (), drop: Iterable[str] = (),
            sha256: str | None = None, say: Callable[[str], None] = print
            ) -> tuple[pypi.Sdist, Path, deps.DependencySpec, deps.BuiltDependencies,
                       dict[str, str]]:
    """Download and unpack ``project`` under ``work``, derive, build and pin its environment.

    Returns:
        (sdist, repository folder, pinned spec, built environment, pytest ini options).
    """
    sdist = pypi.download(project, sha256=sha256)
    say(f"sdist {sdist.path.name} (sha256 {sdist.sha256[:12]}...)")
    repo = pypi.unpack(sdist, work / f"{sdist.name}-{sdist.version}")
    spec = pypi.derive_environment(repo, sdist.name, extra=extra, drop=drop)
    built, new = deps.build(spec, on_start=lambda: say(
        f"building the environment: {spec.summary()}"))
    if not new:
        say(f"environment {built.root.name} already built")
    pinned = deps.lock(built, spec)
    ini = pypi.pytest_ini_options(repo)
    deps.check_conflicts(built, repo, ini.get("pythonpath", "").split(), sdist.name)
    return sdist, repo, pinned, built, ini


def synthesize_pypi(project: str, out: Path, *, max_tasks: int = 10, seed: int = 0,
                    combined: float = 0.0, p2p_sample: int = 50,
                    max_trials: int | None = None, extra: Iterable[str] = (),
                    drop: Iterable[str] = (), sandbox: str = "bwrap", workers: int = 1,
                    reruns: int = 3, timeout_s: float = 300.0, adversarial: bool = False,
                    split: str = "train", leak_scan: bool = True,
                    say: Callable[[str], None] = print,
                    on_report: Callable[[TaskReport], None] | None = None) -> PypiSynthesis:
    """Make validated tasks from a PyPI project (see the module docstring); with
    ``adversarial``, a task is also dropped when an attack of
    :mod:`repogym.quality.adversarial` earns more than doing nothing. ``combined``: the
    share of tasks with several bugs; ``split``: the tasks' split (``test`` lists every
    passing test whatever the suite's speed); ``leak_scan``: drop a task whose fix a
    sandbox of it can read (:func:`repogym.quality.audit.leak_scan`).

    Raises:
        PypiError: the sdist cannot be fetched or unpacked.
        DependenciesUnavailable: its environment cannot be built (the message names the
            requirement and the fix).
        SynthError: no test of the package passes in the sandbox.
    """
    work = Path(tempfile.mkdtemp(prefix="repogym-pypi-"))
    clock = time.monotonic()

    def lap(what: str) -> None:
        nonlocal clock
        say(f"{what}: {time.monotonic() - clock:.0f}s")
        clock = time.monotonic()

    try:
        sdist, repo, spec, built, ini = prepare(project, work, extra=extra, drop=drop, say=say)
        lap("download, environment build and pinning")
        plugins = plugins_of(repo, sdist.name, built, extra=extra, drop=drop)
        staging = work / "tasks"
        with SandboxRunner(built.sandbox, ini, sandbox=sandbox, plugins=plugins,
                           stop_after=MAX_FAIL_TO_PASS) as runner:
            try:
                folders = synthesize(repo, staging, max_tasks=max_tasks, seed=seed,
                                     combined=combined, p2p_sample=p2p_sample,
                                     max_trials=max_trials, timeout_s=timeout_s,
                                     runner=runner, name=sdist.name,
                                     only=pypi.code_paths(repo, sdist.name,
                                                          pypi.archive_top_level(sdist)),
                                     environment=spec, ini_options=ini, plugins=plugins,
                                     split=split, note=pypi.path_hint(ini), say=say)
            except SynthError as e:
                last = f"\nlast test run (in the sandbox):\n{runner.log[-1500:]}" \
                    if runner.log.strip() else ""
                raise SynthError(f"{e} (sdist {sdist.path.name}){last}") from e
            passing, tests, seconds = len(runner.collected), runner.collected, \
                runner.suite_seconds
            say(f"{passing} tests pass in the sandbox (a full run took "
                f"{runner.suite_seconds:.1f}s)")
            st = runner.stats
            say(f"mutant runs: {st['runs']} in the sandbox ({st['tests run']} tests, "
                f"{st['seconds']:.0f}s), {st['no test reaches the change']} not run (no "
                "test reaches the change)")
        lap("test discovery and synthesis")
        say(f"{len(folders)} candidate tasks; validating them in the sandbox")
        def reported(report: TaskReport) -> None:
            say(f"validated {report.task_id}: {'ok' if report.ok else 'FAILED'} "
                f"({time.monotonic() - clock:.0f}s into validation)")
            if on_report is not None:
                on_report(report)

        reports = validate_tasks([load_task(f) for f in folders], sandbox=sandbox,
                                 reruns=reruns, workers=workers, on_report=reported)
        lap("validation")
        gold = [c.duration_s for r in reports for c in r.checks if c.kind in ("gold", "rerun")]
        if gold:
            say(f"grading gold (every listed test): median {statistics.median(gold):.1f}s over "
                f"{len(gold)} runs")
        holes = _adversarial([load_task(f) for f, r in zip(folders, reports, strict=True)
                              if r.ok], sandbox, workers) if adversarial else {}
        if leak_scan:
            ok = [load_task(f) for f, r in zip(folders, reports, strict=True)
                  if r.ok and r.task_id not in holes]
            for task_id, found in audit.leak_scan(ok, sandbox=sandbox).items():
                holes[task_id] = [f"{task_id}: a sandbox of it can read the fix: {found[0]}"]
        if leak_scan or adversarial:
            lap("leak scan" + (" and attacks" if adversarial else ""))
        written, dropped = [], {}
        out.mkdir(parents=True, exist_ok=True)
        for folder, report in zip(folders, reports, strict=True):
            if not report.ok or report.task_id in holes:
                dropped[report.task_id] = report.failures or holes[report.task_id]
                continue
            dest = out / folder.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.move(folder, dest)
            written.append(dest)
        return PypiSynthesis(sdist, spec, written, dropped, passing, tests, plugins, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plugins_of(repo: Path, name: str, built: deps.BuiltDependencies, *,
               extra: Iterable[str] = (), drop: Iterable[str] = ()) -> list[str]:
    """The pytest plugins of the requirements the project declares (and ``extra``) in its
    built environment (:func:`repogym.scenarios.pypi.pytest_plugins`)."""
    derived = pypi.derive_environment(repo, name, extra=extra, drop=drop)
    return pypi.pytest_plugins(built.site, [Requirement(r).name for r in derived.requirements])


def _adversarial(tasks: list, sandbox: str, workers: int) -> dict[str, list[str]]:
    """Task id -> the attacks that beat noop, for the tasks with such holes."""
    from repogym.quality.adversarial import check_task
    from repogym.quality.validate import PatchGrader

    holes = {}
    with PatchGrader(sandbox) as grader:
        for task in tasks:
            report = check_task(task, grader, workers=workers)
            if not report.ok:
                holes[task.id] = [f"{task.id}: attack {r.attack} beats noop"
                                  f"{' (' + r.error + ')' if r.error else ''}"
                                  for r in report.holes]
    return holes
