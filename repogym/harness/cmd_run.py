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

from rich import box
from rich.console import Console
from rich.table import Table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an agent over a suite; write results + trajectories")
    p.add_argument("--agent", required=True,
                   help="oracle | noop | random | replay | hf | openai | module:Class")
    p.add_argument("--agent-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="agent keyword argument (repeatable; values parse as JSON if they can)")
    p.add_argument("--name", help="agent label in results and tables (default: --agent)")
    p.add_argument("--suite", default="builtin", help="'builtin' or a folder of task folders")
    p.add_argument("--split", choices=["train", "test"])
    p.add_argument("--tasks", help="comma-separated task ids")
    p.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k)")
    p.add_argument("--workers", type=int, default=1, help="episodes in parallel")
    p.add_argument("--ray", metavar="local|ADDRESS",
                   help="run on Ray actors: 'local' starts Ray here, else a cluster address")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sandbox", default="bwrap", help="bwrap (default) | docker | process")
    p.add_argument("--reward-mode", default="binary", choices=["binary", "partial", "f2p"])
    p.add_argument("--max-steps", type=int, help="override every task's step budget")
    p.add_argument("--act-timeout", type=float, default=300.0,
                   help="seconds per agent act() before the episode is an agent error")
    p.add_argument("--env-server", metavar="URL",
                   help="run the envs on a `repogym serve` at URL (its sandboxes, its grader)")
    p.add_argument("--out", required=True, type=Path, help="output folder (resumable)")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> Any:
    """A RunConfig from parsed arguments."""
    from repogym.harness.agents import parse_agent_args
    from repogym.harness.runner import RunConfig

    task_ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    return RunConfig(agent=args.agent, out=args.out, agent_args=parse_agent_args(args.agent_arg),
                     label=args.name, suite=args.suite, split=args.split, task_ids=task_ids,
                     samples=args.samples, workers=args.workers, ray=args.ray, seed=args.seed,
                     sandbox=args.sandbox, reward_mode=args.reward_mode,
                     max_steps=args.max_steps, act_timeout_s=args.act_timeout,
                     env_server=args.env_server)


def make_console() -> Console:
    """The terminal's console; 160 columns wide when output goes to a file or pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def summary_table(summaries: dict[str, dict[str, Any]], title: str = "results") -> Table:
    """A rich table of ``runner.summarize_by_agent`` output (one row per agent).

    Columns: episodes, resolve rate, mean reward, pass@k, mean steps, total episode wall
    time, tokens, episodes with hack flags, infra errors, agent errors.
    """
    ks = sorted({k for s in summaries.values() for k in s["pass_at_k"]})
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("agent", no_wrap=True)
    for col in ("episodes", "resolved", "reward", *(f"pass@{k}" for k in ks), "steps",
                "wall s", "tokens", "hacks", "infra err", "agent err"):
        table.add_column(col, justify="right")
    for agent, s in summaries.items():
        table.add_row(agent, str(s["episodes"]), _pct(s["resolve_rate"]), _num(s["mean_reward"],
                      ".3f"), *(_pct(s["pass_at_k"].get(k)) for k in ks),
                      _num(s["mean_steps"], ".1f"), _num(s["wall_s"], ".1f"), str(s["tokens"]),
                      str(s["hack_flagged"]), str(s["infra_errors"]), str(s["agent_errors"]))
    return table


def run_with_progress(cfg: Any, console: Console, show: bool = True) -> list[dict[str, Any]]:
    """Run ``cfg`` with a live progress bar; returns every row in ``cfg.out``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from repogym.harness import runner
    from repogym.harness.agents import resolve_agent_class

    resolve_agent_class(cfg.agent)  # fail fast on an unknown agent, before any worker starts
    _tasks, todo, done = runner.plan(cfg)
    if done:
        console.print(f"resuming {cfg.out}: {done} episode(s) already recorded, "
                      f"{len(todo)} to run")
    counts = {"resolved": 0, "errors": 0}
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=console, disable=not show) as progress:
        bar = progress.add_task(cfg.label, total=len(todo), **counts)

        def on_row(row: dict[str, Any]) -> None:
            counts["resolved"] += bool(row.get("resolved"))
            counts["errors"] += bool(row.get("agent_error") or row.get("infra_error"))
            progress.update(bar, advance=1, **counts)

        return runner.run(cfg, on_row=on_row)


def run(args: argparse.Namespace) -> int:
    from repogym.harness import runner

    console = make_console()
    try:
        cfg = config_from_args(args)
        rows = run_with_progress(cfg, console, show=not args.no_progress)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    console.print(summary_table(runner.summarize_by_agent(rows), title=str(cfg.out)))
    console.print(f"results: {cfg.out / runner.RESULTS}  trajectories: "
                  f"{cfg.out / runner.TRAJECTORIES}/")
    return 0
