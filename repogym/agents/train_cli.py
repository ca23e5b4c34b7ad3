"""``repogym train --algo ppo|grpo|gspo|dapo|cispo|dr_grpo``: the LM trainers' entry points.

Each function here is one line of :data:`repogym.harness.cmd_train.ALGOS`. It builds the
trainer's config from the common flags (``--model``, ``--steps``, ``--out``, ``--seed``,
``--task``) and ``--set FIELD=VALUE`` pairs (``--set rollout.group_size=8`` sets a field of the
rollout settings), trains, and writes ``OUT/metrics.jsonl``, ``OUT/config.json``,
``OUT/checkpoint-<step>/`` and ``OUT/curves.png``.

Example:
    repogym train --algo grpo --model tiny --steps 20 --out runs/grpo --set lr=3e-4
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from repogym.agents.rollout import RolloutConfig

__all__ = [
    "cispo",
    "dapo",
    "dr_grpo",
    "grpo",
    "gspo",
    "ppo",
    "print_progress",
    "print_step",
    "run_algo",
    "train_from_args",
]


def _split_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Take ``rollout.*`` pairs out of ``args.overrides``; return them as RolloutConfig kwargs."""
    from repogym.harness.cmd_train import _coerce

    names = {f.name: f for f in dataclasses.fields(RolloutConfig)}
    rollout: dict[str, Any] = {}
    rest = []
    for pair in getattr(args, "overrides", None) or []:
        key, sep, text = pair.partition("=")
        if not key.startswith("rollout."):
            rest.append(pair)
            continue
        name = key.removeprefix("rollout.")
        if not sep or name not in names:
            raise SystemExit(
                f"--set {pair!r}: unknown rollout field. Fix: use rollout.FIELD=VALUE with "
                f"FIELD one of {sorted(names)}"
            )
        rollout[name] = _coerce(RolloutConfig, names[name], text)
    args.overrides = rest
    return rollout


def run_algo(algo: str, args: argparse.Namespace) -> int:
    """Build the config of ``algo`` from ``args``, train, plot; returns 0."""
    if algo == "ppo":
        from repogym.agents.ppo import PPOConfig as cls
        from repogym.agents.ppo import PPOTrainer as trainer_cls
    else:
        from repogym.agents.grpo import GRPOConfig as cls
        from repogym.agents.grpo import GRPOTrainer as trainer_cls

        args.overrides = [f"variant={algo}", *(getattr(args, "overrides", None) or [])]
    return train_from_args(algo, cls, trainer_cls, args, on_step=print_step)


def train_from_args(
    algo: str,
    config_cls: type,
    trainer_cls: type,
    args: argparse.Namespace,
    *,
    on_step: Callable[[int, Mapping[str, float]], None] | None = None,
) -> int:
    """Build ``config_cls`` from the train CLI's flags, train with ``trainer_cls``, plot.

    The entry point of every LM trainer (``grpo``, ``ppo``, ..., ``async``, ``distill``,
    ``opd``, ``echo``). ``rollout.FIELD=VALUE`` pairs of ``--set`` set rollout fields;
    ``--task`` sets ``tasks``; ``--ray`` sets the config's ``ray`` field where it has one.

    Args:
        algo: The ``--algo`` name (the default output folder is ``runs/<algo>``).
        config_cls: The trainer's config dataclass.
        trainer_cls: The trainer.
        args: The parsed ``repogym train`` flags.
        on_step: Progress printer (default :func:`print_progress`).

    Returns:
        0.
    """
    from repogym.harness.cmd_train import config_from_args

    rollout = _split_overrides(args)
    if getattr(args, "ray", None) and "ray" in {f.name for f in dataclasses.fields(config_cls)}:
        args.overrides.append(f"ray={args.ray}")
    config = config_from_args(config_cls, args)
    if getattr(args, "task_ids", None):
        config.tasks = tuple(args.task_ids)
    if rollout:
        config.rollout = dataclasses.replace(config.rollout, **rollout)
        config.__post_init__()
    if getattr(args, "out", None) is None:
        config.out = f"runs/{algo}"
    trainer = trainer_cls(config)
    try:
        trainer.train(on_step=on_step or print_progress)
    finally:
        trainer.close()
    from repogym.harness.cmd_plot import plot_metrics

    print(f"metrics: {config.out}/metrics.jsonl; curves: {plot_metrics(config.out)}")
    return 0


def print_step(step: int, m: Mapping[str, float], *, digits: int = 3) -> None:
    """Print reward, resolve rate, policy loss and entropy of a step (GRPO, PPO, the demo)."""
    d = digits
    print(
        f"step {step}: reward/mean {m['reward/mean']:.{d}f} resolve_rate "
        f"{m['resolve_rate']:.{d}f} loss/policy {m.get('loss/policy', 0.0):+.{d + 1}f} "
        f"entropy {m.get('entropy', 0.0):.3f} ({m['time/step_s']:.1f}s)",
        flush=True,
    )


def print_progress(step: int, m: Mapping[str, float]) -> None:
    """Print the metrics of a step that it has among reward, losses, IS weight and staleness."""
    keys = ("reward/mean", "loss/policy", "loss/kl", "loss/echo", "is_weight/max",
            "staleness/mean")  # fmt: skip
    shown = " ".join(f"{k} {m[k]:.4g}" for k in keys if k in m)
    print(f"step {step}: {shown} ({m.get('time/step_s', 0.0):.1f}s)", flush=True)


def ppo(args: argparse.Namespace) -> int:
    """``--algo ppo``: PPO with a critic (value head), GAE over turns."""
    return run_algo("ppo", args)


def grpo(args: argparse.Namespace) -> int:
    """``--algo grpo``."""
    return run_algo("grpo", args)


def gspo(args: argparse.Namespace) -> int:
    """``--algo gspo``."""
    return run_algo("gspo", args)


def dapo(args: argparse.Namespace) -> int:
    """``--algo dapo``."""
    return run_algo("dapo", args)


def cispo(args: argparse.Namespace) -> int:
    """``--algo cispo``."""
    return run_algo("cispo", args)


def dr_grpo(args: argparse.Namespace) -> int:
    """``--algo dr_grpo``."""
    return run_algo("dr_grpo", args)
