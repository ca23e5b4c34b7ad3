"""Rollout workers of the asynchronous actor/learner (:mod:`repogym.agents.async_rl`).

A worker owns a copy of the policy and its own environments. It runs one group of episodes at
a time with the newest weights it has received, tags each episode with that policy version
(``info["policy_version"]``) and hands a :class:`RolloutResult` to the learner. Workers run as
threads or spawned processes (:class:`LocalWorkers`, fed through queues) or Ray actors
(:class:`RayWorkers`). What a worker runs is built by a picklable factory:
:class:`EnvWorkerFactory` (real RepoEnv episodes) or :class:`SimulatedWorkerFactory`
(simulated durations, for benchmarks and tests).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import torch

from repogym.agents.engines import HFEngine
from repogym.agents.episode import Episode, Turn, collate
from repogym.agents.losses import check_choice
from repogym.agents.policy import Policy, load_policy
from repogym.agents.rollout import EnvPool, EpisodeFormat, collect
from repogym.agents.shaping import default_max_len, shape_episodes
from repogym.agents.trainer import TrainConfig

__all__ = [
    "Backend",
    "EnvWorkerFactory",
    "LocalWorkers",
    "RayWorkers",
    "RolloutResult",
    "RolloutWorker",
    "SimulatedWorkerFactory",
    "WorkerFactory",
    "make_workers",
    "model_weights",
]

Backend = Literal["thread", "process"]


@dataclass
class RolloutResult:
    """One group of episodes from a worker (``error``: a worker's traceback)."""

    episodes: list[Episode]
    version: int
    worker: int
    seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None


class RolloutWorker(Protocol):
    """What runs inside a worker: a policy to load weights into, and one group per call."""

    policy: Policy

    def run(self, index: int) -> tuple[list[Episode], dict[str, float]]:
        """Run the ``index``-th group of this worker; returns episodes and metrics."""
        ...


WorkerFactory = Callable[[int, "Policy | None"], RolloutWorker]
"""``(worker_id, policy or None) -> worker``: the worker owns the given policy (a copy of the
learner's, for threads) or builds its own (processes, Ray). Picklable for processes and Ray."""


@dataclass
class _EnvWorker:
    policy: Policy
    fmt: EpisodeFormat
    pool: EnvPool
    config: TrainConfig
    worker_id: int

    def run(self, index: int) -> tuple[list[Episode], dict[str, float]]:
        cfg = self.config
        task = cfg.tasks[index % len(cfg.tasks)]
        engine = HFEngine(self.policy, self.fmt.stops, reuse_cache=cfg.reuse_cache)
        rollout = collect(engine, self.fmt, self.pool, [task], cfg.rollout,
                          seed=cfg.seed + 7919 * self.worker_id + 1000 * index,
                          max_context=self.policy.max_len)  # fmt: skip
        metrics = rollout.metrics()
        if cfg.shaping is not None:
            metrics.update(shape_episodes(rollout.episodes, cfg.shaping,
                                          default_max_len(cfg.rollout)))  # fmt: skip
        return rollout.episodes, metrics

    def close(self) -> None:
        self.pool.close()


@dataclass
class EnvWorkerFactory:
    """Builds workers that run real RepoEnv episodes (picklable: rebuilt in processes/actors).

    Attributes:
        config: The trainer's config (model folder, tasks, rollout settings).
        fmt_factory: Builds the episode format from a tokenizer (picklable).
    """

    config: TrainConfig
    fmt_factory: Callable[[Any], EpisodeFormat]

    def __call__(self, worker_id: int, template: Policy | None = None) -> _EnvWorker:
        cfg = self.config
        policy = template or load_policy(cfg.model, device=cfg.device, dtype=cfg.dtype,
                                         temperature=cfg.temperature).requires_grad_(False)  # fmt: skip
        policy.value_head = None
        return _EnvWorker(policy.eval(), self.fmt_factory(policy.tokenizer),
                          EnvPool(cfg.rollout), cfg, worker_id)  # fmt: skip


@dataclass
class _SimulatedWorker:
    policy: Policy
    factory: SimulatedWorkerFactory
    rng: np.random.Generator

    def run(self, index: int) -> tuple[list[Episode], dict[str, float]]:
        f = self.factory
        time.sleep(f.median_s * float(self.rng.lognormal(0.0, f.sigma)))
        episodes = []
        prompt = self.policy.encode(f.prompt)
        for _ in range(f.group_size):
            ids = self.policy.encode(f.actions[int(self.rng.integers(len(f.actions)))])
            ep = Episode(task="sim", prompt=f.prompt, reward=float(self.rng.integers(2)),
                         terminated=True, graded=True)  # fmt: skip
            ep.turns.append(Turn(prompt, ids, [0.0] * len(ids)))
            ep.final_ids = self.policy.encode(f.observation)
            episodes.append(ep)
        _score_behaviour(self.policy, episodes)
        reward = sum(e.reward for e in episodes) / len(episodes)
        return episodes, {"reward/mean": reward, "resolve_rate": reward}


@torch.no_grad()
def _score_behaviour(policy: Policy, episodes: list[Episode]) -> None:
    """Fill the episodes' logprobs with the policy's (the behaviour logprobs)."""
    batch = collate(episodes, policy.tokenizer.pad_token_id).to(policy.device)
    logp = policy.score(batch.input_ids, batch.attention_mask, batch.action_mask).logp.cpu()
    for b, ep in enumerate(episodes):
        pos = torch.nonzero(batch.action_mask[b].cpu()).squeeze(-1).tolist()
        ep.turns[0].logprobs = [float(logp[b, p]) for p in pos]


@dataclass
class SimulatedWorkerFactory:
    """Workers whose episode *durations* are simulated (benchmarks and tests).

    Each group sleeps a log-normal time (``median_s * exp(N(0, sigma))``), then returns
    ``group_size`` one-turn episodes with a random action string from ``actions`` and a random
    0/1 reward. The behaviour logprobs are real: the worker scores the tokens with its own
    (possibly stale) copy of the policy. No environment runs.

    Attributes:
        model: Folder of the model the workers load when no template policy is given.
        median_s: Median group duration in seconds.
        sigma: Log-normal shape (0 gives a constant duration).
        group_size: Episodes per group.
        actions: Candidate action texts.
        prompt: The prompt text.
        observation: The observation after the action.
        seed: Seeds the durations, actions and rewards (offset by the worker id).
    """

    model: str = ""
    median_s: float = 0.2
    sigma: float = 0.8
    group_size: int = 4
    actions: tuple[str, ...] = ("fix 1\n", "fix 2\n", "fix 3\n", "submit\n")
    prompt: str = "task sim\n"
    observation: str = "Wrote 10 characters to a.py.\n"
    seed: int = 0

    def __call__(self, worker_id: int, template: Policy | None = None) -> _SimulatedWorker:
        policy = template or load_policy(self.model, device="cpu").requires_grad_(False)
        policy.value_head = None
        return _SimulatedWorker(policy.eval(), self, np.random.default_rng(self.seed + worker_id))


def model_weights(policy: Policy) -> dict[str, torch.Tensor]:
    """A CPU copy of the model's weights (the value head stays with the learner)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in policy.model.state_dict().items()}


def _worker_loop(factory: WorkerFactory, worker_id: int, template: Policy | None, inbox: Any,
                 outbox: Any, stop: Any) -> None:  # fmt: skip
    """Body of a thread or process worker: newest weights, one group, repeat until ``stop``."""
    try:
        worker = factory(worker_id, template)
    except Exception:  # noqa: BLE001 - reported to the learner, which raises it
        outbox.put(RolloutResult([], -1, worker_id, error=traceback.format_exc()))
        return
    try:
        version, index = -1, 0
        while not stop.is_set():
            try:
                item = inbox.get(timeout=0.05 if version >= 0 else 0.5)
                while True:  # drain to the newest weights
                    try:
                        item = inbox.get_nowait()
                    except queue.Empty:
                        break
                version = item[0]
                worker.policy.model.load_state_dict(item[1])
            except queue.Empty:
                pass
            if version >= 0:
                outbox.put(_run_one(worker, worker_id, version, index))
                index += 1
    finally:
        getattr(worker, "close", lambda: None)()


def _run_one(worker: RolloutWorker, worker_id: int, version: int, index: int) -> RolloutResult:
    """Run one group and tag it with ``version``; failures become an ``error`` result."""
    start = time.monotonic()
    try:
        episodes, metrics = worker.run(index)
    except Exception:  # noqa: BLE001 - reported to the learner, which raises it
        return RolloutResult([], version, worker_id, error=traceback.format_exc())
    for ep in episodes:
        ep.info["policy_version"] = version
    return RolloutResult(episodes, version, worker_id, time.monotonic() - start, metrics)


class LocalWorkers:
    """Rollout workers as threads or (spawned) processes, fed through queues."""

    def __init__(self, factory: WorkerFactory, num_workers: int, backend: Backend,
                 template: Policy | None) -> None:  # fmt: skip
        check_choice("backend", backend, Backend)
        if backend == "thread":
            ctx: Any = None
            self.outbox: Any = queue.Queue()
            self.stop: Any = threading.Event()
            self.inboxes: list[Any] = [queue.Queue() for _ in range(num_workers)]
        else:
            import torch.multiprocessing as tmp

            ctx = tmp.get_context("spawn")
            self.outbox, self.stop = ctx.Queue(), ctx.Event()
            self.inboxes = [ctx.Queue() for _ in range(num_workers)]
            template = None
        self.workers: list[Any] = []
        for i in range(num_workers):
            own = template.frozen_copy() if template is not None else None
            args = (factory, i, own, self.inboxes[i], self.outbox, self.stop)
            maker = threading.Thread if ctx is None else ctx.Process
            w = maker(target=_worker_loop, args=args, daemon=True, name=f"rollout-{i}")
            w.start()
            self.workers.append(w)

    def publish(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        """Send weights of ``version`` to every worker."""
        for inbox in self.inboxes:
            inbox.put((version, weights))

    def get(self, timeout: float = 600.0) -> RolloutResult:
        """The next finished group (raises a worker's error, or TimeoutError)."""
        try:
            result = self.outbox.get(timeout=timeout)
        except queue.Empty as e:
            raise TimeoutError(f"no rollout finished within {timeout:.0f}s") from e
        return _raise_error(result)

    def close(self) -> None:
        """Stop and join the workers (processes that do not stop are terminated)."""
        self.stop.set()
        deadline = time.monotonic() + 30
        for w in self.workers:
            while w.is_alive() and time.monotonic() < deadline:
                _drain(self.outbox)
                w.join(timeout=0.1)
            if w.is_alive() and hasattr(w, "terminate"):
                w.terminate()
                w.join(timeout=5)
        _drain(self.outbox)


def _drain(q: Any) -> None:
    try:
        while True:
            q.get_nowait()
    except (queue.Empty, OSError, ValueError):
        pass


def _raise_error(result: RolloutResult) -> RolloutResult:
    if result.error:
        raise RuntimeError(f"rollout worker {result.worker} failed:\n{result.error}")
    return result


class _RayActor:
    """A rollout worker as a Ray actor; calls run in order, so weights land between groups."""

    def __init__(self, factory: WorkerFactory, worker_id: int) -> None:
        self.worker = factory(worker_id, None)
        self.worker_id = worker_id
        self.version = -1

    def set_weights(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        self.worker.policy.model.load_state_dict(weights)
        self.version = version

    def run(self, index: int) -> RolloutResult:
        return _run_one(self.worker, self.worker_id, self.version, index)

    def close(self) -> None:
        getattr(self.worker, "close", lambda: None)()


class RayWorkers:
    """Rollout workers as Ray actors, one group in flight per actor (``address``: ``local``
    starts Ray here, else a cluster address; an actor may ask for GPUs with ``num_gpus``)."""

    def __init__(self, factory: WorkerFactory, num_workers: int, address: str,
                 num_gpus: float = 0.0) -> None:  # fmt: skip
        try:
            import ray
        except ImportError as e:
            raise RuntimeError("--ray needs Ray. Fix: pip install 'repogym[ray]'") from e
        self.ray = ray
        self.started = not ray.is_initialized()
        if self.started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address == "local":
                ray.init(num_cpus=max(2, num_workers), **kwargs)
            else:
                ray.init(address=address, **kwargs)
        actor_cls = ray.remote(num_cpus=0, num_gpus=num_gpus)(_RayActor)
        self.actors = [actor_cls.remote(factory, i) for i in range(num_workers)]
        self.pending: dict[Any, int] = {}
        self.index = 0

    def publish(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        """Queue the weights on every actor (they apply between groups), then keep each busy."""
        ref = self.ray.put(weights)
        for actor in self.actors:
            actor.set_weights.remote(version, ref)
        busy = set(self.pending.values())
        for i in range(len(self.actors)):
            if i not in busy:
                self._submit(i)

    def _submit(self, i: int) -> None:
        self.pending[self.actors[i].run.remote(self.index)] = i
        self.index += 1

    def get(self, timeout: float = 600.0) -> RolloutResult:
        """The next finished group; its actor starts the next one."""
        done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        if not done:
            raise TimeoutError(f"no rollout finished within {timeout:.0f}s")
        i = self.pending.pop(done[0])
        result = self.ray.get(done[0])
        self._submit(i)
        return _raise_error(result)

    def close(self) -> None:
        """Close the actors' environments, kill them; shut Ray down if this object started it."""
        if self.pending:
            self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=60)
        closing = [actor.close.remote() for actor in self.actors]
        self.ray.wait(closing, num_returns=len(closing), timeout=60)
        for actor in self.actors:
            self.ray.kill(actor)
        self.pending.clear()
        if self.started:
            self.ray.shutdown()


def make_workers(factory: WorkerFactory, num_workers: int, backend: Backend, ray: str | None,
                 template: Policy, num_gpus: float = 0.0) -> LocalWorkers | RayWorkers:  # fmt: skip
    """Ray actors if ``ray`` (``local`` or a cluster address) is set, else threads/processes."""
    if ray:
        return RayWorkers(factory, num_workers, ray, num_gpus)
    return LocalWorkers(factory, num_workers, backend, template)
