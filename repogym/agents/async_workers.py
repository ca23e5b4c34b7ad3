"""Rollout workers of the asynchronous actor/learner (:mod:`repogym.agents.async_rl`).

A worker owns a copy of the policy and its own environments. It runs one group of episodes
per **ticket** the learner grants (backpressure: with no ticket a worker waits instead of
producing groups that would be too stale to use), with the newest weights it has received;
it reports when it starts a group (:class:`Started`, with that policy version) and hands the
finished group to the learner as a :class:`RolloutResult` (its episodes tagged with
``info["policy_version"]``). Ticket ``t`` decides the group's task and seed, whichever worker
runs it. Workers run as threads or spawned processes (:class:`LocalWorkers`, fed through
queues) or Ray actors (:class:`RayWorkers`). What a worker runs is built by a picklable
factory: :class:`EnvWorkerFactory` (real RepoEnv episodes) or
:class:`repogym.agents.async_sim.SimulatedWorkerFactory` (simulated durations, for benchmarks
and tests).
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from repogym.agents.config import TrainConfig
from repogym.agents.engines import HFEngine
from repogym.agents.episode import Episode
from repogym.agents.losses import check_choice
from repogym.agents.policy import Policy, load_policy
from repogym.agents.rollout import EnvPool, EpisodeFormat, collect
from repogym.agents.sampling import step_tasks
from repogym.agents.shaping import default_max_len, shape_episodes

__all__ = [
    "Backend",
    "EnvWorkerFactory",
    "LocalWorkers",
    "RayWorkers",
    "RolloutResult",
    "RolloutWorker",
    "Started",
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
    ticket: int = -1


@dataclass
class Started:
    """A worker started the group of ``ticket`` with policy ``version``."""

    ticket: int
    version: int
    worker: int


Event = RolloutResult | Started


class RolloutWorker(Protocol):
    """What runs inside a worker: a policy to load weights into, and one group per call."""

    policy: Policy

    def run(self, ticket: int) -> tuple[list[Episode], dict[str, float]]:
        """Run the group of ``ticket`` (it fixes the task and seed); episodes and metrics."""
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

    def run(self, ticket: int) -> tuple[list[Episode], dict[str, float]]:
        cfg = self.config
        per_step = cfg.tasks_per_step or len(cfg.tasks)
        step, slot = divmod(ticket, per_step)
        task = step_tasks(cfg.tasks, cfg.tasks_per_step, step + 1, cfg.seed)[slot]
        engine = HFEngine(
            self.policy,
            self.fmt.stops,
            reuse_cache=cfg.reuse_cache,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
        )
        rollout = collect(
            engine,
            self.fmt,
            self.pool,
            [task],
            cfg.rollout,
            seed=cfg.seed + 1000 * ticket,
            max_context=self.policy.max_len,
        )
        metrics = rollout.metrics()
        if cfg.shaping is not None:
            metrics.update(
                shape_episodes(rollout.episodes, cfg.shaping, default_max_len(cfg.rollout))
            )
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
        policy = template or load_policy(
            cfg.model, device=cfg.device, dtype=cfg.dtype, temperature=cfg.temperature
        ).requires_grad_(False)
        policy.value_head = None
        return _EnvWorker(
            policy.eval(), self.fmt_factory(policy.tokenizer), EnvPool(cfg.rollout), cfg, worker_id
        )


def model_weights(policy: Policy) -> dict[str, torch.Tensor]:
    """A CPU copy of the model's weights (the value head stays with the learner)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in policy.model.state_dict().items()}


def _worker_loop(
    factory: WorkerFactory,
    worker_id: int,
    template: Policy | None,
    inbox: Any,
    tickets: Any,
    outbox: Any,
    stop: Any,
) -> None:
    """Body of a thread or process worker: take a ticket, load the newest weights, report the
    start, run the group, repeat until ``stop``."""
    try:
        worker = factory(worker_id, template)
    except Exception:
        outbox.put(RolloutResult([], -1, worker_id, error=traceback.format_exc()))
        return
    try:
        version = -1
        while not stop.is_set():
            version = _newest(inbox, worker, version, wait=0.05 if version >= 0 else 0.5)
            if version < 0:
                continue
            try:
                ticket, min_version = tickets.get(timeout=0.05)
            except queue.Empty:
                continue
            version = _newest(inbox, worker, version, wait=0.0)
            while version < min_version and not stop.is_set():  # the push is on its way
                version = _newest(inbox, worker, version, wait=0.05)
            outbox.put(Started(ticket, version, worker_id))
            outbox.put(_run_one(worker, worker_id, version, ticket))
    finally:
        getattr(worker, "close", lambda: None)()


def _newest(inbox: Any, worker: RolloutWorker, version: int, wait: float) -> int:
    """Load the newest weights waiting in ``inbox`` (if any); returns the version held."""
    item = None
    try:
        item = inbox.get(timeout=wait) if wait else inbox.get_nowait()
        while True:
            item = inbox.get_nowait()
    except queue.Empty:
        pass
    if item is None:
        return version
    worker.policy.model.load_state_dict(item[1])
    return item[0]


def _run_one(worker: RolloutWorker, worker_id: int, version: int, ticket: int) -> RolloutResult:
    """Run one group and tag it with ``version``; failures become an ``error`` result."""
    start = time.monotonic()
    try:
        episodes, metrics = worker.run(ticket)
    except Exception:
        return RolloutResult([], version, worker_id, error=traceback.format_exc(), ticket=ticket)
    for ep in episodes:
        ep.info["policy_version"] = version
    return RolloutResult(
        episodes, version, worker_id, time.monotonic() - start, metrics, ticket=ticket
    )


class LocalWorkers:
    """Rollout workers as threads or (spawned) processes, fed through queues."""

    def __init__(
        self, factory: WorkerFactory, num_workers: int, backend: Backend, template: Policy | None
    ) -> None:
        check_choice("backend", backend, Backend)
        if backend == "thread":
            ctx: Any = None
            self.outbox: Any = queue.Queue()
            self.tickets: Any = queue.Queue()
            self.stop: Any = threading.Event()
            self.inboxes: list[Any] = [queue.Queue() for _ in range(num_workers)]
        else:
            import torch.multiprocessing as tmp

            ctx = tmp.get_context("spawn")
            self.outbox, self.tickets, self.stop = ctx.Queue(), ctx.Queue(), ctx.Event()
            self.inboxes = [ctx.Queue() for _ in range(num_workers)]
            template = None
        self.workers: list[Any] = []
        for i in range(num_workers):
            own = template.frozen_copy() if template is not None else None
            args = (factory, i, own, self.inboxes[i], self.tickets, self.outbox, self.stop)
            maker = threading.Thread if ctx is None else ctx.Process
            w = maker(target=_worker_loop, args=args, daemon=True, name=f"rollout-{i}")
            w.start()
            self.workers.append(w)

    def publish(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        """Send weights of ``version`` to every worker."""
        for inbox in self.inboxes:
            inbox.put((version, weights))

    def grant(self, tickets: Iterable[int], min_version: int = -1) -> None:
        """Allow one more group per ticket (taken in order), started with weights of at least
        ``min_version``."""
        for t in tickets:
            self.tickets.put((t, min_version))

    def next_event(self, timeout: float) -> Event | None:
        """The next start or finished group (None after ``timeout``; a worker's error raises)."""
        try:
            event = self.outbox.get(timeout=timeout) if timeout > 0 else self.outbox.get_nowait()
        except queue.Empty:
            return None
        return _raise_error(event) if isinstance(event, RolloutResult) else event

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
        _drain(self.tickets)


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

    def run(self, ticket: int) -> RolloutResult:
        return _run_one(self.worker, self.worker_id, self.version, ticket)

    def close(self) -> None:
        getattr(self.worker, "close", lambda: None)()


class RayWorkers:
    """Rollout workers as Ray actors, one group in flight per actor, one per granted ticket
    (``address``: ``local`` starts Ray here, else a cluster address; an actor may ask for GPUs
    with ``num_gpus``). An actor's version is the last one published before its run call
    (calls to an actor run in order)."""

    def __init__(
        self, factory: WorkerFactory, num_workers: int, address: str, num_gpus: float = 0.0
    ) -> None:
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
        self.tickets: collections.deque[int] = collections.deque()
        self.events: collections.deque[Event] = collections.deque()
        self.version = -1

    def publish(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        """Queue the weights on every actor (they apply between groups)."""
        ref = self.ray.put(weights)
        for actor in self.actors:
            actor.set_weights.remote(version, ref)
        self.version = version
        self._fill()

    def grant(self, tickets: Iterable[int], min_version: int = -1) -> None:
        """Allow one more group per ticket; idle actors start at once (an actor runs with the
        newest published weights, at least ``min_version``)."""
        self.tickets.extend(tickets)
        self._fill()

    def _fill(self) -> None:
        busy = set(self.pending.values())
        for i in range(len(self.actors)):
            if i not in busy and self.tickets and self.version >= 0:
                ticket = self.tickets.popleft()
                self.pending[self.actors[i].run.remote(ticket)] = i
                self.events.append(Started(ticket, self.version, i))

    def next_event(self, timeout: float) -> Event | None:
        """The next start or finished group (None after ``timeout``)."""
        if self.events:
            return self.events.popleft()
        if not self.pending:
            time.sleep(min(timeout, 0.05))
            return None
        done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        if not done:
            return None
        self.pending.pop(done[0])
        result = self.ray.get(done[0])
        self._fill()
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


def make_workers(
    factory: WorkerFactory,
    num_workers: int,
    backend: Backend,
    ray: str | None,
    template: Policy,
    num_gpus: float = 0.0,
) -> LocalWorkers | RayWorkers:
    """Ray actors if ``ray`` (``local`` or a cluster address) is set, else threads/processes."""
    if ray:
        return RayWorkers(factory, num_workers, ray, num_gpus)
    return LocalWorkers(factory, num_workers, backend, template)
