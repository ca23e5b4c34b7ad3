"""The trainers' metric vocabulary, ``OUT/metrics.jsonl`` (+ TensorBoard), and its plots.

Importing this module is light (no torch): ``repogym plot`` uses :func:`plot_metrics`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PLOT_KEYS",
    "METRIC_NAMES",
    "MetricsLogger",
    "mean_metrics",
    "plot_metrics",
    "read_metrics",
    "reduce_ranks",
    "sum_losses",
]

METRIC_NAMES = (
    "loss/policy",
    "loss/value",
    "loss/kl",
    "loss/entropy",
    "loss/echo",
    "clip/low_frac",
    "clip/high_frac",
    "is_weight/max",
    "is_weight/mean",
    "approx_kl",
    "entropy",
    "frac_zero_std_groups",
    "reward/mean",
    "resolve_rate",
    "staleness/mean",
    "throughput/tokens_per_s",
    "infra_error_frac",
)
"""The one metric vocabulary of every trainer (others, e.g. ``grad_norm``, may be added)."""

DEFAULT_PLOT_KEYS = (
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
"""Metrics drawn by :func:`plot_metrics` when present, one panel each."""


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average metric dicts key by key (``*/max`` takes the max)."""
    out: dict[str, float] = {}
    for key in {k for r in rows for k in r}:
        values = [r[key] for r in rows if key in r]
        out[key] = max(values) if key.endswith("/max") else sum(values) / len(values)
    return out


def sum_losses(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """One optimiser step's micro-batch metrics: ``loss/*`` summed (global normalisers make the
    sum the batch loss), the rest averaged (``*/max``: maximum)."""
    out = mean_metrics(rows)
    for key in out:
        if key.startswith("loss/"):
            out[key] = sum(r[key] for r in rows if key in r)
    return out


def reduce_rule(key: str) -> str:
    """How one metric combines over data-parallel ranks: ``"sum"`` (``loss/*``, whose shares
    are normalised by global counts; ``throughput/*``; counts ``*episodes``), ``"max"``
    (``*/max``; ``time/*``: the slowest rank sets the pace) or ``"mean"`` (weighted by counts)."""
    if key.startswith(("loss/", "throughput/")) or key.endswith("episodes"):
        return "sum"
    if key.endswith("/max") or key.startswith("time/"):
        return "max"
    return "mean"


def reduce_ranks(
    rows: Sequence[tuple[Mapping[str, float], Mapping[str, float]]],
) -> dict[str, float]:
    """Every rank's ``(metrics, counts)`` as one dict, the same as one process computing the
    metrics over every rank's items.

    ``counts[key]`` is how many items (episodes, groups, micro-batches) a rank's mean
    ``metrics[key]`` is taken over; a key without a count counts 1. A mean is the count-weighted
    mean over the ranks; a rank whose count is 0 contributes nothing (its value is a
    placeholder), also to sums and maxima. Where every rank's count is 0 the placeholders are
    averaged (they are what one process reports with nothing to average). See
    :func:`reduce_rule` for sums and maxima.

    Args:
        rows: One ``(metrics, counts)`` pair per rank.

    Returns:
        The combined metrics (every key any rank reports).
    """
    out: dict[str, float] = {}
    for key in sorted({k for m, _ in rows for k in m}):
        pairs = [(float(m[key]), float(c.get(key, 1.0))) for m, c in rows if key in m]
        live = [(v, n) for v, n in pairs if n > 0] or [(v, 1.0) for v, _ in pairs]
        rule = reduce_rule(key)
        if rule == "sum":
            out[key] = sum(v for v, _ in live)
        elif rule == "max":
            out[key] = max(v for v, _ in live)
        else:
            out[key] = sum(v * n for v, n in live) / sum(n for _, n in live)
    return out


class MetricsLogger:
    """Append one JSON line per step to ``OUT/metrics.jsonl`` (and TensorBoard if installed).

    Args:
        out: The run folder.
        truncate_after: On resume, drop rows of steps after this one (they are redone).
    """

    def __init__(self, out: str | Path, truncate_after: int | None = None) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "metrics.jsonl"
        if truncate_after is not None and self.path.is_file():
            keep = [r for r in read_metrics(self.path) if r.get("step", 0) <= truncate_after]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in keep))
        elif truncate_after is None and self.path.is_file():
            self.path.unlink()  # a new run starts a new file
        self._file = self.path.open("a", encoding="utf-8")
        self._tb = _tensorboard(self.out / "tb")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Write ``metrics`` for ``step``."""
        row = {"step": step, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                self._tb.add_scalar(key, float(value), step)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _tensorboard(path: Path) -> Any:
    """A ``SummaryWriter`` when tensorboard is installed, else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(path))


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a ``metrics.jsonl`` file (or of ``DIR/metrics.jsonl``).

    Raises:
        FileNotFoundError: If there is none (the message names the fix).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no metrics at {path}. Fix: pass the --out folder of `repogym "
            "train` (it holds metrics.jsonl)"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_metrics(
    run: str | Path, out: str | Path | None = None, keys: Sequence[str] = DEFAULT_PLOT_KEYS
) -> Path:
    """Draw each metric of ``keys`` found in the run against the step; returns the PNG path.

    Args:
        run: The run folder (or its metrics.jsonl).
        out: PNG path (default ``RUN/curves.png``).
        keys: Metrics to draw, one panel each, when the run has them.
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
