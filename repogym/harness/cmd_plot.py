"""``repogym plot DIR``: draw the training curves of ``DIR/metrics.jsonl`` to a PNG."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

DEFAULT_KEYS = (
    "reward/mean",
    "resolve_rate",
    "loss/policy",
    "loss/value",
    "loss/kl",
    "entropy",
    "approx_kl",
    "clip/high_frac",
    "frac_zero_std_groups",
    "throughput/tokens_per_s",
)
"""Metrics drawn when present, one panel each."""


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a ``metrics.jsonl`` file (or of ``DIR/metrics.jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no metrics at {path}. Fix: pass the --out folder of `repogym train` "
            "(it holds metrics.jsonl)"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_metrics(
    run: str | Path, out: str | Path | None = None, keys: tuple[str, ...] = DEFAULT_KEYS
) -> Path:
    """Draw each metric of ``keys`` found in the run against the step; returns the PNG path.

    Args:
        run: The run folder (or its metrics.jsonl).
        out: PNG path (default ``RUN/curves.png``).
        keys: Metrics to draw, one panel each, when the run has them.

    Returns:
        The PNG's path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run)
    present = [k for k in keys if any(k in r for r in rows)]
    if not present:
        raise ValueError(f"{run} has none of the metrics {list(keys)}")
    cols = min(3, len(present))
    nrows = math.ceil(len(present) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.8 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, present, strict=False):
        pts = [(r["step"], r[key]) for r in rows if key in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".")
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present) :]:
        ax.set_visible(False)
    fig.tight_layout()
    base = Path(run) if Path(run).is_dir() else Path(run).parent
    path = Path(out) if out else base / "curves.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _run(args: argparse.Namespace) -> int:
    path = plot_metrics(args.dir, args.output, tuple(args.keys) if args.keys else DEFAULT_KEYS)
    print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``repogym plot``."""
    p = subparsers.add_parser("plot", help="draw a training run's metrics to a PNG")
    p.add_argument("dir", help="run folder with metrics.jsonl (the --out of repogym train)")
    p.add_argument("-o", "--output", default=None, help="PNG path (default DIR/curves.png)")
    p.add_argument("--keys", nargs="*", help="metrics to draw (default: the usual ones)")
    p.set_defaults(func=_run)
