"""The synthesis pipeline (``repogym synth``), read top to bottom.

Every stage is a function below, in the order it runs, calling the module that does the
work; this module adds no logic of its own but the order and the hand-over between stages.

From a package folder (:func:`from_package`, trusted code: its tests run on the host):

1. :func:`mutate_and_write`: copy the package, run its tests unmutated, inject bugs one
   function at a time, keep those that fail 1 to a few tests, write each one's bug report
   (:mod:`repogym.scenarios.bug_reports`) and task folder
   (:func:`repogym.scenarios.synth.synthesize`; bugs from
   :mod:`repogym.scenarios.mutation`).

From a PyPI project (:func:`from_pypi`, untrusted code: its tests run in the sandbox):

1. :func:`fetch`: download and unpack the sdist, derive, build and pin its dependencies
   (:func:`repogym.quality.synth_pypi.prepare`: :mod:`repogym.scenarios.pypi`,
   :mod:`repogym.scenarios.dependencies`), and name the pytest plugins they hold
   (:func:`repogym.quality.synth_pypi.plugins_of`);
2. :func:`mutate_and_write`, with the tests run in sandboxes
   (:class:`repogym.quality.sandboxed_tests.SandboxRunner`), into a staging folder;
3. :func:`validate`: grade every task written (noop, gold, reruns, decoys;
   :func:`repogym.quality.validate.validate_tasks`);
4. :func:`repogym.quality.restate.restate_valid`: a valid task's report that states a
   hidden test's expected value (the leak scan over the statement,
   :func:`repogym.quality.restate.leaked_in`) is restated on other inputs, before the
   screen measures the seal floor; one that cannot be is kept as it is, and said;
5. :func:`screen`: optionally attack the valid ones (:mod:`repogym.quality.adversarial`),
   scan their sandboxes for the fix (:func:`repogym.quality.audit.leak_scan`), and, with
   ``served``, keep only the tasks a suite would serve by default: value seals witness 90 %
   of the fail_to_pass tests once the strongest attack has been graded, and a pass_to_pass
   test reaches the code the fix changes (:func:`repogym.scenarios.suites.withheld_reason`,
   the rule a fetched suite applies);
6. :func:`keep`: move the tasks that passed 3 and 5 to ``out``; the others are dropped
   with the reasons.

Last, ``repogym synth`` scores each task written against mutants of its gold fix
(:func:`repogym.quality.validate_mutation.mutation_check`, printed as it runs by
:func:`repogym.cli.printing.run_mutation`) unless ``--no-mutation`` is given. Both
pipelines raise :class:`repogym.scenarios.synth.SynthError` when the package's tests do not
pass unmutated. :func:`synth_job` runs :func:`from_pypi` from a :class:`SynthJob` (plain
data a Ray task carries) and returns a package's failure as its message: ``repogym synth``
calls it for each ``--pypi`` package, in turn or on Ray
(:func:`repogym.quality.ray_map.each_job`).
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from repogym.quality import audit
from repogym.quality import restate as rs
from repogym.quality.sandboxed_tests import SandboxRunner
from repogym.quality.synth_pypi import PypiSynthesis, plugins_of, prepare
from repogym.quality.validate import TaskReport, validate_tasks
from repogym.sandbox.base import SandboxError
from repogym.scenarios import pypi, suites
from repogym.scenarios.dependencies import DependenciesUnavailable
from repogym.scenarios.synth import (
    MAX_FAIL_TO_PASS,
    SynthError,
    Synthesis,
    mutant_budget,
    synthesize,
)
from repogym.scenarios.task import Task, load_task

Say = Callable[[str], None]


# -- the two pipelines ----------------------------------------------------------------------
def from_package(
    package_dir: str | Path,
    out: str | Path,
    *,
    max_tasks: int = 10,
    seed: int = 0,
    combined: float = 0.0,
    p2p_sample: int = 50,
    split: str = "train",
) -> list[Path]:
    """Tasks from a local package whose tests pass (one stage: :func:`mutate_and_write`).

    Returns:
        The task folders written under ``out``.
    """
    return mutate_and_write(
        package_dir,
        out,
        max_tasks=max_tasks,
        seed=seed,
        combined=combined,
        p2p_sample=p2p_sample,
        split=split,
    )


def from_pypi(
    project: str,
    out: Path,
    *,
    max_tasks: int = 10,
    seed: int = 0,
    combined: float = 0.0,
    p2p_sample: int = 50,
    max_trials: int | None = None,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
    sandbox: str = "bwrap",
    workers: int = 1,
    reruns: int = 3,
    timeout_s: float = 300.0,
    adversarial: bool = False,
    split: str = "train",
    leak_scan: bool = True,
    served: bool = False,
    restate: bool = True,
    say: Say = print,
    on_report: Callable[[TaskReport], None] | None = None,
) -> PypiSynthesis:
    """Validated tasks from a PyPI project: fetch, mutate and write, validate, screen, keep.

    Args:
        project: ``NAME`` or ``NAME==VERSION``.
        out: Where the tasks that pass every check are written.
        combined: Share of the tasks with several bugs.
        extra, drop: Requirements added to or dropped from the derived dependencies.
        reruns: Gold runs per task when validating.
        adversarial: Also drop a task an attack of :mod:`repogym.quality.adversarial`
            earns more on than doing nothing.
        split: The tasks' split (``test`` lists every passing test whatever the suite's
            speed).
        leak_scan: Drop a task whose fix a sandbox of it can read.
        served: Drop a task that a suite would withhold (under the seal floor, or no
            pass_to_pass test reaching its fix; :func:`screen`).
        restate: Restate on other inputs each valid task's report that states a hidden
            test's expected value (:func:`repogym.quality.restate.restate_valid`).
        say: Told each stage's progress and time.
        on_report: Called with each task's validation report as it finishes.
        max_tasks, seed, p2p_sample, max_trials, sandbox, workers, timeout_s: As
            :func:`repogym.scenarios.synth.synthesize` and
            :func:`repogym.quality.validate.validate_tasks` take them.

    Raises:
        PypiError: the sdist cannot be fetched or unpacked.
        DependenciesUnavailable: its dependencies cannot be built (the message names the
            requirement and the fix).
        SynthError: no test of the package passes in the sandbox.
    """
    work = Path(tempfile.mkdtemp(prefix="repogym-pypi-"))
    lap = _stopwatch(say)
    try:
        sdist, repo, spec, built, ini, plugins = fetch(
            project, work, extra=extra, drop=drop, say=say
        )
        lap("download, dependencies build and pinning")
        written: list[Path] = []
        dropped: dict[str, list[str]] = {}
        runner = SandboxRunner(
            built.sandbox, ini, sandbox=sandbox, plugins=plugins, stop_after=MAX_FAIL_TO_PASS
        )
        try:
            with (
                runner,
                opened(
                    (sdist, repo, spec, built, ini, plugins),
                    work / "tasks",
                    runner,
                    seed=seed,
                    combined=combined,
                    p2p_sample=p2p_sample,
                    max_trials=mutant_budget(max_tasks, max_trials),
                    timeout_s=timeout_s,
                    split=split,
                    say=say,
                ) as synthesis,
            ):
                # Rounds: candidates are written, validated and screened, and while fewer than
                # max_tasks were kept, more are drawn where the last round stopped, until the
                # mutant budget is spent.
                for round_no in itertools.count(1):
                    need = max_tasks - len(written)
                    if need <= 0 or synthesis.exhausted:
                        break
                    folders = synthesis.more(need)
                    say(f"{synthesis.name}: {len(folders)} candidates; {synthesis.summary()}")
                    lap(
                        f"synthesis, round {round_no}"
                        if round_no > 1
                        else "test discovery and synthesis"
                    )
                    if not folders:
                        break
                    kept, lost = screened_round(
                        folders,
                        out,
                        sandbox=sandbox,
                        reruns=reruns,
                        workers=workers,
                        adversarial=adversarial,
                        leak_scan=leak_scan,
                        served=served,
                        restate=restate,
                        say=say,
                        lap=lap,
                        on_report=on_report,
                    )
                    written += kept
                    dropped.update(lost)
                    if len(written) < max_tasks and not synthesis.exhausted:
                        say(
                            f"{len(written)} of {max_tasks} tasks kept; drawing "
                            f"{max_tasks - len(written)} more candidates"
                        )
                passing, tests, seconds = (
                    len(runner.collected),
                    runner.collected,
                    runner.suite_seconds,
                )
                _say_runs(runner, say)
        except SynthError as e:
            raise SynthError(f"{e} (sdist {sdist.path.name}){_last_run(runner)}") from e
        return PypiSynthesis(sdist, spec, written, dropped, passing, tests, plugins, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the stages, in order -------------------------------------------------------------------
def fetch(
    project: str,
    work: Path,
    *,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
    say: Say = print,
) -> tuple:
    """Stage 1 of :func:`from_pypi`: the sdist unpacked under ``work``, its dependencies
    built and pinned, and the pytest plugins the tasks' command names.

    Returns:
        (sdist, repository folder, pinned spec, built dependencies, pytest ini options,
        plugins).
    """
    sdist, repo, spec, built, ini = prepare(project, work, extra=extra, drop=drop, say=say)
    plugins = plugins_of(repo, sdist.name, built, extra=extra, drop=drop)
    return sdist, repo, spec, built, ini, plugins


def mutate_fetched(
    fetched: tuple, out: Path, runner: SandboxRunner, *, max_tasks: int = 10, **options
) -> list[Path]:
    """Stage 2 of :func:`from_pypi` for what :func:`fetch` returned, in one batch: the
    package's mutants tried with ``runner`` and up to ``max_tasks`` real bugs written as
    task folders under ``out`` (``options`` are :class:`repogym.scenarios.synth.Synthesis`'s,
    less those the package gives; ``max_trials`` defaults to
    :func:`repogym.scenarios.synth.mutant_budget`'s)."""
    options["max_trials"] = mutant_budget(max_tasks, options.get("max_trials"))
    with opened(fetched, out, runner, **options) as synthesis:
        return synthesis.more(max_tasks)


def opened(fetched: tuple, out: Path, runner: SandboxRunner, **options) -> Synthesis:
    """The package :func:`fetch` returned, opened for mutation with ``runner`` (a
    :class:`repogym.scenarios.synth.Synthesis`, to use with ``with``): :func:`from_pypi`
    draws its candidates from it round by round."""
    sdist, repo, spec, _, ini, plugins = fetched
    return Synthesis(
        repo,
        out,
        runner=runner,
        name=sdist.name,
        only=pypi.code_paths(repo, sdist.name, pypi.archive_top_level(sdist)),
        environment=spec,
        ini_options=ini,
        plugins=plugins,
        note=pypi.path_hint(ini),
        **options,
    )


def screened_round(
    folders: Sequence[Path],
    out: Path,
    *,
    sandbox: str,
    reruns: int,
    workers: int,
    adversarial: bool,
    leak_scan: bool,
    served: bool,
    say: Say,
    lap: Callable[[str], None],
    restate: bool = True,
    on_report: Callable[[TaskReport], None] | None = None,
) -> tuple[list[Path], dict[str, list[str]]]:
    """Stages 3 to 6 for one round of candidates: :func:`validate`,
    :func:`repogym.quality.restate.restate_valid`, :func:`screen` and :func:`keep` (the
    folders kept under ``out``, and task id -> why it was dropped)."""
    reports = validate(
        folders, sandbox=sandbox, reruns=reruns, workers=workers, say=say, on_report=on_report
    )
    lap("validation")
    if restate:
        rs.restate_valid(folders, reports, sandbox=sandbox, workers=workers, say=say)
        lap("reports restated")
    holes = screen(
        folders,
        reports,
        sandbox=sandbox,
        workers=workers,
        adversarial=adversarial,
        leak_scan=leak_scan,
        served=served,
    )
    steps = (
        ("leak scan", leak_scan),
        ("attacks", adversarial),
        ("seal floor and scope", served),
    )
    if screened := [name for name, on in steps if on]:
        lap(f"screen ({', '.join(screened)})")
    return keep(folders, reports, holes, out)


def mutate_and_write(package_dir: str | Path, out: str | Path, **options) -> list[Path]:
    """Inject bugs, keep the real ones, write their bug reports and task folders.

    ``options`` are :func:`repogym.scenarios.synth.synthesize`'s.
    """
    return synthesize(package_dir, out, **options)


def validate(
    folders: Sequence[Path],
    *,
    sandbox: str,
    reruns: int,
    workers: int,
    say: Say = print,
    on_report: Callable[[TaskReport], None] | None = None,
) -> list[TaskReport]:
    """Grade every task written: gold passes (``reruns`` times), noop and decoys fail."""
    say(f"{len(folders)} candidate tasks; validating them in the sandbox")
    start = time.monotonic()

    def reported(report: TaskReport) -> None:
        say(
            f"validated {report.task_id}: {'ok' if report.ok else 'FAILED'} "
            f"({time.monotonic() - start:.0f}s into validation)"
        )
        if on_report is not None:
            on_report(report)

    reports = validate_tasks(
        [load_task(f) for f in folders],
        sandbox=sandbox,
        reruns=reruns,
        workers=workers,
        on_report=reported,
    )
    gold = [c.duration_s for r in reports for c in r.checks if c.kind in ("gold", "rerun")]
    if gold:
        say(
            f"grading gold (every listed test): median {statistics.median(gold):.1f}s over "
            f"{len(gold)} runs"
        )
    return reports


def screen(
    folders: Sequence[Path],
    reports: Sequence[TaskReport],
    *,
    sandbox: str,
    workers: int,
    adversarial: bool,
    leak_scan: bool,
    served: bool = False,
) -> dict[str, list[str]]:
    """Task id -> why a valid task is dropped: an attack beats noop, its fix leaks, or
    (``served``) a suite would withhold it."""
    valid = [load_task(f) for f, r in zip(folders, reports, strict=True) if r.ok]
    holes = _attacked(valid, sandbox, workers) if adversarial else {}
    if leak_scan:
        clean = [t for t in valid if t.id not in holes]
        for task_id, found in audit.leak_scan(clean, sandbox=sandbox).items():
            holes[task_id] = [f"{task_id}: a sandbox of it can read the fix: {found[0]}"]
    if served:
        noops = {r.task_id: r.noop_tests for r in reports}
        clean = [t for t in valid if t.id not in holes]
        for task_id, why in _withheld(clean, noops, sandbox, workers).items():
            holes[task_id] = [f"{task_id}: a suite would withhold it: {why}"]
    return holes


def keep(
    folders: Sequence[Path], reports: Sequence[TaskReport], holes: dict[str, list[str]], out: Path
) -> tuple[list[Path], dict[str, list[str]]]:
    """Move the tasks that validated and passed the screen to ``out``.

    Returns:
        (the folders written under ``out``, task id -> why it was dropped).
    """
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
    return written, dropped


# -- helpers --------------------------------------------------------------------------------
def dropped_line(task_id: str, failures: list[str]) -> str:
    """What to say of a task :func:`keep` dropped: ``dropped <id>: <its first reason>`` (a
    validation failure, or the screen's: a suite would withhold it, its fix leaks)."""
    why = failures[0]
    return f"dropped {why if why.startswith(f'{task_id}: ') else f'{task_id}: {why}'}"


def _stopwatch(say: Say) -> Callable[[str], None]:
    """A function that says how long since its last call (or its making) ``what`` took."""
    clock = time.monotonic()

    def lap(what: str) -> None:
        nonlocal clock
        say(f"{what}: {time.monotonic() - clock:.0f}s")
        clock = time.monotonic()

    return lap


def _last_run(runner: SandboxRunner) -> str:
    """The tail of the runner's last test run, to append to a synthesis error."""
    return f"\nlast test run (in the sandbox):\n{runner.log[-1500:]}" if runner.log.strip() else ""


def _say_runs(runner: SandboxRunner, say: Say) -> None:
    """What the sandboxed test runs of a synthesis cost."""
    say(
        f"{len(runner.collected)} tests pass in the sandbox (a full run took "
        f"{runner.suite_seconds:.1f}s)"
    )
    st = runner.stats
    say(
        f"mutant runs: {st['runs']} in the sandbox ({st['tests run']} tests, "
        f"{st['seconds']:.0f}s), {st['no test reaches the change']} not run (no "
        "test reaches the change)"
    )


def _withheld(
    tasks: list[Task], noops: dict[str, dict[str, str]], sandbox: str, workers: int
) -> dict[str, str]:
    """Task id -> why a suite would not serve it (:func:`suites.withheld_reason` of what a
    fetch records: the seal floor after the strongest attack's check, and how many
    pass_to_pass tests reach the fix)."""
    from repogym.quality.adversarial import forger_check
    from repogym.quality.pool import grading_pool
    from repogym.quality.validate import PatchGrader

    def seals(task: Task) -> dict:
        res = forger_check(task, grader, noops.get(task.id) or None)  # records what it passed
        witnessed = len(res.witnessed) if res.witnessed is not None else 0
        return {"witnessed": witnessed, "f2p": len(task.test_spec.fail_to_pass)}

    with PatchGrader(sandbox) as grader, grading_pool(workers) as pool:
        info = {t.id: {"seals": m} for t, m in zip(tasks, pool.map(seals, tasks), strict=True)}
    for found in audit.scope(tasks, sandbox=sandbox):
        for task_id, reaching in found.reaching().items():
            info[task_id]["scope"] = {"p2p_reaching": reaching}
    return {t: why for t, i in info.items() if (why := suites.withheld_reason(i)) is not None}


def _attacked(tasks: list[Task], sandbox: str, workers: int) -> dict[str, list[str]]:
    """Task id -> the attacks that beat noop, for the tasks with such holes."""
    from repogym.quality.adversarial import check_task
    from repogym.quality.validate import PatchGrader

    holes = {}
    with PatchGrader(sandbox) as grader:
        for task in tasks:
            report = check_task(task, grader, workers=workers)
            if not report.ok:
                holes[task.id] = [
                    f"{task.id}: attack {r.attack} beats noop"
                    f"{' (' + r.error + ')' if r.error else ''}"
                    for r in report.holes
                ]
    return holes


@dataclasses.dataclass
class SynthJob:
    """One package's synthesis (:func:`from_pypi`'s arguments as
    plain data, so that a Ray task can carry it): ``options`` are its keyword arguments
    other than ``say``."""

    project: str
    out: str
    options: dict


def synth_job(job: SynthJob, say: Callable[[str], None] | None = None) -> PypiSynthesis | str:
    """:func:`from_pypi` for ``job`` (quietly without ``say``: a
    remote call has no console); a package that cannot be synthesised from (its sdist or
    dependencies unavailable, no test passing in the sandbox, an ``OSError``) comes back as
    the exception's message (the caller names the package when there are several), so the
    other packages go on."""
    try:
        return from_pypi(job.project, Path(job.out), say=say or (lambda m: None), **job.options)
    except (pypi.PypiError, DependenciesUnavailable, SynthError, SandboxError, OSError) as e:
        return str(e)
