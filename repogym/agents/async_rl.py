"""Asynchronous actor/learner RL: a wrapper around any trainer, bounded staleness.

Agent rollouts are slow and uneven (one episode waits on a 30 s test suite, the next submits at
once), so a synchronous learner idles while the slowest episode finishes. Here rollout workers
(:mod:`repogym.agents.async_workers`: threads, processes or Ray actors) generate with policy
version ``v`` while the learner updates:

- the learner takes ``groups_per_step`` finished groups per update; a group generated with
  version ``v`` and used at learner version ``u`` has staleness ``u - v``; groups older than
  ``max_staleness`` are dropped and counted (``staleness/dropped``);
- the learner pushes its weights to the workers every ``sync_every`` updates. Settings where
  every group would be too old before the next push (``sync_every > max_staleness + 1``) are
  refused up front: the learner would wait forever;
- the trainer's own ``update`` is the learner step, its policy term corrected for the gap
  between the behaviour policy ``mu`` (the worker's version, whose logprobs come with each
  token) and the policy being trained, with one meaning per name
  (:func:`repogym.agents.losses.async_policy_loss`): ``none``, ``tis``, ``seq``,
  ``decoupled`` (default; the trainer's clipped loss to the proximal policy, the learner's
  weights before the update, times ``min(pi_prox/mu, C)``); ``product`` is refused (unsafe).

Metrics: ``staleness/mean``, ``staleness/max``, ``staleness/dropped``, ``is_weight/*``,
``async/learner_idle_frac``, ``throughput/episodes_per_s``.

Run it: ``repogym train --algo async --model PATH --steps 20 --out runs/async`` (GRPO as the
learner; ``--ray local`` for Ray actors; ``--set correction=tis --set max_staleness=4``), or
``--set async_=true`` with ``--algo grpo`` / ``ppo`` / any GRPO variant.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from repogym.agents.async_workers import (
    Backend,
    EnvWorkerFactory,
    RolloutResult,
    WorkerFactory,
    make_workers,
    model_weights,
)
from repogym.agents.episode import Episode, collate
from repogym.agents.grpo import GRPOConfig
from repogym.agents.losses import Correction, check_choice
from repogym.agents.metrics import MetricsLogger, mean_metrics
from repogym.agents.trainer import AsyncCorrection, Trainer

__all__ = ["AsyncConfig", "AsyncOptions", "filter_stale", "iterate_async", "train_async"]


@dataclass
class AsyncOptions:
    """Actor/learner settings (``async_`` of a trainer's config, or ``--algo async``).

    Attributes:
        num_workers: Rollout workers.
        backend: ``thread`` or ``process`` (ignored when ``ray`` is set).
        ray: None, ``local`` (start Ray here) or a Ray cluster address: workers are actors.
        num_gpus: GPUs per Ray actor.
        sync_every: Push the learner's weights every this many updates (K).
        max_staleness: Oldest usable group, in learner updates; older ones are dropped.
        correction: Off-policy correction (see the module docstring).
        is_cap: Truncation ``C`` of the importance weights (None: untruncated).
        groups_per_step: Groups per update (None: one per task).
        timeout_s: Longest wait for one group before failing.
    """

    num_workers: int = 2
    backend: Backend = "thread"
    ray: str | None = None
    num_gpus: float = 0.0
    sync_every: int = 1
    max_staleness: int = 2
    correction: Correction = "decoupled"
    is_cap: float | None = 2.0
    groups_per_step: int | None = None
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        check_choice("correction", self.correction, Correction)
        check_choice("backend", self.backend, Backend)
        if self.num_workers < 1 or self.sync_every < 1 or self.max_staleness < 0:
            raise ValueError(f"need num_workers >= 1, sync_every >= 1, max_staleness >= 0; got "
                             f"{self.num_workers}, {self.sync_every}, {self.max_staleness}")  # fmt: skip
        if self.sync_every > self.max_staleness + 1:
            raise ValueError(
                f"sync_every={self.sync_every} > max_staleness+1={self.max_staleness + 1}: after "
                f"{self.max_staleness + 1} updates without new weights every group the workers "
                "produce is too stale, so the learner would wait forever. Fix: set sync_every <= "
                "max_staleness + 1 (or raise max_staleness)"
            )
        if self.correction == "product":
            raise ValueError("correction 'product' is unsafe (weights explode on long, stale "
                             "sequences). Fix: use 'decoupled', 'tis', 'seq' or 'none'")  # fmt: skip

    @classmethod
    def coerce(cls, value: bool | dict | AsyncOptions) -> AsyncOptions:
        """Options from a config's ``async_`` field (True: the defaults)."""
        if isinstance(value, AsyncOptions):
            return value
        return cls() if value is True else cls(**dict(value))


_OPTION_FIELDS = [f.name for f in dataclasses.fields(AsyncOptions)]


@dataclass
class AsyncConfig(GRPOConfig):
    """``--algo async``: GRPO as the learner, asynchronous workers (flat option fields).

    Attributes (besides :class:`repogym.agents.grpo.GRPOConfig`'s): those of
    :class:`AsyncOptions`, and ``epochs`` (default 1 here).
    """

    epochs: int = 1
    num_workers: int = 2
    backend: Backend = "thread"
    ray: str | None = None
    num_gpus: float = 0.0
    sync_every: int = 1
    max_staleness: int = 2
    correction: Correction = "decoupled"
    is_cap: float | None = 2.0
    groups_per_step: int | None = None
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.async_ = {k: getattr(self, k) for k in _OPTION_FIELDS}
        AsyncOptions.coerce(self.async_)  # validates up front


def filter_stale(results: list[RolloutResult], version: int,
                 max_staleness: int) -> tuple[list[RolloutResult], int, list[int]]:  # fmt: skip
    """Split results into usable ones and the count of episodes too old to use.

    Returns:
        ``(kept, dropped_episodes, staleness of each kept episode)``.
    """
    kept, dropped, ages = [], 0, []
    for r in results:
        age = version - r.version
        if age > max_staleness:
            dropped += len(r.episodes)
        else:
            kept.append(r)
            ages += [age] * len(r.episodes)
    return kept, dropped, ages


def iterate_async(trainer: Trainer, opts: AsyncOptions, factory: WorkerFactory, start: int,
                  steps: int, groups_per_step: int) -> Iterator[dict[str, float]]:  # fmt: skip
    """Run learner updates ``start..steps``; yields each step's metrics."""
    policy = trainer.policy
    workers = make_workers(factory, opts.num_workers, opts.backend, opts.ray, policy,
                           opts.num_gpus)  # fmt: skip
    version, dropped_total = start - 1, 0
    try:
        workers.publish(version, model_weights(policy))
        for _ in range(start, steps + 1):
            t0 = time.monotonic()
            kept, ages, dropped = [], [], 0
            while len(kept) < groups_per_step:
                fresh, n_drop, age = filter_stale([workers.get(opts.timeout_s)], version,
                                                  opts.max_staleness)  # fmt: skip
                kept, ages, dropped = kept + fresh, ages + age, dropped + n_drop
            waited = time.monotonic() - t0
            episodes = _regroup(kept)
            metrics = mean_metrics([r.metrics for r in kept])
            batch = collate(episodes, policy.tokenizer.pad_token_id)
            if batch.num_action_tokens:
                metrics.update(trainer.update(batch))
            trainer.scheduler.step()
            version += 1
            if (version - start + 1) % opts.sync_every == 0:
                workers.publish(version, model_weights(policy))
            dropped_total += dropped
            elapsed = max(time.monotonic() - t0, 1e-9)
            metrics.update({
                "staleness/mean": float(np.mean(ages)) if ages else 0.0,
                "staleness/max": float(max(ages, default=0)),
                "staleness/dropped": float(dropped),
                "staleness/dropped_total": float(dropped_total),
                "async/learner_idle_frac": waited / elapsed,
                "async/policy_version": float(version),
                "throughput/episodes_per_s": len(episodes) / elapsed,
                "time/step_s": elapsed,
            })  # fmt: skip
            yield metrics
    finally:
        workers.close()


def _regroup(results: list[RolloutResult]) -> list[Episode]:
    """The episodes of the results, with one group index per result."""
    episodes = []
    for g, r in enumerate(results):
        for ep in r.episodes:
            ep.group = g
            episodes.append(ep)
    return episodes


def train_async(
    trainer: Trainer, opts: AsyncOptions, *, steps: int | None = None,
    factory: WorkerFactory | None = None, fmt_factory: Callable[[Any], Any] | None = None,
    log: bool = True,
) -> list[dict[str, float]]:  # fmt: skip
    """Train any :class:`repogym.agents.trainer.Trainer` with asynchronous rollout workers.

    Args:
        trainer: The trainer (its policy, config and ``update``: the learner step).
        opts: Actor/learner settings.
        steps: The last step (default ``trainer.config.steps``).
        factory: Builds the workers (default: real environments, :class:`EnvWorkerFactory`
            with ``fmt_factory``).
        fmt_factory: Builds a worker's episode format from its tokenizer (picklable).
        log: Write ``OUT/metrics.jsonl`` and checkpoints (every ``save_every``, and the last).

    Returns:
        Every step's metrics.
    """
    config = trainer.config
    steps = config.steps if steps is None else steps
    if factory is None:
        if fmt_factory is None:
            raise ValueError("train_async needs factory= or fmt_factory=")
        factory = EnvWorkerFactory(config, fmt_factory)
    trainer.correction = AsyncCorrection(opts.correction, opts.is_cap)
    groups = opts.groups_per_step or len(config.tasks)
    logger = MetricsLogger(config.out) if log else None
    history = []
    try:
        loop = iterate_async(trainer, opts, factory, trainer.step + 1, steps, groups)
        for metrics in loop:
            trainer.step += 1
            history.append(metrics)
            if logger is not None:
                logger.log(trainer.step, metrics)
            trainer.report("step", step=trainer.step, steps=steps, metrics=metrics)
            if log and (trainer.step == steps or (config.save_every
                                                  and trainer.step % config.save_every == 0)):
                trainer.save_checkpoint()
    finally:
        if logger is not None:
            logger.close()
    return history
