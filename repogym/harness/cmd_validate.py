"""``repogym validate [TASK_DIR ...]``: check that task verifiers are trustworthy.

With no argument every built-in task is validated. Each argument is a task folder or a
folder of task folders. Exit status 1 when any task fails (each failure is printed naming
the task, the patch and the test), 2 when a task folder cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from repogym.harness.validate import TaskReport, validate_tasks
from repogym.scenarios.task import Task, TaskError, load_tasks


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="check tasks: gold/alternatives pass, noop/decoys fail, no flaky tests",
        description="Grade each task's noop, gold (several times), alternatives and decoys "
                    "with the real grader and sandbox; exit 1 on any failure.")
    p.add_argument("tasks", nargs="*", metavar="TASK_DIR",
                   help="task folders or folders of them (default: all built-ins)")
    p.add_argument("--reruns", type=int, default=3,
                   help="gold runs per task; outcomes must agree (default 3)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="grading runs in parallel (default: CPU count)")
    p.add_argument("--sandbox", default="bwrap", help="sandbox backend (default bwrap)")
    p.add_argument("--json", metavar="FILE", help="also write the reports as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print only failures")
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


def print_report(report: TaskReport, console) -> None:
    """A table of one task's checks with their reward, status and timing."""
    from rich.table import Table

    mark = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    table = Table(title=f"{report.task_id}: {mark} ({report.duration_s:.1f}s of grading)",
                  title_justify="left")
    for col in ("check", "patch", "reward", "flags", "time (s)", "result"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        result = "[green]ok[/green]" if c.ok else f"[red]{len(c.problems)} problem(s)[/red]"
        table.add_row(c.kind, c.patch, f"{c.reward:g}", ",".join(c.hack_flags),
                      f"{c.duration_s:.2f}", result)
    console.print(table)
    for p in report.failures:
        console.print(f"[red]{p}[/red]", soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    if args.reruns < 1:
        console.print("--reruns must be >= 1 (the number of gold runs)")
        return 2
    tasks, errors = _load(args.tasks)
    for e in errors:
        console.print(f"[red]cannot load: {e}[/red]")
    if not tasks and not errors:
        console.print("no tasks to validate")
        return 2

    def show(report: TaskReport) -> None:
        if not args.quiet or not report.ok:
            print_report(report, console)

    reports = validate_tasks(tasks, sandbox=args.sandbox, reruns=args.reruns,
                             workers=args.workers, on_report=show)
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in reports], indent=1))
    failed = [r for r in reports if not r.ok]
    console.print(f"{len(reports) - len(failed)}/{len(reports)} tasks valid")
    for r in failed:
        for p in r.failures:
            print(f"FAIL {p}", file=sys.stderr)
    if errors:
        for e in errors:
            print(f"FAIL cannot load: {e}", file=sys.stderr)
    if errors:
        return 2
    return 1 if failed else 0
