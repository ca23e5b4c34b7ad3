"""``repogym suite list|show|fetch|build``: suites of real-package tasks (docs/suites.md).

    repogym suite list                         # shipped suites, fetched and validated counts
    repogym suite show realpy                  # its packages: kind, split, version, tasks
    repogym suite fetch realpy [--packages toolz,parse] [--per-package 3] [--workers 2]
    repogym suite fetch realpy --since 2025-06-01 --root ~/realpy-recent   # a time split
    repogym suite build realpy --package toolz==1.2.0 --split train --kind functional
    repogym suite audit realpy --split test    # leaks, compiled files, reproductions, regressions
    repogym suite add-history realpy mined/ --split train --kind functional

``fetch`` downloads each package's sdist with pip (hash-checked), builds its dependencies,
writes the task folders and validates every task not yet validated, with a progress bar;
it is idempotent and resumable. Each task validated now is then graded once more with the
attack library's strongest task-blind attack planted (the forger, through the same
templates as validation), and the tasks where it earns more than noop in any reward mode are
listed (``--no-adversarial`` skips it). The fail_to_pass tests it passes are recorded: they
no longer count as witnessed by a value seal, and each task's seal measure is recorded
again from what is left. ``audit`` checks the fetched tasks beyond validation
(:mod:`repogym.quality.audit`): no workspace holds a compiled file, no sandbox of a task can
read its fix, each reproduction fails without the fix and passes with it, and the gold
patch plus another task's bug does not earn full reward. Exit status 1 when a task fails
validation or an audit check, 2 on a bad argument, a download or dependencies that
cannot be built.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from repogym.cli.options import SPLITS, add_sandbox
from repogym.cli.printing import print_error


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "suite", help="suites of tasks from real PyPI packages: list, show, fetch, audit, build"
    )
    s = p.add_subparsers(dest="suite_command", metavar="ACTION", required=True)
    s.add_parser("list", help="shipped suites and how much of each is fetched here")
    show = s.add_parser("show", help="a suite's packages")
    show.add_argument("name")
    f = s.add_parser("fetch", help="download, build and validate a suite (resumable)")
    f.add_argument("name")
    f.add_argument("--packages", help="comma-separated packages (default: all)")
    f.add_argument(
        "--per-package",
        type=int,
        metavar="N",
        help="only the first N tasks of each package (a sample)",
    )
    f.add_argument("--root", type=Path, help="where to put it (default <cache>/suites/NAME)")
    f.add_argument(
        "--since",
        metavar="YYYY-MM-DD",
        help="only the releases that reached the package index on that day or later (a "
        "time split; with --root, a suite of its own)",
    )
    f.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="grading runs in parallel (default: CPU count)",
    )
    f.add_argument("--reruns", type=int, default=2, help="gold runs per task (default 2)")
    f.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        help="fetch the packages in parallel as Ray tasks ('local' starts Ray here, else a "
        "cluster address; --root must then be a folder every node sees), each with "
        "--workers grading runs",
    )
    f.add_argument(
        "--no-adversarial",
        dest="adversarial",
        action="store_false",
        help="skip the adversarial check (the strongest task-blind attack graded "
        "once per task validated now, every reward mode); the seal floor is then measured "
        "without it, from noop alone",
    )
    add_sandbox(f)
    a = s.add_parser(
        "audit", help="check fetched tasks: leaks, compiled files, reproductions, regressions"
    )
    a.add_argument("name")
    a.add_argument("--split", choices=SPLITS)
    a.add_argument("--packages", help="comma-separated packages (default: all)")
    a.add_argument("--tasks", help="comma-separated task ids (default: every fetched one)")
    a.add_argument("--root", type=Path, help="where the suite was fetched")
    add_sandbox(a)
    a.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["leaks", "reproduction", "sabotage"],
        help="a check to skip",
    )
    a.add_argument(
        "--scope",
        action="store_true",
        help="also run each package's suite once, traced, on the fixed code: the test files "
        "no graded test comes from, and each task's pass_to_pass tests that reach its fix",
    )
    a.add_argument(
        "--stability",
        action="store_true",
        help="also grade gold and no change under another PYTHONHASHSEED and beside a CPU "
        "hog: no test's outcome may change (six gradings a task)",
    )
    a.add_argument(
        "--hash-seed",
        type=int,
        metavar="N",
        help="the PYTHONHASHSEED of --stability (default: drawn at random, and printed)",
    )
    h = s.add_parser(
        "add-history",
        help="(maintainers) add release-history tasks (from "
        "`repogym history`) to a suite's manifest",
    )
    h.add_argument("name")
    h.add_argument(
        "folders",
        nargs="+",
        type=Path,
        metavar="TASKS_DIR",
        help="validated history task folders, or folders of them",
    )
    h.add_argument("--split", required=True, choices=SPLITS)
    h.add_argument("--kind", required=True)
    h.add_argument(
        "--manifests", type=Path, help="manifest folder (default: the suite's folder in repogym)"
    )
    r = s.add_parser(
        "restate",
        help="(maintainers) rewrite the reports of fetched tasks that state a hidden "
        "test's expected value on other inputs, in the suite's manifest",
    )
    r.add_argument("name")
    r.add_argument("--split", choices=SPLITS)
    r.add_argument("--packages", help="comma-separated packages (default: all)")
    r.add_argument("--tasks", help="comma-separated task ids (default: every fetched one)")
    r.add_argument("--root", type=Path, help="where the suite was fetched")
    r.add_argument(
        "--manifests", type=Path, help="manifest folder (default: the suite's folder in repogym)"
    )
    add_sandbox(r)
    b = s.add_parser("build", help="(maintainers) add packages to a suite's manifest")
    b.add_argument("name")
    b.add_argument(
        "--package",
        required=True,
        action="append",
        metavar="NAME==VERSION",
        help="a package to synthesise tasks from (repeat for several)",
    )
    b.add_argument("--split", required=True, choices=SPLITS)
    b.add_argument("--kind", required=True, help="e.g. parsing, dates, functional")
    b.add_argument("--tasks", type=int, default=30, help="tasks to synthesise (default 30)")
    b.add_argument(
        "--combined",
        type=float,
        default=0.3,
        metavar="SHARE",
        help="share of the tasks with 2 or 3 bugs (default 0.3)",
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--requirement", action="append", default=[], metavar="SPEC")
    b.add_argument("--no-requirement", action="append", default=[], metavar="NAME")
    b.add_argument(
        "--manifests", type=Path, help="manifest folder (default: the suite's folder in repogym)"
    )
    b.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    b.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        help="build the packages in parallel as Ray tasks ('local' starts Ray here, else a "
        "cluster address), each with --workers grading runs; manifests are written here",
    )
    add_sandbox(b)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.quality.ray_map import RayMapError
    from repogym.scenarios.dependencies import DependenciesUnavailable
    from repogym.scenarios.pypi import PypiError
    from repogym.scenarios.suites import SuiteError
    from repogym.scenarios.synth import SynthError

    action = {
        "list": _list,
        "show": _show,
        "fetch": _fetch,
        "build": _build,
        "audit": _audit,
        "add-history": _add_history,
        "restate": _restate,
    }
    try:
        return action[args.suite_command](args)
    except (SuiteError, PypiError, DependenciesUnavailable, SynthError, RayMapError) as e:
        print(e, file=sys.stderr)
        return 2


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from repogym.scenarios import suites

    table = Table(title="suites", title_justify="left")
    for col in ("suite", "gym id", "packages", "tasks", "validated here", "where"):
        table.add_column(col, overflow="fold")
    for name in suites.suite_names():
        suite = suites.load_suite(name)
        root = suites.suite_root(name)
        table.add_row(
            name,
            suite.env_id,
            str(len(suite.packages)),
            str(suite.tasks),
            str(len(suites.read_index(root))),
            str(root),
        )
    Console().print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from repogym.scenarios import suites

    suite = suites.load_suite(args.name)
    index = suites.read_index(suites.suite_root(args.name))
    table = Table(title=f"{suite.name} ({suite.env_id}): {suite.description}", title_justify="left")
    for col in (
        "package",
        "version",
        "kind",
        "split",
        "tasks",
        "validated here",
        "served",
        "f2p by a value seal",
    ):
        table.add_column(col)
    withheld = suites.withheld_tasks(args.name)
    # validated here as the manifest has the task now (another version of it is stale)
    fresh = {
        t.id: p.split
        for p in suite.packages
        for t in p.tasks
        if index.get(t.id, {}).get("digest") == t.digest and index[t.id].get("split") == p.split
    }
    for p in suite.packages:
        ids = [t.id for t in p.tasks if t.id in fresh]
        seals = [index[t].get("seals") or {} for t in ids]
        witnessed, f2p = (sum(s.get(k, 0) for s in seals) for k in ("witnessed", "f2p"))
        share = f"{witnessed}/{f2p}" if any(s.get("f2p") for s in seals) else "-"
        table.add_row(
            p.name,
            p.version,
            p.kind,
            p.split,
            str(len(p.tasks)),
            str(len(ids)),
            str(sum(1 for t in ids if t not in withheld)),
            share,
        )
    console = Console()
    console.print(table)
    served = sum(1 for t in fresh if t not in withheld)
    console.print(
        f"{served} of {len(fresh)} validated tasks served; "
        f"{sum(1 for t in fresh if t in withheld)} withheld "
        f'(ask for one by name: `repogym run --tasks ID`, `gym.make("repogym/ID-v0")`)',
        highlight=False,
        markup=False,
    )
    for split in dict.fromkeys(p.split for p in suite.packages):
        here = [t for t, s in fresh.items() if s == split]
        total = sum(len(p.tasks) for p in suite.packages if p.split == split)
        console.print(
            f"  {split}: {sum(1 for t in here if t not in withheld)} served of {len(here)} "
            f"validated here ({total} in the manifest)",
            highlight=False,
            markup=False,
        )
    if stale := len([t for t in index if t not in fresh]):
        console.print(
            f"{stale} validated from another version of the manifest: `repogym suite fetch "
            f"{suite.name}` validates them again",
            highlight=False,
            markup=False,
        )
    for tid, why in ((t, w) for t, w in withheld.items() if t in fresh):
        console.print(f"withheld {tid}: {why}", highlight=False, markup=False, soft_wrap=True)
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from repogym.quality.suite_build import fetch
    from repogym.scenarios import suites

    suite = suites.load_suite(args.name)
    packages = [p.strip() for p in args.packages.split(",")] if args.packages else None
    chosen = suite.select(packages)
    if args.since:
        chosen = _released_since(chosen, args.since)
        if not chosen:
            print(
                f"{suite.name}: no release of {packages or 'its packages'} reached the package "
                f"index on {args.since} or later. Fix: an earlier --since",
                file=sys.stderr,
            )
            return 2
        packages = [p.name for p in chosen]
    total = sum(len(p.tasks[: args.per_package]) for p in chosen)
    console = Console(stderr=True)
    start = time.monotonic()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        bar = progress.add_task(f"{suite.name}", total=total)
        done = 0

        def event(kind: str, text: str) -> None:
            nonlocal done
            if kind == "task":
                progress.advance(bar)
                done += 1
            elif kind == "fail":
                print_error(progress.console, text, label="FAIL")
            else:
                progress.update(bar, description=f"{suite.name}: {text}")
            if not console.is_terminal and kind != "fail":
                # a log file gets no bar: a line per event, so a fetch of an hour says
                # where it is while it runs
                what = f"{text} done" if kind == "task" else text
                console.print(f"{suite.name}: {done}/{total} {what}", highlight=False)

        report = fetch(
            args.name,
            root=args.root,
            packages=packages,
            per_package=args.per_package,
            sandbox=args.sandbox,
            workers=args.workers,
            reruns=args.reruns,
            adversarial=args.adversarial,
            on_event=event,
            ray=args.ray,
        )
    wall = time.monotonic() - start
    phases = ", ".join(f"{k} {v:.0f}s" for k, v in report.seconds.items())
    fetched = {*report.validated, *report.already}  # this call's packages, not the suite's
    held = {
        t: why for t, why in suites.withheld_tasks(args.name, args.root).items() if t in fetched
    }
    print(
        f"{suite.name}: seal floor: {report.usable - len(held)} served, {len(held)} "
        f"withheld (`repogym suite show {suite.name}` says why)"
    )
    print(
        f"{suite.name}: {report.usable}/{total} tasks validated "
        f"({len(report.validated)} now, {len(report.already)} before, "
        f"{len(report.failed)} failed) in {wall:.0f}s ({phases}); "
        f"root {suites.suite_root(args.name, args.root)}"
    )
    if report.forger_checked:
        print(
            f"adversarial check (the forger, every reward mode): beat noop on "
            f"{len(report.forged)} of {len(report.forger_checked)} tasks checked now"
            + "".join(f"\n  {t}: {why}" for t, why in sorted(report.forged.items()))
        )
    return 1 if report.failed else 0


def _build(args: argparse.Namespace) -> int:
    from repogym.quality.suite_build import build_entries
    from repogym.scenarios import suites

    try:
        meta = suites.suite_meta(args.name)
    except suites.SuiteError:
        meta = {"name": args.name, "env_id": f"repogym/{args.name}-v0", "description": ""}
    folder = args.manifests or suites.MANIFESTS / args.name.lower()
    failed = 0
    for project, entry in build_entries(
        args.package,
        ray=args.ray,
        say=lambda m: print(m, file=sys.stderr),
        split=args.split,
        kind=args.kind,
        max_tasks=args.tasks,
        seed=args.seed,
        combined=args.combined,
        extra=args.requirement,
        drop=args.no_requirement,
        sandbox=args.sandbox,
        workers=args.workers,
    ):
        if isinstance(entry, str):
            print(entry if entry.startswith(project) else f"{project}: {entry}", file=sys.stderr)
            failed += 1
            continue
        _write_entry(entry, folder, meta)
    return 1 if failed else 0


def _write_entry(entry, folder: Path, meta: dict) -> None:
    """Write a package's manifest entry into ``folder`` and say so."""
    from repogym.quality.suite_build import write_entry

    path = write_entry(
        entry, folder, suite=meta["name"], env_id=meta["env_id"], description=meta["description"]
    )
    print(f"wrote {path}: {len(entry.tasks)} tasks of {entry.name} {entry.version}")


def _audit(args: argparse.Namespace) -> int:
    from repogym.quality import audit
    from repogym.scenarios import suites

    packages = [p.strip() for p in args.packages.split(",")] if args.packages else None
    tasks = suites.validated_tasks(
        args.name, args.root, split=args.split, packages=packages, withheld=bool(args.tasks)
    )  # a task named is audited even when it is withheld under the seal floor
    if args.tasks:
        wanted = {t.strip() for t in args.tasks.split(",")}
        if unknown := wanted - {t.id for t in tasks}:
            print(
                f"{args.name}: no validated task {', '.join(sorted(unknown))} (of the split "
                f"and packages asked for). Fix: `repogym suite show {args.name}` lists them",
                file=sys.stderr,
            )
            return 2
        tasks = [t for t in tasks if t.id in wanted]
    start = time.monotonic()
    problems: list[str] = []
    for task in tasks:
        problems += [f"{task.id}: repo/ holds {p}" for p in audit.artefacts(task)]
    if "reproduction" not in args.skip:
        for task in tasks:
            if problem := audit.check_reproduction(task, sandbox=args.sandbox):
                problems.append(problem)
    if "sabotage" not in args.skip:
        graded = audit.sabotage(tasks, sandbox=args.sandbox)
        problems += [p for s in graded if (p := s.problem)]
        # a task that neither another task's bug nor a caught mutant checked goes
        # unchecked: say how many were, so a sample that checks nothing cannot pass for one
        # that did
        graded = [s for s in graded if not s.error]
        made = sum(1 for s in graded if s.caught_by)
        print(
            f"sabotage: {len(graded)} of {len(tasks)} tasks graded with a regression in "
            f"another function ({len(graded) - made} with another task's bug, {made} with a "
            f"mutant the package's tests catch), highest reward "
            f"{max((s.reward for s in graded), default=0.0):.2f}"
        )
    if "leaks" not in args.skip:
        for task_id, found in audit.leak_scan(tasks, sandbox=args.sandbox).items():
            problems += [f"{task_id}: {f}" for f in found]
    checks = [c for c in ("leaks", "reproduction", "sabotage") if c not in args.skip]
    if args.scope:
        problems += _scope(tasks, args.sandbox)
        checks.append("scope")
    if args.stability:
        seed, unstable = audit.stability(tasks, sandbox=args.sandbox, hash_seed=args.hash_seed)
        problems += [str(u) for u in unstable]
        print(
            f"stability: {len({u.task for u in unstable})} of {len(tasks)} tasks changed an "
            f"outcome under PYTHONHASHSEED={seed} or beside a CPU hog"
        )
        checks.append("stability")
    for p in problems:
        print(f"FAIL {p}")
    print(
        f"{args.name}: audited {len(tasks)} tasks in {time.monotonic() - start:.0f}s "
        f"({', '.join(checks)}, compiled files): {len(problems)} problems"
    )
    return 1 if problems else 0


def _scope(tasks: list, sandbox: str) -> list[str]:
    """Print ``suite audit --scope``'s findings; the problems are the packages whose suite
    could not be run."""
    from repogym.quality import audit

    problems, reached, alone = [], 0, []
    for found in audit.scope(tasks, sandbox=sandbox):
        if found.error:
            problems.append(f"{found.package}: its suite could not be run: {found.error}")
            continue
        for rel, why in sorted(found.ungraded.items()):
            print(f"UNGRADED {found.package}: {rel}: {why}")
        for task_id, reach in sorted(found.reach.items()):
            if reach == []:
                alone.append(task_id)
            else:
                reached += 1
    print(
        f"scope: {reached} of {reached + len(alone)} tasks have listed pass_to_pass tests that "
        f"reach the code their bug changes (or it is outside every function); "
        f"only fail_to_pass tests reach it in {len(alone)}: "
        + (", ".join(alone) if alone else "none")
    )
    return problems


def _restate(args: argparse.Namespace) -> int:
    from repogym.quality import restate
    from repogym.quality.suite_build import write_restated
    from repogym.scenarios import suites

    folder = args.manifests or suites.MANIFESTS / args.name.lower()
    if not (folder / "suite.json").is_file():
        print(
            f"error: {folder} holds no suite.json: --manifests must be a folder of the "
            f"suite's manifests, which restated entries are written into. Fix: copy "
            f"{suites.MANIFESTS / args.name.lower()} there first, or leave --manifests out",
            file=sys.stderr,
        )
        return 2
    packages = [p.strip() for p in args.packages.split(",")] if args.packages else None
    tasks = suites.validated_tasks(
        args.name, args.root, split=args.split, packages=packages, withheld=True
    )
    if args.tasks:
        wanted = {t.strip() for t in args.tasks.split(",")}
        tasks = [t for t in tasks if t.id in wanted]
    start = time.monotonic()
    found = restate.restate_all(
        tasks, sandbox=args.sandbox, say=lambda m: print(m, file=sys.stderr)
    )
    done = {k: v for k, v in found.items() if isinstance(v, restate.Restated)}
    written = write_restated(folder, done)
    leaking = sum(1 for v in found.values() if v != restate.NO_LEAK)
    print(
        f"{args.name}: {len(tasks)} tasks read, {leaking} state a hidden expected value, "
        f"{len(done)} restated ({sum(1 for v in done.values() if v.change == restate.CUT)} "
        "of them by cutting the failures they list to what the code gave, "
        f"{sum(1 for v in done.values() if v.change == restate.CRASH)} by cutting their "
        "scripts to the calls that crash) "
        f"({', '.join(str(p) for p in written) or 'nothing written'}) "
        f"in {time.monotonic() - start:.0f}s; `repogym suite fetch {args.name}` validates them"
    )
    return 0


def _released_since(entries: list, since: str) -> list:
    """The manifest entries whose release reached the package index on ``since`` or later
    (the day the manifest records, else the index's).

    Raises:
        SuiteError: ``since`` is not a date, or a release date cannot be read.
    """
    from repogym.scenarios.history import HistoryError, parse_day, release_date
    from repogym.scenarios.suites import SuiteError

    try:
        day = parse_day(since)
        return [
            e for e in entries if (e.released or release_date(e.distribution, e.version)) >= day
        ]
    except (ValueError, HistoryError) as e:
        raise SuiteError(str(e)) from e


def _add_history(args: argparse.Namespace) -> int:
    from repogym.quality.suite_build import history_entries
    from repogym.scenarios import suites
    from repogym.scenarios.task import find_task_dirs

    meta = suites.suite_meta(args.name)
    folder = args.manifests or suites.MANIFESTS / args.name.lower()
    dirs = [d for f in args.folders for d in find_task_dirs(f)]
    for entry in history_entries(
        dirs, folder, split=args.split, kind=args.kind, say=lambda m: print(m, file=sys.stderr)
    ):
        _write_entry(entry, folder, meta)
    return 0
