"""``repogym tasks``: list the registered tasks with their split and tags.

``--quality`` adds what makes a task's hidden tests trustworthy: the share of its listed tests that
are sealed (their verdict needs hidden expected values), its decoys and the mutation
score stored by ``repogym validate --mutation`` for this exact task version, with the
median and minimum over the listed tasks; and the task's kind (by its importer) with what the
grader can vouch for in it (docs/grading.md, "Imported tasks").
"""

from __future__ import annotations

import argparse
import statistics

from repogym.cli.options import SPLITS
from repogym.cli.printing import print_error


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list tasks (built-ins, plus --dir folders)")
    p.add_argument("--dir", action="append", default=[], help="also register this task folder")
    p.add_argument(
        "--suite",
        help="also list a fetched suite's tasks (those withheld under the seal floor too)",
    )
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--tag", action="append", default=[], help="keep tasks with any of these tags")
    p.add_argument(
        "--quality",
        action="store_true",
        help="also list each task's sealed tests (whose verdict needs the hidden "
        "expected values), decoys and the stored mutation score (computed by "
        "`repogym validate --mutation`)",
    )
    p.set_defaults(func=run)


def quality_line(scores: dict[str, float | None]) -> str:
    """``mutation score over 29/31 tasks: median 0.95, min 0.82 (task-id); ...``."""
    known = {t: s for t, s in scores.items() if s is not None}
    missing = len(scores) - len(known)
    todo = (
        f"; {missing} without a stored score (run `repogym validate --mutation`)" if missing else ""
    )
    if not known:
        return f"mutation score: none stored{todo}"
    worst = min(known, key=known.get)
    return (
        f"mutation score over {len(known)}/{len(scores)} tasks: median "
        f"{statistics.median(known.values()):.2f}, min {known[worst]:.2f} ({worst}){todo}"
    )


def value_column(task, info: dict | None) -> str:
    """``witnessed/f2p`` as the suite fetch measured it (a value seal showed the test's
    failure at noop), else ``≤sealed/f2p`` from the planted seals (``0/f2p`` for a kind
    graded from a runner's output, which code the agent changed writes); ``withheld`` marks a
    suite task under the floor."""
    from repogym.grading.grader import value_sealed
    from repogym.scenarios.suites import withheld_reason

    seals = (info or {}).get("seals") or {}
    if seals.get("f2p"):
        held = " withheld" if withheld_reason(info) else ""
        return f"{seals.get('witnessed', 0)}/{seals['f2p']}{held}"
    from repogym.scenarios.importing import OUTPUT_GRADED, task_kind

    found = value_sealed(task)
    if task_kind(task.path) in OUTPUT_GRADED:  # a seal there holds what the agent's code printed
        return f"0/{len(found)} (the runner's output)"
    return f"≤{sum(found.values())}/{len(found)}"


def kind_column(task) -> str:
    """``swebench-log (log-graded: a forger can print passes)``: the task's kind
    by its importer and what the grader can vouch for in it."""
    from repogym.scenarios.importing import KIND_NOTES, task_kind

    kind = task_kind(task.path)
    return f"{kind} ({KIND_NOTES[kind]})"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from repogym.harness.report import make_console
    from repogym.scenarios.registry import registered_tasks
    from repogym.scenarios.task import select_tasks

    errors = Console(stderr=True)
    bad = _register_dirs(args.dir, errors)
    measured: dict[str, dict] = {}
    if args.suite:
        from repogym.envs import register_task
        from repogym.scenarios import suites

        try:
            for t in suites.validated_tasks(args.suite, withheld=True):
                register_task(t.path, overwrite=True)
        except suites.SuiteError as e:
            errors.print(f"error: {e}", markup=False, highlight=False)
            return 2
        measured = dict(suites.read_index(suites.suite_root(args.suite)))
    try:
        tasks = select_tasks(registered_tasks().values(), split=args.split, tags=args.tag)
    except ValueError as e:
        print_error(errors, e)
        return 2
    tasks.sort(key=lambda t: (t.split, t.id))
    table = Table(title=f"{len(tasks)} tasks")
    cols = (
        [
            "env id",
            "split",
            "kind",
            "tests (f2p/p2p)",
            "sealed",
            "f2p by a value seal",
            "decoys",
            "mutation score",
            "adversarial",
        ]
        if args.quality
        else ["env id", "split", "tags", "tests (f2p/p2p)", "max steps"]
    )
    for col in cols:
        table.add_column(col, overflow="fold")
    scores: dict[str, float | None] = {}
    sealed_shares: dict[str, float] = {}
    for t in tasks:
        v = t.test_spec
        tests = f"{len(v.fail_to_pass)}/{len(v.pass_to_pass)}"
        if not args.quality:
            table.add_row(t.env_id, t.split, ", ".join(t.tags), tests, str(t.max_steps))
            continue
        from repogym.cli.printing import adversarial_summary
        from repogym.grading.grader import seal_coverage
        from repogym.quality import adversarial
        from repogym.quality.validate_mutation import cached_report

        report = cached_report(t)
        scores[t.id] = None if report is None else report.score
        coverage = seal_coverage(t)
        sealed = sum(1 for n in coverage.values() if n)
        sealed_shares[t.id] = sealed / max(len(coverage), 1)
        table.add_row(
            t.env_id,
            t.split,
            kind_column(t),
            tests,
            f"{sealed}/{len(coverage)}",
            value_column(t, measured.get(t.id)),
            str(len(t.decoys)),
            "-" if report is None else escape(report.summary()),
            escape(adversarial_summary(adversarial.cached_report(t))),
        )
    console = make_console()
    console.print(table)
    if args.quality:
        console.print(quality_line(scores), highlight=False)
        if sealed_shares:
            low = min(sealed_shares, key=sealed_shares.get)
            console.print(
                f"sealed share (listed tests with a sealed check): median "
                f"{statistics.median(sealed_shares.values()):.2f}, min "
                f"{sealed_shares[low]:.2f} ({low})",
                highlight=False,
            )
    if bad:
        print_error(
            errors,
            f"{bad} task folder(s) of --dir could not be loaded (above); the others are listed",
            label="error",
        )
    return 1 if bad else 0


def _register_dirs(dirs: list[str], console) -> int:
    """Register every task folder of ``dirs`` that loads; print why each other one does not
    (its file, key and fix) and return how many did not."""
    from repogym.envs import register_task
    from repogym.scenarios.task import TaskError, find_task_dirs

    bad = 0
    for d in dirs:
        try:
            folders = find_task_dirs(d)
        except TaskError as e:
            print_error(console, e)
            bad += 1
            continue
        for folder in folders:
            try:
                register_task(folder, overwrite=True)
            except TaskError as e:
                print_error(console, e, label=f"skipping {folder}")
                bad += 1
    return bad
