"""``repogym validate [TASK_DIR ...]``: check that tasks' hidden tests can be trusted.

With no argument every built-in task is validated. Each argument is a task folder or a
folder of task folders. ``--mutation`` adds the mutation check
(:mod:`repogym.quality.validate_mutation`): its score is printed with the surviving mutants
as diffs, and stored; without ``--mutation`` the summary shows the stored score of each
task version. ``--adversarial`` grades a library of task-independent hacks
(:mod:`repogym.quality.adversarial`) next to the unpatched repository: an attack that earns
more than doing nothing fails the task. Exit status 1 when any task fails (each failure is
printed naming the task, the patch and the test), 2 when a task folder cannot be loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.cli.options import SPLITS, add_mutation_options, add_sandbox, bad_mutation_args
from repogym.cli.printing import adversarial_summary, print_report, run_adversarial, run_mutation
from repogym.quality.validate import TaskReport, validate_tasks
from repogym.scenarios.task import Task, TaskError, load_tasks

if TYPE_CHECKING:  # imported when used: libcst is not needed to start the CLI
    from repogym.quality.adversarial import AdversarialReport
    from repogym.quality.validate_mutation import MutationReport


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check tasks: gold/alternatives pass, noop/decoys fail, no flaky tests",
        description="Grade each task's noop, gold (several times), alternatives and decoys "
        "with the real grader and sandbox; exit 1 on any failure.",
    )
    p.add_argument(
        "tasks",
        nargs="*",
        metavar="TASK_DIR",
        help="task folders or folders of them (default: all built-ins)",
    )
    p.add_argument("--suite", help="validate a shipped suite's tasks fetched here (e.g. realpy)")
    p.add_argument("--split", choices=SPLITS, help="with --suite: only this split")
    p.add_argument(
        "--reruns", type=int, default=3, help="gold runs per task; outcomes must agree (default 3)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="grading runs in parallel (default: CPU count)",
    )
    add_sandbox(p)
    p.add_argument("--json", metavar="FILE", help="also write the reports as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print only failures")
    p.add_argument(
        "--adversarial",
        action="store_true",
        help="also grade task-independent hacks (shadowed modules, plugins, "
        "config, forged results, exits, test deletion, conftest): none may "
        "earn more than the unpatched repository",
    )
    add_mutation_options(p, gate=False)
    p.set_defaults(func=run)


def _load(paths: list[str]) -> tuple[list[Task], list[str]]:
    if not paths:
        from repogym.scenarios.registry import builtin_tasks

        return builtin_tasks(), []
    tasks, errors = [], []
    for path in paths:
        try:
            tasks += load_tasks(Path(path))
        except TaskError as e:
            errors.append(str(e))
    return tasks, errors


def _summary(
    tasks: list[Task],
    reports: list[TaskReport],
    mutations: dict[str, MutationReport],
    attacks: dict[str, AdversarialReport],
    console,
) -> None:
    from rich.markup import escape
    from rich.table import Table

    from repogym.quality import adversarial
    from repogym.quality.validate_mutation import cached_report

    table = Table(title="summary", title_justify="left")
    for col in ("task", "checks", "mutation score", "adversarial"):
        table.add_column(col, overflow="fold")
    for task, r in zip(tasks, reports, strict=True):
        m = mutations.get(task.id) or cached_report(task)
        score = "-" if m is None else escape(m.summary())
        if m is not None and not m.ok:
            score = f"[red]{score}[/red]"
        a = attacks.get(task.id) or adversarial.cached_report(task)
        hacks = escape(adversarial_summary(a))
        if a is not None and not a.ok:
            hacks = f"[red]{hacks}[/red]"
        checks = "[green]ok[/green]" if r.ok else f"[red]{len(r.failures)} problem(s)[/red]"
        table.add_row(task.id, checks, score, hacks)
    console.print(table)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    if args.reruns < 1:
        console.print("--reruns must be >= 1 (the number of gold runs)")
        return 2
    if bad_mutation_args(args):
        return 2
    tasks, errors = _gather(args)
    for e in errors:
        console.print(f"[red]cannot load: {escape(e)}[/red]", soft_wrap=True)
    if not tasks and not errors:
        console.print("no tasks to validate")
        return 2

    def show(report: TaskReport) -> None:
        if not args.quiet or not report.ok:
            print_report(report, console)

    reports = validate_tasks(
        tasks, sandbox=args.sandbox, reruns=args.reruns, workers=args.workers, on_report=show
    )
    mutations = run_mutation(tasks, args, console, quiet=args.quiet) if args.mutation else {}
    attacks = run_adversarial(tasks, args, console, quiet=args.quiet) if args.adversarial else {}
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        **r.to_dict(),
                        "mutation": mutations[t.id].to_dict() if t.id in mutations else None,
                        "adversarial": dataclasses.asdict(attacks[t.id])
                        if t.id in attacks
                        else None,
                    }
                    for t, r in zip(tasks, reports, strict=True)
                ],
                indent=1,
            )
        )
    if tasks:
        _summary(tasks, reports, mutations, attacks, console)
    failures = _failures(tasks, reports, mutations, attacks)
    failed = [t for t, f in failures.items() if f]
    console.print(f"{len(reports) - len(failed)}/{len(reports)} tasks valid")
    for t in failed:
        for p in failures[t]:
            print(f"FAIL {p}", file=sys.stderr)
    for e in errors:
        print(f"FAIL cannot load: {e}", file=sys.stderr)
    if errors:
        return 2
    return 1 if failed else 0


def _gather(args: argparse.Namespace) -> tuple[list[Task], list[str]]:
    """The tasks the arguments name (folders, ids, a suite) and why any could not load."""
    tasks, errors = _load(args.tasks) if not args.suite or args.tasks else ([], [])
    if args.suite:
        from repogym.scenarios.suites import SuiteError, validated_tasks

        try:
            tasks += validated_tasks(args.suite, split=args.split)
        except SuiteError as e:
            errors.append(str(e))
    return tasks, errors


def _failures(
    tasks: list[Task], reports: list[TaskReport], mutations: dict, attacks: dict
) -> dict[str, list[str]]:
    """Task id -> every problem found: the checks', the mutation run's, the attacks' holes."""
    return {
        t.id: r.failures
        + (mutations[t.id].problems if t.id in mutations else [])
        + [
            f"{t.id}: attack {h.attack} ({h.kind}) "
            + (h.error or f"earns {h.reward:g} > noop {h.noop_reward:g}")
            for h in (attacks[t.id].holes if t.id in attacks else [])
        ]
        for t, r in zip(tasks, reports, strict=True)
    }
