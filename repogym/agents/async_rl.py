"""Asynchronous actor/learner RL: a wrapper around any trainer, bounded staleness.

Agent rollouts are slow and uneven (one episode waits on a 30 s test suite, the next submits at
once), so a synchronous learner idles while the slowest episode finishes. Here rollout workers
(:mod:`repogym.agents.async_workers`: threads, processes or Ray actors) generate with policy
version ``v`` while the learner updates:

- the learner takes ``groups_per_step`` finished groups per update, oldest policy version
  first; a group generated with version ``v`` and used at learner version ``u`` has staleness
  ``u - v``, at most ``max_staleness``;
- **backpressure** keeps it there without throwing data away: a worker starts a group only
  with a ticket (:mod:`repogym.agents.async_workers`); the learner grants
  ``(max_staleness + 2 - sync_every) * groups_per_step`` tickets up front and, after each
  update and weight push, one per group it consumed (a ticket's group starts with weights at
  least as new as the last push), so workers wait instead of running ahead; and before an
  update the learner
  waits for any started group that would be too stale after it, and takes it in this
  update. Groups are dropped (``staleness/dropped``) only if one still arrives too old;
- the learner pushes its weights to the workers every ``sync_every`` updates. Settings where
  every group would be too old before the next push (``sync_every > max_staleness + 1``) are
  refused up front: the learner would wait forever;
- like a synchronous run, it writes ``OUT/config.json``, ``OUT/rollouts/`` (every group of a
  step, ``policy_version`` in the header), ``OUT/metrics.jsonl`` and checkpoints, and
  ``resume`` continues the step count, the metrics file and the task stream (ticket ``t`` is
  the ``t``-th group of the run whichever worker runs it);
- the trainer's own ``update`` is the learner step, its policy term corrected for the gap
  between the behaviour policy ``mu`` (the worker's version, whose logprobs come with each
  token) and the policy being trained, with one meaning per name
  (:func:`repogym.agents.losses.async_policy_loss`): ``none``, ``tis``, ``seq``,
  ``decoupled`` (default; the trainer's clipped loss to the proximal policy, the learner's
  weights before the update, times ``min(pi_prox/mu, C)``); ``product`` is refused (unsafe).

Metrics: ``staleness/mean``, ``staleness/max``, ``staleness/dropped``,
``staleness/dropped_total``, ``is_weight/*``, ``async/learner_idle_frac``,
``async/in_flight``, ``throughput/episodes_per_s``.

Run it: ``repogym train --algo grpo --model PATH --steps 20 --out runs/async --set
async_=true`` (any GRPO variant, Echo or PPO as the learner; ``--ray local`` for Ray actors;
``--set async_.correction=tis --set async_.max_staleness=4`` for the options, which turn it
on too). ``--algo async`` (GRPO with one epoch, the options as flat fields: ``--set
max_staleness=4``) is a deprecated alias and prints a note saying so.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repogym.agents.async_workers import (
    Backend,
    EnvWorkerFactory,
    RolloutResult,
    Started,
    WorkerFactory,
    make_workers,
    model_weights,
)
from repogym.agents.config import AsyncCorrection
from repogym.agents.episode import Episode, collate
from repogym.agents.grpo import GRPOConfig
from repogym.agents.losses import Correction, check_choice
from repogym.agents.metrics import mean_metrics
from repogym.agents.trainer import Trainer

__all__ = ["AsyncConfig", "AsyncOptions", "initial_tickets", "iterate_async", "train_async"]


@dataclass
class AsyncOptions:
    """Actor/learner settings: a trainer config's ``async_`` (``--algo async``, its deprecated
    alias, has them as flat fields).

    Attributes:
        num_workers: Rollout workers.
        backend: ``thread`` or ``process`` (ignored when ``ray`` is set).
        ray: None, ``local`` (start Ray here) or a Ray cluster address: workers are actors.
        num_gpus: GPUs per Ray actor.
        sync_every: Push the learner's weights every this many updates (K).
        max_staleness: Oldest usable group, in learner updates (held by backpressure).
        correction: Off-policy correction (see the module docstring).
        is_cap: Truncation ``C`` of the importance weights (None: untruncated).
        groups_per_step: Groups per update (None: ``tasks_per_step``, else one per task).
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
            raise ValueError(
                f"need num_workers >= 1, sync_every >= 1, max_staleness >= 0; got "
                f"{self.num_workers}, {self.sync_every}, {self.max_staleness}"
            )
        if self.sync_every > self.max_staleness + 1:
            raise ValueError(
                f"sync_every={self.sync_every} > max_staleness+1={self.max_staleness + 1}: after "
                f"{self.max_staleness + 1} updates without new weights every group the workers "
                "produce is too stale, so the learner would wait forever. Fix: set sync_every <= "
                "max_staleness + 1 (or raise max_staleness)"
            )
        if self.correction == "product":
            raise ValueError(
                "correction 'product' is unsafe (weights explode on long, stale "
                "sequences). Fix: use 'decoupled', 'tis', 'seq' or 'none'"
            )

    @classmethod
    def coerce(cls, value: bool | dict | AsyncOptions) -> AsyncOptions:
        """Options from a config's ``async_`` field (True: the defaults)."""
        if isinstance(value, AsyncOptions):
            return value
        return cls() if value is True else cls(**dict(value))


_OPTION_FIELDS = [f.name for f in dataclasses.fields(AsyncOptions)]


@dataclass
class AsyncConfig(AsyncOptions, GRPOConfig):
    """``--algo async`` (deprecated; use ``async_`` on the algorithm's config): GRPO as the
    learner, asynchronous workers (flat option fields).

    Attributes (besides :class:`repogym.agents.grpo.GRPOConfig`'s, and in this order after
    them): those of :class:`AsyncOptions`, inherited from it, and ``epochs`` (default 1 here).
    """

    epochs: int = 1

    def __post_init__(self) -> None:
        GRPOConfig.__post_init__(self)
        AsyncOptions.__post_init__(self)  # validates the options up front
        self.async_ = {k: getattr(self, k) for k in _OPTION_FIELDS}


def initial_tickets(opts: AsyncOptions, groups_per_step: int) -> int:
    """Groups workers may run ahead of the learner: every one of them is used before it is
    more than ``max_staleness`` updates old (see the module docstring)."""
    return (opts.max_staleness + 2 - opts.sync_every) * groups_per_step


class _Flow:
    """The learner's view of the workers: groups started (ticket -> version) and finished."""

    def __init__(
        self, workers: Any, opts: AsyncOptions, groups_per_step: int, first: int, version: int
    ) -> None:
        self.workers, self.opts, self.gps = workers, opts, groups_per_step
        self.in_flight: dict[int, int] = {}
        self.ready: list[RolloutResult] = []
        self.next_ticket = first
        self.grant(initial_tickets(opts, groups_per_step), version)

    def grant(self, n: int, min_version: int) -> None:
        """``n`` more groups, each to start with weights of at least ``min_version`` (the
        newest published: granted after the push, no group starts with older ones)."""
        self.workers.grant(range(self.next_ticket, self.next_ticket + n), min_version)
        self.next_ticket += n

    def handle(self, event: Started | RolloutResult) -> None:
        if isinstance(event, Started):
            self.in_flight[event.ticket] = event.version
        else:
            self.in_flight.pop(event.ticket, None)
            self.ready.append(event)

    def gather(self, version: int) -> tuple[list[RolloutResult], list[RolloutResult], float]:
        """Wait until ``groups_per_step`` groups are ready and no started group would be too
        stale after this update; returns ``(used, dropped, seconds waited)``."""
        t0, ms = time.monotonic(), self.opts.max_staleness
        waited_since = t0
        while True:
            while (event := self.workers.next_event(0)) is not None:
                self.handle(event)
            urgent = [t for t, v in self.in_flight.items() if version + 1 - v > ms]
            if len(self.ready) >= self.gps and not urgent:
                break
            event = self.workers.next_event(0.05)
            if event is not None:
                self.handle(event)
                waited_since = time.monotonic()
            elif time.monotonic() - waited_since > self.opts.timeout_s:
                raise TimeoutError(f"no rollout finished within {self.opts.timeout_s:.0f}s")
        self.ready.sort(key=lambda r: (r.version, r.ticket))
        dropped = [r for r in self.ready if version - r.version > ms]
        fresh = [r for r in self.ready if version - r.version <= ms]
        must = sum(version + 1 - r.version > ms for r in fresh)
        used, self.ready = fresh[: max(self.gps, must)], fresh[max(self.gps, must) :]
        return used, dropped, time.monotonic() - t0


def iterate_async(
    trainer: Trainer,
    opts: AsyncOptions,
    factory: WorkerFactory,
    start: int,
    steps: int,
    groups_per_step: int,
) -> Iterator[dict[str, float]]:
    """Run learner updates ``start..steps``; yields each step's metrics."""
    policy = trainer.policy
    workers = make_workers(factory, opts.num_workers, opts.backend, opts.ray, policy, opts.num_gpus)
    version, dropped_total = start - 1, 0
    try:
        workers.publish(version, model_weights(policy))
        published = version
        flow = _Flow(workers, opts, groups_per_step, (start - 1) * groups_per_step, version)
        for step in range(start, steps + 1):
            t0 = time.monotonic()
            used, dropped, waited = flow.gather(version)
            ages = [version - r.version for r in used for _ in r.episodes]
            episodes = _regroup(used)
            if trainer.config.save_rollouts:
                trainer.write_episodes(
                    Path(trainer.config.out) / "rollouts",
                    step,
                    episodes + [e for r in dropped for e in r.episodes],
                )
            metrics = mean_metrics([r.metrics for r in used])
            batch = collate(episodes, policy.tokenizer.pad_token_id)
            if batch.num_action_tokens:
                metrics.update(trainer.update(batch, episodes))
            trainer.scheduler.step()
            version += 1
            if (version - start + 1) % opts.sync_every == 0:
                workers.publish(version, model_weights(policy))
                published = version
            flow.grant(len(used) + len(dropped), published)
            n_drop = sum(len(r.episodes) for r in dropped)
            dropped_total += n_drop
            elapsed = max(time.monotonic() - t0, 1e-9)
            metrics.update(
                {
                    "staleness/mean": float(np.mean(ages)) if ages else 0.0,
                    "staleness/max": float(max(ages, default=0)),
                    "staleness/dropped": float(n_drop),
                    "staleness/dropped_total": float(dropped_total),
                    "async/learner_idle_frac": waited / elapsed,
                    "async/policy_version": float(version),
                    "async/in_flight": float(len(flow.in_flight)),
                    "throughput/episodes_per_s": len(episodes) / elapsed,
                    "time/step_s": elapsed,
                }
            )
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
    trainer: Trainer,
    opts: AsyncOptions,
    *,
    steps: int | None = None,
    factory: WorkerFactory | None = None,
    fmt_factory: Callable[[Any], Any] | None = None,
    log: bool = True,
    resume: bool | str | Path = False,
) -> list[dict[str, float]]:
    """Train any :class:`repogym.agents.trainer.Trainer` with asynchronous rollout workers.

    Args:
        trainer: The trainer (its policy, config and ``update``: the learner step).
        opts: Actor/learner settings.
        steps: The last step (default ``trainer.config.steps``).
        factory: Builds the workers (default: real environments, :class:`EnvWorkerFactory`
            with ``fmt_factory``).
        fmt_factory: Builds a worker's episode format from its tokenizer (picklable).
        log: Write ``OUT/config.json``, ``OUT/metrics.jsonl`` and checkpoints (every
            ``save_every``, and the last).
        resume: True (the latest ``OUT/checkpoint-N``) or a checkpoint folder: continue after
            its step, appending to the run's metrics.

    Returns:
        The metrics of the steps run.
    """
    config = trainer.config
    steps = config.steps if steps is None else steps
    if config.sampler != "uniform":
        raise ValueError(
            "sampler=adaptive is not supported with asynchronous workers (they "
            "draw tasks without the learner's posterior). Fix: drop it, or train "
            "synchronously"
        )
    if getattr(config, "advantage", "gae") == "mc":
        raise ValueError(
            "advantage=mc is not supported with asynchronous workers (the "
            "Monte-Carlo values are estimated in the synchronous collection). Fix: "
            "drop it, or train synchronously"
        )
    if trainer.parallel.enabled:
        raise ValueError(
            "asynchronous training runs in one process (its workers are threads, "
            "processes or Ray actors). Fix: drop --nproc, or train synchronously"
        )
    if factory is None:
        if fmt_factory is None:
            raise ValueError("train_async needs factory= or fmt_factory=")
        factory = EnvWorkerFactory(config, fmt_factory)
    trainer.correction = AsyncCorrection(opts.correction, opts.is_cap)
    groups = opts.groups_per_step or config.tasks_per_step or len(config.tasks)
    run = trainer.open_run(resume, log=log)
    history = []
    try:
        for metrics in iterate_async(trainer, opts, factory, trainer.step + 1, steps, groups):
            trainer.step += 1
            history.append(metrics)
            trainer.end_of_step(trainer.step, steps, metrics, run)
    finally:
        if run is not None:
            run.close()
    return history
