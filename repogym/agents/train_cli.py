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
from typing import Any

from repogym.agents.rollout import RolloutConfig

__all__ = ["cispo", "dapo", "dr_grpo", "grpo", "gspo", "ppo", "run_algo"]


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
    from repogym.harness.cmd_train import config_from_args

    rollout = _split_overrides(args)
    if algo == "ppo":
        from repogym.agents.ppo import PPOConfig as cls
        from repogym.agents.ppo import PPOTrainer as trainer_cls
    else:
        from repogym.agents.grpo import GRPOConfig as cls
        from repogym.agents.grpo import GRPOTrainer as trainer_cls

        args.overrides = [f"variant={algo}", *args.overrides]
    config = config_from_args(cls, args)
    if getattr(args, "task_ids", None):
        config.tasks = tuple(args.task_ids)
    if rollout:
        config.rollout = dataclasses.replace(config.rollout, **rollout)
        config.__post_init__()
    if args.out is None:
        config.out = f"runs/{algo}"
    trainer = trainer_cls(config)
    try:
        trainer.train(on_step=_print_step)
    finally:
        trainer.close()
    from repogym.harness.cmd_plot import plot_metrics

    print(f"metrics: {config.out}/metrics.jsonl; curves: {plot_metrics(config.out)}")
    return 0


def _print_step(step: int, m: dict[str, float]) -> None:
    print(
        f"step {step}: reward/mean {m['reward/mean']:.3f} resolve_rate {m['resolve_rate']:.3f} "
        f"loss/policy {m.get('loss/policy', 0.0):+.4f} entropy {m.get('entropy', 0.0):.3f} "
        f"({m['time/step_s']:.1f}s)",
        flush=True,
    )


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
