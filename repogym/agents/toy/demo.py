"""``make train-demo``: the CPU toy. A tiny model learns, by GRPO, to pick fixes that pass.

A toy that shows the learning machinery end to end on a CPU in minutes; it is not a claim
that a 0.5M-parameter model fixes bugs. The policy speaks the menu language of
:mod:`repogym.agents.toy.menu` (``fix <k>`` expands agent-side into ``write`` tool calls; no
patch enters the sandbox) in real RepoEnv episodes of built-in tasks, bwrap sandbox, rewards
from the hidden tests (each distinct diff graded for real once, then cached).

1. Warm start: supervised training on one real trajectory per menu entry (the gold fix, the
   alternatives, the decoys, no change): the model learns the format and picks uniformly.
2. ``resolve_rate`` before: sampled episodes per task.
3. GRPO, the same trainer as for real models (exact tokens, the same losses).
4. ``resolve_rate`` after; prints ``resolve_rate before=X after=Y`` and writes
   ``OUT/metrics.jsonl``, ``OUT/rollouts/`` and ``OUT/curves.png``.

Run: ``python -m repogym.agents.toy.demo --seed 0 --out runs/train-demo``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from repogym.agents.cli import print_progress
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.metrics import plot_metrics
from repogym.agents.rollout import RolloutConfig, collect
from repogym.agents.toy.setup import TOY_TASKS, FormatFactory, toy_model, warm_start
from repogym.agents.trainer import Trainer
from repogym.sandbox import cleanup


def demo_config(seed: int, out: str, steps: int) -> GRPOConfig:
    """The demo's GRPO settings."""
    return GRPOConfig(
        variant="grpo",
        tasks=TOY_TASKS,
        steps=steps,
        out=out,
        seed=seed,
        lr=3e-4,
        epochs=2,
        micro_batch=64,
        device="cpu",
        rollout=RolloutConfig(group_size=8, max_steps=4, max_new_tokens=6, max_context=512),
    )


def evaluate(trainer: Trainer, samples: int, seed: int = 12345) -> float:
    """Resolve rate over ``samples`` sampled episodes per task (valid episodes only)."""
    cfg = trainer.config
    rollout = dataclasses.replace(cfg.rollout, group_size=samples, dynamic_sampling=False)
    result = collect(
        trainer.engine,
        trainer.fmt,
        trainer.pool,
        list(cfg.tasks),
        rollout,
        seed=seed,
        max_context=trainer.policy.max_len,
    )
    trainer.engine.release()
    return result.metrics()["resolve_rate"]


def main(argv: list[str] | None = None) -> int:
    """Warm start, evaluate, train with GRPO, evaluate; print the two resolve rates."""
    cleanup.install_signal_handlers()  # an entry point: SIGTERM removes its sandboxes
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/train-demo")
    parser.add_argument("--steps", type=int, default=40, help="GRPO steps")
    parser.add_argument("--sft-steps", type=int, default=60)
    parser.add_argument("--eval-samples", type=int, default=16, help="episodes per task")
    args = parser.parse_args(argv)
    start = time.monotonic()
    print(
        "CPU toy (not a coding agent): a 0.5M-parameter model picks among each task's own "
        "patches; rewards come from real sandboxed hidden-test grading",
        flush=True,
    )
    config = demo_config(args.seed, args.out, args.steps)
    config.model = str(toy_model(config, "menu"))
    trainer = GRPOTrainer(config, fmt_factory=FormatFactory("menu", config))
    trainer.progress = lambda event, f: event == "step" and print_progress(f["step"], f["metrics"])
    try:
        loss = warm_start(trainer, args.sft_steps)
        print(f"warm start: {args.sft_steps} steps, loss {loss:.3f}", flush=True)
        before = evaluate(trainer, args.eval_samples)
        print(f"before: resolve_rate {before:.3f}", flush=True)
        trainer.train()
        after = evaluate(trainer, args.eval_samples)
    finally:
        trainer.close()
    print(f"curves: {plot_metrics(config.out)}; {time.monotonic() - start:.0f}s")
    print(f"resolve_rate before={before:.3f} after={after:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
