"""``repogym leaderboard``: build the static leaderboard from result folders."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard",
                       help="build leaderboard HTML + Markdown + PNG plots from result folders")
    p.add_argument("--results", nargs="+", required=True, type=Path, metavar="DIR",
                   help="folders written by `repogym run --out DIR`")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="output folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.cmd_run import make_console, summary_table
    from repogym.harness.leaderboard import build

    console = make_console()
    try:
        summaries = build(args.results, args.out)
    except (ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    console.print(summary_table(summaries, title="leaderboard"))
    console.print(f"page: {args.out / 'index.html'}  markdown: {args.out / 'leaderboard.md'}")
    return 0
