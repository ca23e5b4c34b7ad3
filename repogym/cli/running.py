"""Running a benchmark with progress and printing its report: ``run``, ``grade`` and ``demo``.

On a terminal the progress is a live bar; when output goes to a file or pipe (nohup, CI) it
is one plain, flushed line per finished episode (and one a minute while none finishes). The
end of a run says how many episodes were agent errors (and the command that runs them again)
and how many were not scored; an outage of the model's endpoint stops the run with
:data:`EXIT_OUTAGE` and the command that resumes it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import time
from typing import Any, Self

from rich.console import Console
from rich.markup import escape

from repogym.cli.options import EXIT_OUTAGE, EXIT_USAGE
from repogym.cli.printing import print_error, print_line, print_note


def config_from_args(args: argparse.Namespace) -> Any:
    """A RunConfig from parsed arguments."""
    from repogym.harness.baselines import parse_agent_args
    from repogym.harness.config import RunConfig

    task_ids = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    return RunConfig(
        agent=args.agent,
        out=args.out,
        agent_args=parse_agent_args(args.agent_arg),
        label=args.name,
        suite=args.suite,
        split=args.split,
        tags=args.tag or None,
        task_ids=task_ids,
        samples=args.samples,
        workers=args.workers,
        ray=args.ray,
        seed=args.seed,
        sandbox=args.sandbox,
        reward_mode=args.reward_mode,
        max_steps=args.max_steps,
        act_timeout_s=args.act_timeout,
        retry_errors=args.retry_errors,
        env_server=args.env_server,
        max_endpoint_errors=getattr(args, "max_endpoint_errors", 3),
    )


def rerun_command(*extra: str) -> str:
    """This command line as ``repogym ...``, with ``extra`` options added if missing."""
    argv = list(sys.argv[1:])
    argv += [x for x in extra if x not in argv]
    return shlex.join(["repogym", *argv])


def _resume_note(console: Console, cfg: Any, p: Any) -> None:
    for note in p.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if not p.done:
        return
    print_line(
        console, f"resuming {cfg.out}: {p.done} episode(s) already recorded, {len(p.todo)} to run"
    )
    if p.kept_errors and not cfg.retry_errors:
        print_note(
            console,
            f"{p.kept_errors} recorded episode(s) are agent errors and count "
            "as failures; --retry-errors runs them again",
        )


#: How the plain progress lines name an episode's status.
_STATUS_WORDS = {"agent_error": "agent error", "endpoint": "endpoint error", "infra": "infra error"}


class PlainProgress:
    """One flushed line per finished episode, for logs (output to a file or pipe), and a
    line every :attr:`heartbeat_s` seconds while no episode finishes."""

    heartbeat_s = 60.0

    def __init__(self, console: Console, label: str, total: int) -> None:
        self.console, self.label, self.total = console, label, total
        self.done, self.start = 0, time.monotonic()
        self.last = self.start
        self.counts = {"resolved": 0, "agent errors": 0, "not scored": 0}
        self._stop = threading.Event()

    def __enter__(self) -> Self:
        threading.Thread(target=self._beat, daemon=True, name="repogym-progress").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def begin(self, out: Any, workers: int) -> None:
        """Say what the run will do."""
        self._say(
            f"{self.label}: {self.total} episode(s) to run, {workers} worker(s), results in {out}"
        )

    def row(self, row: dict[str, Any]) -> None:
        """Report one finished episode."""
        from repogym.harness.results import episode_status, unscored

        self.done += 1
        self.last = time.monotonic()
        self.counts["resolved"] += bool(row.get("resolved")) and not unscored(row)
        self.counts["agent errors"] += bool(row.get("agent_error"))
        self.counts["not scored"] += unscored(row)
        status = _STATUS_WORDS.get(episode_status(row), episode_status(row))
        self._say(
            f"[{self.done}/{self.total}] {row.get('task')} #{row.get('sample')}: "
            f"{status} ({row.get('steps')} steps, {row.get('wall_s')} s) | "
            f"{self._totals()} | {self.last - self.start:.0f} s elapsed"
        )

    def _totals(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.counts.items())

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            now = time.monotonic()
            if now - self.last >= self.heartbeat_s:
                self._say(
                    f"[{self.done}/{self.total}] running: no episode finished in the "
                    f"last {now - self.last:.0f} s | {self._totals()} | "
                    f"{now - self.start:.0f} s elapsed"
                )

    def _say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()


def run_with_progress(cfg: Any, console: Console, show: bool = True) -> list[dict[str, Any]]:
    """Check the agent, then run ``cfg`` with progress (a live bar on a terminal, plain lines
    otherwise; none unless ``show``); returns every row.

    Raises:
        AgentConfigError: the agent cannot work with these settings (nothing was run).
        EndpointOutage: the model's endpoint failed episodes in a row (the run stopped).
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
    from repogym.harness.results import unscored

    p = runner.plan(cfg)
    _resume_note(console, cfg, p)
    agent = runner.prepare_agent(cfg) if p.todo else None
    if show and not console.is_terminal:
        with PlainProgress(console, cfg.label, len(p.todo)) as plain:
            if p.todo:
                plain.begin(cfg.out, cfg.workers)
            return runner.run(cfg, on_row=plain.row, agent=agent)
    counts = {"resolved": 0, "errors": 0}
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console, disable=not show) as progress:
        bar = progress.add_task(escape(cfg.label), total=len(p.todo), **counts)

        def on_row(row: dict[str, Any]) -> None:
            counts["resolved"] += bool(row.get("resolved"))
            counts["errors"] += bool(row.get("agent_error") or unscored(row))
            progress.update(bar, advance=1, **counts)

        return runner.run(cfg, on_row=on_row, agent=agent)


def print_error_counts(console: Console, summaries: dict[str, dict[str, Any]]) -> None:
    """How many episodes were agent errors (and how to run them again) and how many were not
    scored (infra or endpoint errors, which a plain resume runs again)."""
    agent_errors = sum(s["agent_errors"] for s in summaries.values())
    unscored = {
        k: sum(s.get(k) or 0 for s in summaries.values())
        for k in ("endpoint_errors", "infra_errors")
    }
    line = f"agent errors: {agent_errors}"
    if agent_errors:
        line += f" (counted as failures; to run them again: {rerun_command('--retry-errors')})"
    console.print(escape(line), soft_wrap=True, highlight=False)
    if any(unscored.values()):
        console.print(
            escape(
                f"not scored: {unscored['endpoint_errors']} endpoint error(s), "
                f"{unscored['infra_errors']} infra error(s); to run them again: "
                f"{rerun_command()}"
            ),
            soft_wrap=True,
            highlight=False,
        )


def execute(cfg: Any, console: Console, args: argparse.Namespace) -> int:
    """Run ``cfg`` and print the report; the exit code for ``run`` and ``grade``."""
    from repogym.harness.baselines import AgentConfigError
    from repogym.harness.metrics import group_by_agent, summarize_groups
    from repogym.harness.report import print_summaries
    from repogym.harness.results import RESULTS, TRAJECTORIES, read_results
    from repogym.harness.runner import EndpointOutage

    try:
        rows = run_with_progress(cfg, console, show=not args.no_progress)
    except EndpointOutage as e:
        print_error_counts(console, summarize_groups(group_by_agent(read_results(cfg.out))))
        console.print(
            f"[red]stopped: the model endpoint looks down:[/] {escape(str(e))}\n"
            f"The {e.failures} episodes it failed are recorded as endpoint errors "
            "(not scored), the episodes in flight were not recorded, and what "
            f"finished before is kept in {escape(str(cfg.out / RESULTS))}. When the "
            "endpoint is back, resume with:",
            soft_wrap=True,
        )
        console.print(escape(rerun_command()), soft_wrap=True, highlight=False)
        return EXIT_OUTAGE
    except AgentConfigError as e:
        print_error(
            console,
            f"{e}\nNothing was recorded for the episodes it stopped; fix the "
            "settings and run the same command again (add --retry-errors to also re-run "
            "recorded agent errors).",
            label="error: the agent cannot run with these settings",
        )
        return EXIT_USAGE
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print_error(console, e)
        return EXIT_USAGE
    summaries = summarize_groups(group_by_agent(rows))
    print_summaries(console, summaries, str(cfg.out), args.json)
    print_error_counts(console, summaries)
    if not args.json:
        print_line(
            console, f"results: {cfg.out / RESULTS}  trajectories: {cfg.out / TRAJECTORIES}/"
        )
    return 0
