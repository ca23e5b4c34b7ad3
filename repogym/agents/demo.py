"""``make train-demo``: a tiny model learns, by GRPO, to pick fixes that pass hidden tests.

A toy that shows the learning machinery end to end on a CPU in minutes; it is not a claim
that a 0.5M-parameter model fixes bugs. The policy speaks the compact action language of
:mod:`repogym.agents.menu` (``fix <k>`` expands agent-side into ``write`` tool calls; the gold
patch never enters the sandbox) in real RepoEnv episodes of built-in tasks, bwrap sandbox,
rewards from the hidden tests (each distinct diff graded for real once, then cached).

1. Warm start: supervised training on one real trajectory per menu entry (the gold fix, the
   alternatives, the decoys, no change): the model learns the action format and picks
   uniformly, so about a third of its picks pass.
2. ``resolve_rate`` before: sampled episodes per task.
3. GRPO (exact-match-free: the reward is the hidden tests' verdict).
4. ``resolve_rate`` after, the same way; prints ``resolve_rate before=X after=Y`` and writes
   ``OUT/metrics.jsonl`` and ``OUT/curves.png``.

Run: ``python -m repogym.agents.demo --seed 0 --out runs/train-demo``.
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

from repogym.agents.common import (
    DEMO_TASKS,
    build_interface,
    build_policy,
    evaluate,
    make_pool,
)
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.rollout import RolloutConfig
from repogym.agents.train_cli import print_step


def demo_config(seed: int, out: str, steps: int) -> GRPOConfig:
    """The demo's GRPO settings."""
    return GRPOConfig(
        variant="grpo",
        model="tiny",
        tasks=DEMO_TASKS,
        steps=steps,
        out=out,
        seed=seed,
        lr=3e-4,
        epochs=2,
        micro_batch=64,
        rollout=RolloutConfig(group_size=8, max_steps=4, max_new_tokens=6),
    )


def main(argv: list[str] | None = None) -> int:
    """Warm start, evaluate, train with GRPO, evaluate; print the two resolve rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/train-demo")
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps")
    parser.add_argument("--sft-steps", type=int, default=60)
    parser.add_argument("--eval-samples", type=int, default=16, help="episodes per task")
    args = parser.parse_args(argv)
    start = time.monotonic()
    config = demo_config(args.seed, args.out, args.steps)
    torch.manual_seed(args.seed)
    interface = build_interface(config)
    policy = build_policy(config, interface, value_head=False)
    trainer = GRPOTrainer(config, policy=policy, interface=interface, pool=make_pool(config))
    try:
        loss = trainer.warm_start(args.sft_steps)
        print(f"warm start: {args.sft_steps} steps, loss {loss:.3f}", flush=True)
        before = evaluate(policy, interface, trainer.pool, config, args.eval_samples)
        print(f"before: resolve_rate {before:.3f}", flush=True)
        trainer.train(on_step=functools.partial(print_step, digits=2))
        after = evaluate(policy, interface, trainer.pool, config, args.eval_samples)
    finally:
        trainer.close()
    from repogym.harness.cmd_plot import plot_metrics

    png = plot_metrics(config.out)
    print(f"curves: {png}; {time.monotonic() - start:.0f}s")
    print(f"resolve_rate before={before:.3f} after={after:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
