"""Asynchronous vs synchronous actor/learner under heavy-tailed episode durations.

What is simulated and what is real:

- simulated: the *duration* of each rollout. A worker sleeps ``median * exp(N(0, sigma))``
  seconds per group of episodes (log-normal; with ``sigma = 0.8`` about 1 group in 25 takes
  more than 4x the median), instead of running sandboxed episodes. The episodes' tokens are
  fixed action strings with random 0/1 rewards.
- real: the behaviour logprobs (each worker scores the tokens with its own, possibly stale, copy
  of the tiny model), the weight pushes, the staleness filter, and the learner step: the real
  GRPO update under the asynchronous wrapper (TIS-corrected loss, AdamW) on the tiny model.

Synchronous: each step, ``workers`` groups start together with the current weights; the learner
waits for the slowest, then updates while the workers wait. Asynchronous: the same workers
generate continuously; the learner takes ``workers`` groups per update, dropping groups older
than ``max_staleness`` updates; weights are pushed after every update.

Prints episodes used per second and the learner's idle fraction for sync and for async at
max_staleness 1, 2, 4; the last line is ``async_speedup=X`` (async at max_staleness 4 over
sync, in episodes per second).

Run: ``python bench/async_vs_sync.py [--steps 12 --median 0.3 --sigma 0.8 --workers 4]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from repogym.agents.async_rl import AsyncOptions, train_async
from repogym.agents.async_sim import SimulatedWorkerFactory
from repogym.agents.async_workers import model_weights
from repogym.agents.episode import collate
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import load_policy
from repogym.agents.toy.tiny import build_tiny, save_tiny


def _trainer(model: str, args: argparse.Namespace) -> GRPOTrainer:
    torch.manual_seed(0)
    config = GRPOConfig(
        tasks=("sim",),
        steps=args.steps,
        out=tempfile.mkdtemp(prefix="bench-"),
        lr=1e-4,
        device="cpu",
        epochs=1,
    )
    return GRPOTrainer(config, policy=load_policy(model, device="cpu"))


def run_sync(factory: SimulatedWorkerFactory, args: argparse.Namespace) -> dict[str, float]:
    """Lockstep: all groups of a step start with the same weights; update after the slowest."""
    trainer = _trainer(factory.model, args)
    workers = [factory(i, trainer.policy.frozen_copy()) for i in range(args.workers)]
    waited = total = 0.0
    episodes = 0
    with ThreadPoolExecutor(args.workers) as pool:
        for step in range(args.steps):
            start = time.monotonic()
            weights = model_weights(trainer.policy)
            for w in workers:
                w.policy.model.load_state_dict(weights)
            groups = [g for g, _ in pool.map(lambda w, i=step: w.run(i), workers)]
            waited += time.monotonic() - start
            batch_eps = [ep for g, group in enumerate(groups) for ep in _tag(group, g)]
            trainer.update(collate(batch_eps, trainer.policy.tokenizer.pad_token_id))
            total += time.monotonic() - start
            episodes += len(batch_eps)
    trainer.close()
    return {
        "eps_per_s": episodes / total,
        "idle": waited / total,
        "dropped": 0.0,
        "staleness": 0.0,
        "seconds": total,
    }


def _tag(group: list, g: int) -> list:
    for ep in group:
        ep.group = g
    return group


def run_async(
    factory: SimulatedWorkerFactory, args: argparse.Namespace, staleness: int
) -> dict[str, float]:
    """Workers generate continuously; the learner drops groups older than ``staleness``."""
    trainer = _trainer(factory.model, args)
    opts = AsyncOptions(
        num_workers=args.workers,
        groups_per_step=args.workers,
        max_staleness=staleness,
        correction="tis",
    )
    history = train_async(trainer, opts, factory=factory, log=False)
    trainer.close()
    total = sum(m["time/step_s"] for m in history)
    waited = sum(m["async/learner_idle_frac"] * m["time/step_s"] for m in history)
    used = args.steps * args.workers * factory.group_size
    return {
        "eps_per_s": used / total,
        "idle": waited / total,
        "dropped": history[-1]["staleness/dropped_total"],
        "staleness": sum(m["staleness/mean"] for m in history) / len(history),
        "seconds": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="learner updates per run")
    parser.add_argument("--median", type=float, default=0.3, help="median group duration (s)")
    parser.add_argument("--sigma", type=float, default=0.8, help="log-normal shape")
    parser.add_argument("--workers", type=int, default=4, help="rollout workers (threads)")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per group")
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = str(
        save_tiny(
            *build_tiny(extra_corpus=list(SimulatedWorkerFactory.actions)),
            tempfile.mkdtemp(prefix="bench-tiny-"),
        )
    )
    factory = SimulatedWorkerFactory(
        model=model, median_s=args.median, sigma=args.sigma, group_size=args.group_size, seed=1
    )
    rows = {"sync": run_sync(factory, args)}
    for staleness in (1, 2, 4):
        rows[f"async s={staleness}"] = run_async(factory, args, staleness)
    print(
        f"{'mode':<12} {'episodes/s':>10} {'learner idle':>13} {'dropped':>8} "
        f"{'staleness':>9} {'wall s':>7}"
    )
    for name, r in rows.items():
        print(
            f"{name:<12} {r['eps_per_s']:>10.2f} {r['idle']:>13.2f} {r['dropped']:>8.0f} "
            f"{r['staleness']:>9.2f} {r['seconds']:>7.1f}"
        )
    for staleness in (1, 2):
        ratio = rows[f"async s={staleness}"]["eps_per_s"] / rows["sync"]["eps_per_s"]
        print(f"async_speedup_staleness{staleness}={ratio:.2f}")
    print(f"async_speedup={rows['async s=4']['eps_per_s'] / rows['sync']['eps_per_s']:.2f}")


if __name__ == "__main__":
    main()
