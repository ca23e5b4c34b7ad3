"""The terminal report of runs: one table (or JSON) shared by run, grade, demo, leaderboard.

Ids are never cut: columns wrap (``overflow="fold"``) in a narrow terminal, and a pipe or
file gets a wide console; ``--json`` prints the same numbers as JSON for scripts.
"""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from repogym.harness.metrics import jsonable


def make_console(stderr: bool = False) -> Console:
    """The terminal's console (on stderr when stdout carries JSON); 200 columns wide when
    output goes to a file or pipe."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=200)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def summary_table(summaries: dict[str, dict[str, Any]], title: str = "results") -> Table:
    """A table of :func:`repogym.harness.metrics.summarize_groups` output, one row per run.

    Columns: episodes, resolve rate and its 95 % Wilson interval over tasks, mean reward,
    pass@k (the same k for every row), mean steps, episode wall time (mean and total), tokens
    (total), episodes with hack flags, agent errors (failures), endpoint and infra errors
    (not scored).
    """
    ks = sorted({k for s in summaries.values() for k in s["pass_at_k"]})
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("agent", overflow="fold", min_width=8)
    for col in (
        "episodes",
        "resolved",
        "95% CI",
        "reward",
        *(f"pass@{k}" for k in ks),
        "steps",
        "wall s mean",
        "wall s total",
        "tokens",
        "hacks",
        "agent err",
        "endpoint err",
        "infra err",
    ):
        table.add_column(col, justify="right", overflow="fold")
    for agent, s in summaries.items():
        ci = s.get("resolve_ci")
        table.add_row(
            escape(agent),
            str(s["episodes"]),
            _pct(s["resolve_rate"]),
            f"{_pct(ci[0])}-{_pct(ci[1])}" if ci else "-",
            _num(s["mean_reward"], ".3f"),
            *(_pct(s["pass_at_k"].get(k)) for k in ks),
            _num(s["mean_steps"], ".1f"),
            _num(s["mean_wall_s"], ".1f"),
            _num(s["wall_s"], ".1f"),
            str(s["tokens"]),
            str(s["hack_flagged"]),
            str(s["agent_errors"]),
            str(s.get("endpoint_errors", 0)),
            str(s["infra_errors"]),
        )
    return table


def print_summaries(
    console: Console, summaries: dict[str, dict[str, Any]], title: str, as_json: bool = False
) -> None:
    """Print the table, or the JSON when ``as_json``."""
    if as_json:
        print(json.dumps(jsonable(summaries), indent=2))
    else:
        console.print(summary_table(summaries, title=title))
