"""``repogym run``: benchmark an agent on a suite, in parallel, resumably.

Example::

    repogym run --agent oracle --suite builtin --workers 2 --out runs/oracle
    repogym run --agent openai --agent-arg base_url=http://127.0.0.1:8000/v1 \\
        --agent-arg model=Qwen/Qwen3-8B --samples 4 --ray local --out runs/qwen
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from repogym.cli.cmd_agents import agents_help
from repogym.cli.options import REWARD_MODES, SPLITS, add_sandbox

#: Exit status when nothing could run: bad options, tasks or agent settings.
EXIT_USAGE = 2


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options ``run`` and ``grade`` share: where tasks come from and how episodes run."""
    p.add_argument("--suite", default="builtin",
                   help="'builtin', a shipped suite fetched here ('realpy', see `repogym suite`), "
                        "or a folder of task folders")
    p.add_argument("--workers", type=int, default=1, help="episodes in parallel")
    p.add_argument("--ray", metavar="local|ADDRESS",
                   help="run on Ray actors: 'local' starts Ray here, else a cluster address")
    add_sandbox(p)
    p.add_argument("--env-server", metavar="URL",
                   help="run the envs on a `repogym serve` at URL (its sandboxes, its grader)")
    p.add_argument("--reward-mode", default="binary", choices=REWARD_MODES)
    p.add_argument("--name", help="label of the run in results and tables")
    p.add_argument("--out", required=True, type=Path, help="output folder (resumable)")
    p.add_argument("--retry-errors", action="store_true",
                   help="on resume, also re-run episodes recorded with an agent error "
                        "(infra errors are always re-run)")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run an agent over a suite; write results + trajectories",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="agents and their --agent-arg options (also: repogym agents):\n\n"
               + agents_help())
    p.add_argument("--agent", required=True,
                   help="oracle | noop | random | replay | predictions | hf | openai | "
                        "module:Class")
    p.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="agent option (repeatable; values parse as JSON if they can)")
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--tag", action="append", default=[], help="keep tasks with any of these tags")
    p.add_argument("--tasks", help="comma-separated task ids")
    p.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, help="override every task's step budget")
    p.add_argument("--act-timeout", type=float, default=300.0,
                   help="seconds per agent act() before the episode is an agent error")
    add_run_options(p)
    p.set_defaults(func=run)


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
    console.print(f"resuming {cfg.out}: {p.done} episode(s) already recorded, "
                  f"{len(p.todo)} to run")
    if p.kept_errors and not cfg.retry_errors:
        console.print(f"[yellow]note:[/] {p.kept_errors} recorded episode(s) are agent errors "
                      "and count as failures; --retry-errors runs them again")


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
        console.print(f"[red]error: the agent cannot run with these settings:[/] {e}\n"
                      "Nothing was recorded for the episodes it stopped; fix the settings and "
                      "run the same command again (add --retry-errors to also re-run recorded "
                      "agent errors).")
        return EXIT_USAGE
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        console.print(f"[red]error:[/] {e}")
        return EXIT_USAGE
    print_summaries(console, summarize_groups(group_by_agent(rows)), str(cfg.out), args.json)
    if not args.json:
        console.print(f"results: {cfg.out / RESULTS}  trajectories: {cfg.out / TRAJECTORIES}/")
    return 0


def run(args: argparse.Namespace) -> int:
    from repogym.harness.report import make_console

    console = make_console(stderr=args.json)
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        console.print(f"[red]error:[/] {e}")
        return EXIT_USAGE
    return execute(cfg, console, args)
