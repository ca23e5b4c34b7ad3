"""``repogym leaderboard``: build the static leaderboard from run folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from repogym.cli.printing import print_error, print_line, print_note


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard", help="build leaderboard HTML + Markdown + PNG plots from run folders"
    )
    p.add_argument(
        "--results",
        nargs="+",
        required=True,
        type=Path,
        metavar="DIR",
        help="folders written by `repogym run --out DIR`, or folders of them",
    )
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
        print_error(console, e)
        return 2
    for note in board.notes:
        print_note(console, note)
    print_summaries(console, board.summaries, "leaderboard", args.json)
    if not args.json:
        print_line(
            console, f"page: {args.out / 'index.html'}  markdown: {args.out / 'leaderboard.md'}"
        )
    return 0
