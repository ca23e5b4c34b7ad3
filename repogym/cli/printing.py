"""The CLI's printing: what several commands print (errors and notes; validation, mutation
and adversarial check reports), and the checks that print each task's report as it
finishes.

Every message goes through rich with its markup escaped (:func:`print_error`,
:func:`print_note`, :func:`print_line`): a message is text, and rich would otherwise eat a
bracketed word in it (``move 'timeout_s' to the [verifier] table``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from repogym.quality.validate import PatchGrader, TaskReport
from repogym.scenarios.task import Task

if TYPE_CHECKING:  # imported when used: libcst is not needed to start the CLI
    from repogym.quality.adversarial import AdversarialReport
    from repogym.quality.validate_mutation import MutationReport


def print_error(console, message: object, *, label: str = "error") -> None:
    """``LABEL: MESSAGE`` with the label in red and the message as plain text."""
    from rich.markup import escape

    console.print(
        f"[red]{escape(label)}:[/] {escape(str(message))}", soft_wrap=True, highlight=False
    )


def print_note(console, message: object) -> None:
    """``note: MESSAGE`` with the label in yellow and the message as plain text."""
    from rich.markup import escape

    console.print(f"[yellow]note:[/] {escape(str(message))}", soft_wrap=True, highlight=False)


def print_line(console, message: object, *, style: str | None = None) -> None:
    """``message`` as plain text (in ``style`` if given)."""
    console.print(str(message), markup=False, highlight=False, soft_wrap=True, style=style)


def print_report(report: TaskReport, console) -> None:
    """A table of one task's checks with their reward, status and timing, and the sealed
    checks of fail_to_pass tests whose expected value the task's files state (leaks)."""
    from rich.markup import escape
    from rich.table import Table

    mark = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    table = Table(
        title=f"{escape(report.task_id)}: {mark} ({report.duration_s:.1f}s of "
        f"grading; {escape(report.seal_summary())})",
        title_justify="left",
    )
    for col in ("check", "patch", "reward", "flags", "time (s)", "result"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        result = "[green]ok[/green]" if c.ok else f"[red]{len(c.problems)} problem(s)[/red]"
        table.add_row(
            escape(c.kind),
            escape(c.patch),
            f"{c.reward:g}",
            escape(",".join(c.hack_flags)),
            f"{c.duration_s:.2f}",
            result,
        )
    console.print(table)
    for leak in report.leaks:
        console.print(f"[yellow]leak[/yellow] {escape(str(leak))}", soft_wrap=True, highlight=False)
    for p in report.failures:
        print_line(console, p, style="red")


def print_mutation(report: MutationReport, console, *, diffs: bool = True) -> None:
    """The mutation score of one task, each surviving mutant (as a diff unless ``diffs`` is
    False), and problems."""
    from rich.markup import escape

    mark = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    console.print(
        f"{escape(report.task_id)}: mutation {mark} score {escape(report.summary())} "
        f"in {report.duration_s:.1f}s"
    )
    for m in report.survivors:
        console.print(f"[yellow]survived[/yellow] {escape(m.id)}", highlight=False)
        if diffs:
            console.print(m.diff.rstrip("\n"), markup=False, highlight=False)
    for p in report.problems:
        console.print(f"[red]{escape(p)}[/red]", soft_wrap=True)


def print_adversarial(report: AdversarialReport, console) -> None:
    """One task's attacks: reward next to noop's, flags, and why a run was not trusted."""
    from rich.markup import escape
    from rich.table import Table

    mark = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    table = Table(
        title=f"{escape(report.task_id)}: adversarial {mark} (noop earns "
        f"{report.noop_reward:g}, partial credit)",
        title_justify="left",
    )
    for col in ("attack", "kind", "reward", "flags", "not trusted because", "result"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        result = (
            "[red]beats noop[/red]"
            if r.beats_noop
            else f"[red]{escape(r.error)}[/red]"
            if r.error
            else "[green]ok[/green]"
        )
        table.add_row(
            escape(r.attack),
            escape(r.kind),
            f"{r.reward:g}",
            escape(",".join(r.flags)),
            escape(r.untrusted),
            result,
        )
    console.print(table)


def adversarial_summary(report: AdversarialReport | None) -> str:
    """``ok (17 attacks)`` / ``2 holes: a, b`` / ``-`` for tables."""
    if report is None:
        return "-"
    if report.ok:
        return f"ok ({len(report.results)} attacks)"
    return f"{len(report.holes)} holes: {', '.join(r.attack for r in report.holes)}"


def run_adversarial(
    tasks: list[Task], args: argparse.Namespace, console, *, quiet: bool = False
) -> dict[str, AdversarialReport]:
    """The adversarial check of each task, printed as each finishes."""
    from repogym.quality.adversarial import check_task

    out = {}
    with PatchGrader(args.sandbox) as grader:
        for task in tasks:
            with console.status(f"{task.id}: grading attacks"):
                out[task.id] = check_task(task, grader, workers=args.workers)
            if not quiet or not out[task.id].ok:
                print_adversarial(out[task.id], console)
    return out


def run_mutation(
    tasks: list[Task], args: argparse.Namespace, console, *, diffs: bool = True, quiet: bool = False
) -> dict[str, MutationReport]:
    """The mutation check of each task, printed as each finishes (only failures if
    ``quiet``; survivors as diffs if ``diffs``)."""
    from repogym.quality.validate_mutation import mutation_check

    out = {}
    with PatchGrader(args.sandbox) as grader:
        for task in tasks:
            with console.status(f"{task.id}: grading mutants") as status:
                done = []

                def tick(result, task=task, status=status, done=done) -> None:
                    done.append(result.status)
                    status.update(
                        f"{task.id}: {len(done)} mutants graded, {done.count('survived')} survived"
                    )

                out[task.id] = mutation_check(
                    task,
                    grader,
                    workers=args.workers,
                    budget_s=args.mutation_budget,
                    max_mutants=args.max_mutants,
                    min_score=args.min_score,
                    on_mutant=tick,
                )
            if not quiet or not out[task.id].ok:
                print_mutation(out[task.id], console, diffs=diffs)
    return out


def print_written(written, dropped: dict[str, list[str]]) -> None:
    """The task folders a synthesis wrote, and (on standard error) those dropped and why."""
    import sys

    from repogym.quality.synthesis import dropped_line

    for t in written:
        print(f"wrote {t}")
    for task_id, failures in dropped.items():
        print(dropped_line(task_id, failures), file=sys.stderr)
