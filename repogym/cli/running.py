"""Running a benchmark with a live progress bar and printing its report: ``run``, ``grade``
and ``demo``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from repogym.cli.options import EXIT_USAGE
from repogym.cli.reports import print_error, print_line, print_note


def config_from_args(args: argparse.Namespace) -> Any:
    """A RunConfig from parsed arguments."""
    from repogym.harness.baselines import parse_agent_args
    from repogym.harness.config import RunConfig

    task_ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    return RunConfig(agent=args.agent, out=args.out, agent_args=parse_agent_args(args.agent_arg),
                     label=args.name, suite=args.suite, split=args.split,
                     tags=args.tag or None, task_ids=task_ids, samples=args.samples,
                     workers=args.workers, ray=args.ray, seed=args.seed, sandbox=args.sandbox,
                     reward_mode=args.reward_mode, max_steps=args.max_steps,
                     act_timeout_s=args.act_timeout, retry_errors=args.retry_errors,
                     env_server=args.env_server)


def _resume_note(console: Console, cfg: Any, p: Any) -> None:
    if not p.done:
        return
    print_line(console, f"resuming {cfg.out}: {p.done} episode(s) already recorded, "
                        f"{len(p.todo)} to run")
    if p.kept_errors and not cfg.retry_errors:
        print_note(console, f"{p.kept_errors} recorded episode(s) are agent errors and count "
                            "as failures; --retry-errors runs them again")


def run_with_progress(cfg: Any, console: Console, show: bool = True) -> list[dict[str, Any]]:
    """Check the agent, then run ``cfg`` with a live progress bar; returns every row.

    Raises:
        AgentConfigError: the agent cannot work with these settings (nothing was run).
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from repogym.harness import runner

    p = runner.plan(cfg)
    _resume_note(console, cfg, p)
    agent = runner.prepare_agent(cfg) if p.todo else None
    counts = {"resolved": 0, "errors": 0}
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=console, disable=not show) as progress:
        bar = progress.add_task(cfg.label, total=len(p.todo), **counts)

        def on_row(row: dict[str, Any]) -> None:
            counts["resolved"] += bool(row.get("resolved"))
            counts["errors"] += bool(row.get("agent_error") or row.get("infra_error"))
            progress.update(bar, advance=1, **counts)

        return runner.run(cfg, on_row=on_row, agent=agent)


def execute(cfg: Any, console: Console, args: argparse.Namespace) -> int:
    """Run ``cfg`` and print the report; the exit code for ``run`` and ``grade``."""
    from repogym.harness.baselines import AgentConfigError
    from repogym.harness.metrics import group_by_agent, summarize_groups
    from repogym.harness.report import print_summaries
    from repogym.harness.results import RESULTS, TRAJECTORIES

    try:
        rows = run_with_progress(cfg, console, show=not args.no_progress)
    except AgentConfigError as e:
        print_error(console, f"{e}\nNothing was recorded for the episodes it stopped; fix the "
                    "settings and run the same command again (add --retry-errors to also re-run "
                    "recorded agent errors).",
                    label="error: the agent cannot run with these settings")  # fmt: skip
        return EXIT_USAGE
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print_error(console, e)
        return EXIT_USAGE
    print_summaries(console, summarize_groups(group_by_agent(rows)), str(cfg.out), args.json)
    if not args.json:
        print_line(console, f"results: {cfg.out / RESULTS}  trajectories: {cfg.out / TRAJECTORIES}/")
    return 0
