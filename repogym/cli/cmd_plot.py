"""``repogym plot DIR``: draw the training curves of ``DIR/metrics.jsonl`` to a PNG."""

from __future__ import annotations

import argparse


def _run(args: argparse.Namespace) -> int:
    from repogym.agents.metrics import DEFAULT_PLOT_KEYS, plot_metrics

    keys = tuple(args.keys) if args.keys else DEFAULT_PLOT_KEYS
    print(plot_metrics(args.dir, args.output, keys))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``repogym plot``."""
    p = subparsers.add_parser("plot", help="draw a training run's metrics to a PNG")
    p.add_argument("dir", help="run folder with metrics.jsonl (the --out of repogym train)")
    p.add_argument("-o", "--output", default=None, help="PNG path (default DIR/curves.png)")
    p.add_argument("--keys", nargs="*", help="metrics to draw (default: the usual ones)")
    p.set_defaults(func=_run)
