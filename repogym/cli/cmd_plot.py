"""``repogym plot DIR``: draw the training curves of ``DIR/metrics.jsonl`` to a PNG."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repogym.cli.options import EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    from repogym.agents.metrics import DEFAULT_PLOT_KEYS, plot_metrics

    keys = tuple(args.keys) if args.keys else DEFAULT_PLOT_KEYS
    problem = _not_a_training_run(Path(args.dir))
    if problem is None:
        try:
            print(plot_metrics(args.dir, args.output, keys))
            return 0
        except (FileNotFoundError, ValueError) as e:
            problem = str(e)
    print(f"error: {problem}", file=sys.stderr)
    return EXIT_USAGE


def _not_a_training_run(folder: Path) -> str | None:
    """Why ``folder`` is not what ``plot`` draws (a benchmark run's folder), or None."""
    from repogym.harness.results import RESULTS

    if (
        folder.is_dir()
        and not (folder / "metrics.jsonl").is_file()
        and (folder / RESULTS).is_file()
    ):
        return (
            f"{folder} is a benchmark run (it holds {RESULTS} of `repogym run`), not a "
            "training run: `repogym plot` draws the metrics.jsonl of `repogym train --out`. "
            f"Fix: for a benchmark run, `repogym leaderboard --results {folder}` draws its "
            "plots"
        )
    return None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``repogym plot``."""
    p = subparsers.add_parser("plot", help="draw a training run's metrics to a PNG")
    p.add_argument("dir", help="run folder with metrics.jsonl (the --out of repogym train)")
    p.add_argument("-o", "--output", default=None, help="PNG path (default DIR/curves.png)")
    p.add_argument("--keys", nargs="*", help="metrics to draw (default: the usual ones)")
    p.set_defaults(func=_run)
