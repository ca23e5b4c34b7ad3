"""``repogym leaderboard``: build the static leaderboard from run folders."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard",
                       help="build leaderboard HTML + Markdown + PNG plots from run folders")
    p.add_argument("--results", nargs="+", required=True, type=Path, metavar="DIR",
                   help="folders written by `repogym run --out DIR`, or folders of them")
    p.add_argument("--out", type=Path, default=Path("leaderboard"), help="output folder")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.leaderboard import build
    from repogym.harness.report import make_console, print_summaries

    console = make_console(stderr=args.json)
    try:
        board = build(args.results, args.out)
    except (ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    for note in board.notes:
        console.print(f"[yellow]note:[/] {note}")
    print_summaries(console, board.summaries, "leaderboard", args.json)
    if not args.json:
        console.print(f"page: {args.out / 'index.html'}  markdown: {args.out / 'leaderboard.md'}")
    return 0
