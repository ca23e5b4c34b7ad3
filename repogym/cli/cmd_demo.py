"""``repogym demo``: the reference agents over the built-in suite, then the leaderboard.

Runs oracle, noop, random, a replayed scripted agent (``repogym/harness/data/
demo_replay.jsonl``) and the forger (the suite's hack resistance) with the default bwrap
sandbox, writes ``OUT/results/<agent>/`` result folders and the leaderboard into ``OUT/``
(index.html, leaderboard.md, PNGs), and prints the table. Re-running resumes.
``repogym demo --out leaderboard`` regenerates the committed one.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from repogym.cli.options import SPLITS
from repogym.cli.printing import print_line

DATA = Path(__file__).parent / "data"
REPLAY_FILE = DATA / "demo_replay.jsonl"


def reference_agents() -> list[tuple[str, str, dict]]:
    """(label, agent, agent_args) of the reference agents."""
    return [
        ("oracle", "oracle", {}),
        ("noop", "noop", {}),
        ("random", "random", {"seed": 0}),
        ("replay", "replay", {"file": str(REPLAY_FILE)}),
        ("forger", "forger", {}),
    ]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the reference agents on the built-ins + leaderboard")
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    p.add_argument("--workers", type=int, default=2, help="episodes in parallel")
    p.add_argument("--split", choices=SPLITS, help="only this split")
    p.add_argument("--fresh", action="store_true", help="delete OUT first (no resume)")
    p.add_argument("--no-progress", action="store_true", help="no live progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.cli.running import run_with_progress
    from repogym.harness.config import RunConfig
    from repogym.harness.leaderboard import build
    from repogym.harness.report import make_console, summary_table

    console = make_console()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    dirs = []
    for label, agent, agent_args in reference_agents():
        cfg = RunConfig(
            agent=agent,
            agent_args=agent_args,
            label=label,
            out=args.out / "results" / label,
            split=args.split,
            workers=args.workers,
        )
        run_with_progress(cfg, console, show=not args.no_progress)
        dirs.append(cfg.out)
    board = build(dirs, args.out)
    console.print(
        summary_table(board.summaries, title="repogym demo: reference agents, built-in suite")
    )
    print_line(console, f"leaderboard: {args.out / 'index.html'}")
    return 0
