"""``repogym synth PACKAGE_DIR --out DIR``: synthesise tasks by mutating a tested package.

The pipeline, stage by stage, is :mod:`repogym.quality.synthesis`. The package's tests run
as plain subprocesses (it is your own, trusted code); the mutation score of each task
written is then computed in the sandbox (``--no-mutation`` skips it). Check the emitted
tasks with ``repogym validate DIR``.

``repogym synth --pypi NAME[==VERSION] --out DIR`` starts from a PyPI project instead
(:func:`repogym.quality.synthesis.from_pypi`): its sdist, its dependencies, its tests run in
the sandbox, and only tasks that pass ``repogym validate`` and whose sandbox holds nothing
of the fix are written. ``--pypi`` given several times synthesises from each package in
turn, each into ``DIR/<name>``, or at once as Ray tasks with ``--ray local|ADDRESS``
(:func:`repogym.quality.ray_map.ray_map`); a package that fails says why once and the
others go on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.cli.options import SPLITS, add_mutation_options, bad_mutation_args
from repogym.cli.printing import print_written, run_mutation

if TYPE_CHECKING:
    from repogym.quality.synth_pypi import PypiSynthesis
    from repogym.quality.synthesis import SynthJob

#: Mutants graded per task by `synth --pypi` unless --max-mutants says otherwise: a real
#: function has 50-100 of them, and a package's own test suite takes seconds per grading, so
#: all of them would take hours for a dozen tasks on a small machine. The score is a report
#: on the package's tests (the tasks are written and validated before it is computed).
PYPI_MUTANTS = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth", help="make tasks from a tested Python package by mutation")
    p.add_argument(
        "package",
        metavar="PACKAGE_DIR",
        nargs="?",
        help="folder whose tests pass with `python -m pytest` run inside it",
    )
    p.add_argument(
        "--pypi",
        action="append",
        metavar="NAME[==VERSION]",
        help="synthesise from this PyPI project's sdist instead (its tests run in "
        "the sandbox with its dependencies; written tasks are validated; their "
        f"mutation scores come from a fixed sample of {PYPI_MUTANTS} mutants "
        "per task unless --max-mutants is given); give it again for more packages: each "
        "is synthesised in turn, or at once with --ray, into --out/<name>",
    )
    p.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        help="with --pypi: synthesise from the packages in parallel as Ray tasks ('local' "
        "starts Ray here, else a cluster address; --out must then be a folder every node "
        "sees), each with --workers grading runs",
    )
    p.add_argument(
        "--requirement",
        action="append",
        default=[],
        metavar="SPEC",
        help="with --pypi: add a requirement to the derived dependencies",
    )
    p.add_argument(
        "--no-requirement",
        action="append",
        default=[],
        metavar="NAME",
        help="with --pypi: drop a derived requirement",
    )
    p.add_argument(
        "--reruns",
        type=int,
        default=3,
        help="with --pypi: gold runs per task when validating (default 3)",
    )
    p.add_argument(
        "--adversarial",
        action="store_true",
        help="with --pypi: also drop tasks that an attack of `repogym validate "
        "--adversarial` games",
    )
    p.add_argument("--out", required=True, help="folder to write task folders into")
    p.add_argument(
        "--max-tasks",
        type=int,
        default=10,
        help="tasks to write (default 10); with --pypi, tasks that validate and pass the "
        "screens: more candidates are drawn while fewer are kept, up to 30 mutants per task",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--combined",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the tasks that hold 2 or 3 bugs in different functions (default 0)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default="train",
        help="the tasks' split (a test task lists every passing test, however slow the suite)",
    )
    p.add_argument(
        "--p2p-sample",
        type=int,
        default=50,
        help="for a suite too slow to list whole: tests sampled besides those "
        "of the test files that reach the changed code",
    )
    p.add_argument(
        "--no-leak-scan",
        action="store_true",
        help="with --pypi: skip the scan of each task's sandbox for its fix",
    )
    p.add_argument(
        "--no-restate",
        action="store_true",
        help="with --pypi: keep each report as synthesis wrote it, even one that states a "
        "hidden test's expected value (by default it is restated on other inputs, checked "
        "in the sandbox)",
    )
    p.add_argument(
        "--served",
        action="store_true",
        help="with --pypi: keep only the tasks a suite would serve (value seals witness 90 "
        "%% of the fail_to_pass tests after the forger's check, and a pass_to_pass test "
        "reaches the fix; `repogym suite build` always does)",
    )
    add_mutation_options(p, gate=True)
    p.set_defaults(func=run, usage_error=p.error)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from repogym.quality.synthesis import from_package
    from repogym.scenarios.synth import SynthError
    from repogym.scenarios.task import load_task

    if bad_mutation_args(args):
        return 2
    if (args.package is None) == (args.pypi is None):
        print("give PACKAGE_DIR or --pypi NAME[==VERSION] (one of them)", file=sys.stderr)
        return 2
    if args.ray and not args.pypi:
        args.usage_error(
            "--ray spreads --pypi packages over Ray; PACKAGE_DIR is synthesised here. Fix: "
            "drop --ray, or give --pypi NAME[==VERSION] instead of PACKAGE_DIR"
        )
    if args.pypi:
        return _run_pypi(args)
    try:
        tasks = from_package(
            args.package,
            args.out,
            max_tasks=args.max_tasks,
            seed=args.seed,
            combined=args.combined,
            p2p_sample=args.p2p_sample,
            split=args.split,
        )
    except (SynthError, OSError) as e:
        print(e, file=sys.stderr)
        return 2
    for t in tasks:
        print(f"wrote {t}")
    if tasks and not args.no_mutation:
        run_mutation([load_task(t) for t in tasks], args, Console(), diffs=False)
    print(f"{len(tasks)} tasks; next: repogym validate {args.out} (--mutation for survivors)")
    return 0 if tasks else 1


def _run_pypi(args: argparse.Namespace) -> int:
    from packaging.utils import canonicalize_name
    from rich.console import Console

    from repogym.quality.ray_map import RayMapError, each_job
    from repogym.quality.synthesis import SynthJob, synth_job
    from repogym.scenarios.pypi import PypiError, parse_project

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(message, markup=False, highlight=False)

    try:
        names = [canonicalize_name(parse_project(project)[0]) for project in args.pypi]
    except PypiError as e:
        print(e, file=sys.stderr)
        return 2
    if len(set(names)) < len(names):
        print(
            "--pypi names a package twice (each is written to --out/<name>). Fix: give each "
            "package once",
            file=sys.stderr,
        )
        return 2
    if args.max_mutants is None:
        args.max_mutants = PYPI_MUTANTS
    options = {
        "max_tasks": args.max_tasks,
        "seed": args.seed,
        "combined": args.combined,
        "p2p_sample": args.p2p_sample,
        "extra": list(args.requirement),
        "drop": list(args.no_requirement),
        "sandbox": args.sandbox,
        "workers": args.workers,
        "reruns": args.reruns,
        "adversarial": args.adversarial,
        "split": args.split,
        "leak_scan": not args.no_leak_scan,
        "served": args.served,
        "restate": not args.no_restate,
    }
    # a Ray task runs in a folder of its own: it is given --out as an absolute path
    out = Path(args.out).resolve() if args.ray else Path(args.out)
    several = len(args.pypi) > 1
    jobs = [
        SynthJob(project, str(out / name if several else out), options)
        for project, name in zip(args.pypi, names, strict=True)
    ]
    results: list[PypiSynthesis | str] = []
    try:
        for job, res in each_job(synth_job, jobs, ray=args.ray, cpus_each=args.workers, say=say):
            results.append(res)
            _summary(job, res, args, several=several)
    except RayMapError as e:
        print(e, file=sys.stderr)
        return 2
    if not several and isinstance(results[0], str):
        return 2  # _summary said why
    return 0 if any(not isinstance(r, str) and r.written for r in results) else 1


def _summary(
    job: SynthJob, res: PypiSynthesis | str, args: argparse.Namespace, *, several: bool
) -> None:
    """One package's written and dropped tasks, their mutation scores (unless
    --no-mutation) and its total line; or why it could not be synthesised from (named by
    its package when there are several)."""
    from rich.console import Console

    from repogym.scenarios.task import load_task

    if isinstance(res, str):
        print(f"{job.project}: {res}" if several else res, file=sys.stderr)
        return
    print_written(res.written, res.dropped)
    missing = [w for w in res.written if not Path(w).is_dir()]
    if res.written and not missing and not args.no_mutation:
        run_mutation([load_task(t) for t in res.written], args, Console(), diffs=False)
    print(
        f"{len(res.written)} validated tasks from {res.sdist.name} {res.sdist.version} "
        f"({res.passing_tests} of its tests pass in the sandbox; {len(res.dropped)} dropped)"
        + (
            f"; {len(missing)} written where this machine does not see them: give --out a "
            "folder every node sees"
            if missing
            else ""
        )
    )
