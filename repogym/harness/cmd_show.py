"""``repogym show FILE``: render a trajectory JSONL file written by TrajectoryLogger."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="render a trajectory file (.jsonl)")
    p.add_argument("file", help="a trajectory file written by TrajectoryLogger / log_dir=")
    p.add_argument("--max-chars", type=int, default=4000, help="clip each observation")
    p.add_argument("--format", choices=["rich", "atif"], default="rich",
                   help="rich (default): a terminal view; atif: Harbor's ATIF JSON on stdout")
    p.set_defaults(func=run)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"\n... [{len(text) - n} more characters]"


def run(args: argparse.Namespace) -> int:
    from repogym.envs.wrappers import read_trajectory

    traj = read_trajectory(args.file)
    if args.format == "atif":
        import json

        from repogym.integrations.atif import to_atif

        print(json.dumps(to_atif(traj), indent=1))
        return 0
    con = Console()
    h = traj["header"]
    con.print(Panel(f"task [bold]{h['task']}[/] ({h.get('env_id')})  sandbox {h.get('sandbox')}  "
                    f"seed {h.get('seed')}  reward_mode {h.get('reward_mode')}  "
                    f"started {h.get('started_at')}", title=h["schema"]))
    con.print(Panel(_clip(h.get("observation", ""), args.max_chars), title="observation 0"))
    for s in traj["steps"]:
        con.print(Panel(s["action"], title=f"action {s['t']} ({s.get('tool')})",
                        border_style="cyan"))
        con.print(Panel(_clip(s["observation"], args.max_chars),
                        title=f"observation {s['t']}  exit {s.get('exit_code')}  "
                              f"{s.get('duration_s', 0):.3f}s", border_style="dim"))
    summary = traj["summary"]
    if summary is None:
        con.print("[yellow]no summary: the episode did not finish[/]")
        return 0
    table = Table(title=f"reward {summary.get('reward')}  resolved {summary.get('resolved')}  "
                        f"steps {summary.get('steps')}  hack flags {summary.get('hack_flags')}")
    table.add_column("test")
    table.add_column("outcome")
    for test, outcome in (summary.get("tests") or {}).items():
        color = "green" if outcome == "passed" else "red"
        table.add_row(test, f"[{color}]{outcome}[/]")
    con.print(table)
    if summary.get("diff"):
        con.print(Syntax(summary["diff"], "diff", word_wrap=True))
    if summary.get("infra_error"):
        con.print(f"[red]infra_error: {summary['infra_error']}[/]")
    return 0
