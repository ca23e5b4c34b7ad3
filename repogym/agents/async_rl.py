"""Asynchronous actor/learner RL with bounded staleness and importance-sampling corrections.

Agent rollouts are slow and uneven (one episode waits on a 30 s test suite, the next submits at
once), so a synchronous trainer's learner idles while the slowest episode of a batch finishes,
and the rollout workers idle while the learner updates. Here rollout workers generate with
policy version ``v`` while the learner updates:

- every worker owns a copy of the policy and its own environments; it runs one group of
  episodes at a time with the newest weights it has received and tags each episode with that
  version (``info["policy_version"]``); the behaviour log-probability of every sampled token is
  stored with it (``Turn.action_logprobs`` -> ``Batch.old_logp``);
- the learner takes ``groups_per_step`` finished groups per update; an episode generated with
  version ``v`` and used at learner version ``u`` has staleness ``u - v``; groups older than
  ``max_staleness`` are dropped and counted (``staleness/dropped``);
- the learner pushes its weights to the workers every ``sync_every`` updates.

Workers run as threads (``backend="thread"``), processes (``"process"``) or Ray actors
(``ray="local"`` or a cluster address). The learner's loss corrects for the gap between the
behaviour policy ``mu`` (the worker's version) and the policy being trained, with ``r_t =
pi(a_t) / mu(a_t)`` (:func:`async_policy_loss`, ``correction=``):

- ``tis``: token-level truncated importance sampling, ``-sg(min(r_t, C)) A log pi(a_t)``
  (IMPALA/V-trace's truncation; no extra forward pass);
- ``seq``: the length-normalised sequence ratio ``s = exp(mean_t log r_t)`` in PPO's clipped
  surrogate (GSPO's ratio, taken to the behaviour policy);
- ``decoupled``: decoupled PPO (Hilton et al. 2021; AReaL): the clipped ratio is taken to a
  *proximal* policy (the learner's weights before this update), and the behaviour weight
  ``sg(pi_prox / mu)`` (capped at ``C`` if ``is_cap`` is set) multiplies each token's term;
- ``product``: the plain product of token ratios ``prod_t r_t`` (sequence-level IS). Unsafe:
  it is here to show the failure it causes (weights in the hundreds and more on long, stale
  action sequences); ``is_weight/max`` exposes it;
- ``none``: PPO's clipped ratio to the behaviour policy (what a synchronous trainer does).

Metrics: ``staleness/mean``, ``staleness/max``, ``staleness/dropped``, ``is_weight/max``,
``is_weight/mean``, ``is_weight/ess`` (effective sample size ``(sum w)^2 / (n sum w^2)`` as a
fraction of ``n``), ``async/learner_idle_frac``, ``throughput/episodes_per_s``.

Run it: ``repogym train --algo async --model tiny --steps 20 --out runs/async``
(``--ray local`` for Ray actors; ``--set correction=tis --set max_staleness=4``).
"""

from __future__ import annotations

import argparse
import dataclasses
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

import numpy as np
import torch

from repogym.agents.common import (
    TrainConfig,
    Trainer,
    assemble_loss,
    autocast,
    build_interface,
    build_policy,
    clip_and_step,
    make_pool,
    mean_metrics,
)
from repogym.agents.grpo import GRPOConfig, GRPOTrainer, batch_advantages
from repogym.agents.losses import LOG_RATIO_CLAMP, aggregate, kl, policy_loss
from repogym.agents.policy import Batch, Episode, Policy, Scores, Turn, collate
from repogym.agents.rollout import collect
from repogym.agents.shaping import ShapingConfig, default_max_len, shape_episodes

__all__ = [
    "AsyncConfig",
    "AsyncOptions",
    "AsyncTrainer",
    "Correction",
    "EnvWorkerFactory",
    "RolloutResult",
    "SimulatedWorkerFactory",
    "async_policy_loss",
    "behaviour_weights",
    "filter_stale",
    "model_weights",
    "sequence_ratio",
    "token_is_weights",
    "train_async",
    "train_async_option",
    "weight_metrics",
]

Correction = Literal["tis", "seq", "decoupled", "product", "none"]
Backend = Literal["thread", "process"]


# --------------------------------------------------------------------------------------------
# Corrections (pure functions)
# --------------------------------------------------------------------------------------------


def _check(name: str, value: str, literal: object) -> None:
    if value not in get_args(literal):
        raise ValueError(
            f"unknown {name} {value!r}; expected one of {', '.join(map(repr, get_args(literal)))}"
        )


def token_is_weights(
    logp: torch.Tensor, behav_logp: torch.Tensor, cap: float | None = None
) -> torch.Tensor:
    """Per-token importance weights ``min(exp(logp - behav_logp), cap)``, without gradient.

    Args:
        logp: Log-probabilities of the taken tokens under the target policy ``[B, T]``.
        behav_logp: The same under the behaviour policy that sampled them.
        cap: Truncation ``C`` (None: untruncated).

    Returns:
        ``[B, T]`` weights (log ratios clamped to +-20 before ``exp``).
    """
    log_ratio = (logp - behav_logp).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    weights = log_ratio.exp()
    return weights if cap is None else weights.clamp(max=cap)


def sequence_ratio(
    logp: torch.Tensor, behav_logp: torch.Tensor, mask: torch.Tensor, *, normalise: bool = True
) -> torch.Tensor:
    """Per-sequence ratio over the masked tokens, without gradient.

    ``normalise=True``: the length-normalised (geometric-mean) ratio
    ``exp(mean_t (logp - behav_logp))``; ``False``: the plain product ``exp(sum_t ...)``,
    whose spread grows with the sequence length.

    Returns:
        ``[B]`` ratios (the log clamped to +-20 before ``exp``; 1 for an empty sequence).
    """
    mask = mask.to(logp.dtype)
    total = ((logp - behav_logp).detach() * mask).sum(-1)
    if normalise:
        total = total / mask.sum(-1).clamp(min=1.0)
    return total.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp()


def weight_metrics(weights: torch.Tensor, cap: float | None = None) -> dict[str, float]:
    """``is_weight/max``, ``is_weight/mean``, ``is_weight/ess`` (and ``/truncated_frac``).

    ESS is Kish's effective sample size ``(sum w)^2 / sum w^2`` as a fraction of ``n``: 1 when
    every weight is equal, ``1/n`` when one weight dominates.

    Args:
        weights: The (untruncated) weights the loss uses, one per token or per sequence.
        cap: If given, also report the fraction of weights above it.
    """
    w = weights.detach().double().flatten()
    if w.numel() == 0:
        return {"is_weight/max": 0.0, "is_weight/mean": 0.0, "is_weight/ess": 0.0}
    out = {
        "is_weight/max": float(w.max()),
        "is_weight/mean": float(w.mean()),
        "is_weight/ess": float(w.sum() ** 2 / (w.numel() * w.square().sum()).clamp(min=1e-300)),
    }
    if cap is not None:
        out["is_weight/truncated_frac"] = float((w > cap).double().mean())
    return out


def behaviour_weights(
    prox_logp: torch.Tensor,
    behav_logp: torch.Tensor,
    mask: torch.Tensor,
    correction: Correction,
    cap: float | None = None,
) -> torch.Tensor:
    """The per-token behaviour weight ``w`` of the decoupled objective ``w * clip_ppo(pi/pi_prox)``.

    ``tis`` and ``decoupled``: ``min(pi_prox / mu, C)`` per token (``C = cap``); ``seq``:
    ``min(exp(mean_t log(pi_prox / mu)), C)`` per sequence, spread over its tokens; ``none``: 1.
    This is how the GRPO and PPO trainers' ``async_`` option corrects (their loss is PPO's
    clipped ratio to the recomputed old = proximal policy; see :func:`train_async`).

    Returns:
        ``[B, T]`` weights, 0 outside ``mask``.
    """
    _check("correction", correction, Correction)
    if correction == "product":
        raise ValueError(
            "correction 'product' is the unsafe reference for the loss demo only. Fix: use "
            "'tis', 'seq' or 'decoupled' with a trainer's async_ option"
        )
    if correction == "none":
        weights = torch.ones_like(prox_logp)
    elif correction == "seq":
        seq = sequence_ratio(prox_logp, behav_logp, mask)
        weights = (seq if cap is None else seq.clamp(max=cap))[:, None].expand_as(prox_logp)
    else:
        weights = token_is_weights(prox_logp, behav_logp, cap)
    return weights * mask.to(weights.dtype)


def async_policy_loss(
    logp: torch.Tensor,
    behav_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    correction: Correction = "decoupled",
    cap: float | None = 2.0,
    prox_logp: torch.Tensor | None = None,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: str = "token_mean",
    **norm: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Off-policy-corrected policy loss (to minimise) and its metrics.

    With ``r_t = exp(logp_t - behav_logp_t)`` and per-token advantages ``A_t``:

    - ``tis``: ``-sg(min(r_t, C)) A_t logp_t``; gradient ``-min(r_t, C) A_t grad logp_t``.
    - ``seq``: PPO's clipped surrogate with GSPO's ratio ``exp(mean_t log r_t)`` to the
      behaviour policy (:func:`repogym.agents.losses.policy_loss` ``kind="gspo"``).
    - ``decoupled``: ``w_t * max(-rho_t A_t, -clip(rho_t) A_t)`` with ``rho_t = pi/pi_prox``
      and ``w_t = sg(pi_prox/mu)`` (capped at ``C`` unless ``cap=None``); at ``pi = pi_prox``
      the gradient is ``-w_t A_t grad logp_t``. Needs ``prox_logp``.
    - ``product``: ``-sg(prod_t r_t) A_t logp_t`` (unsafe; for the demonstration).
    - ``none``: PPO's clipped ratio to the behaviour policy.

    Args:
        logp: Current log-probabilities of the taken tokens ``[B, T]`` (with gradient).
        behav_logp: Behaviour (sampling) log-probabilities ``[B, T]``.
        advantages: ``[B]`` or ``[B, T]``.
        mask: 1 on tokens in the loss ``[B, T]``.
        correction: See above.
        cap: Truncation ``C`` for ``tis`` and ``decoupled`` (None: no truncation).
        prox_logp: Proximal policy log-probabilities (``decoupled`` only).
        eps_low: Lower clip range of the clipped surrogates.
        eps_high: Upper clip range.
        agg: Aggregation (see :func:`repogym.agents.losses.aggregate`).
        **norm: ``global_num_tokens``, ``global_num_seqs``, ``norm_len`` for micro-batching.

    Returns:
        ``(loss, metrics)``; ``is_weight/*`` describe the *untruncated* weights (per token, or
        per sequence for ``seq``/``product``), so a blow-up shows even when the cap tames it.

    Raises:
        ValueError: For an unknown correction, or ``decoupled`` without ``prox_logp``.
    """
    _check("correction", correction, Correction)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    adv = adv.expand_as(logp)
    m = mask.bool()
    clip = {"eps_low": eps_low, "eps_high": eps_high, "agg": agg, **norm}
    if correction in ("none", "seq"):
        kind = "gspo" if correction == "seq" else "ppo"
        loss, metrics = policy_loss(logp, behav_logp, adv, mask, kind=kind, **clip)
        raw = sequence_ratio(logp, behav_logp, mask) if kind == "gspo" else None
        rows = m.any(-1)
        weights = raw[rows] if raw is not None else token_is_weights(logp, behav_logp)[m]
        return loss, {**metrics, **weight_metrics(weights)}
    if correction == "decoupled":
        if prox_logp is None:
            raise ValueError(
                "correction 'decoupled' needs prox_logp (the proximal policy's logprobs: score "
                "the batch with the learner's weights before the update)"
            )
        raw = token_is_weights(prox_logp, behav_logp)
        w = raw if cap is None else raw.clamp(max=cap)
        loss, metrics = policy_loss(logp, prox_logp, adv * w, mask, kind="ppo", **clip)
        return loss, {**metrics, **weight_metrics(raw[m], cap)}
    if correction == "tis":
        raw = token_is_weights(logp, behav_logp)
        w = raw if cap is None else raw.clamp(max=cap)
        stats = weight_metrics(raw[m], cap)
    else:  # product
        seq = sequence_ratio(logp, behav_logp, mask, normalise=False)
        w = seq[:, None].expand_as(logp)
        stats = weight_metrics(seq[m.any(-1)])
    loss = aggregate(-w * adv * logp, mask, agg, **norm)  # type: ignore[arg-type]
    log_ratio = (logp - behav_logp).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    k3 = (torch.expm1(log_ratio) - log_ratio)[m]
    return loss, {**stats, "approx_kl": float(k3.mean()) if k3.numel() else 0.0}


# --------------------------------------------------------------------------------------------
# Staleness
# --------------------------------------------------------------------------------------------


@dataclass
class RolloutResult:
    """One group of episodes from a worker.

    Attributes:
        episodes: The episodes (each with ``info["policy_version"]``).
        version: Policy version the worker generated them with.
        worker: Worker index.
        seconds: Wall time of the rollout.
        metrics: The rollout's metrics (``reward/mean``, ``resolve_rate``, ...).
        error: A worker's traceback, if it failed (the learner raises it).
    """

    episodes: list[Episode]
    version: int
    worker: int
    seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def filter_stale(
    results: list[RolloutResult], version: int, max_staleness: int
) -> tuple[list[RolloutResult], int, list[int]]:
    """Split results into usable ones and the count of episodes too old to use.

    Args:
        results: Finished rollouts.
        version: The learner's current policy version.
        max_staleness: Largest ``version - result.version`` that may be used.

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


# --------------------------------------------------------------------------------------------
# Workers
# --------------------------------------------------------------------------------------------


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
    """A worker that samples real episodes in its own environments."""

    policy: Policy
    interface: Any
    pool: Any
    config: TrainConfig
    worker_id: int

    def run(self, index: int) -> tuple[list[Episode], dict[str, float]]:
        tasks = list(self.config.tasks)
        task = tasks[index % len(tasks)]
        self.policy.eval()
        rollout = collect(self.policy, self.interface, self.pool, [task], self.config.rollout,
                          seed=self.config.seed + 7919 * self.worker_id + 1000 * index)  # fmt: skip
        metrics = rollout.metrics()
        shaping = getattr(self.config, "shaping", None)
        if shaping is not None:
            metrics.update(shape_episodes(rollout.episodes, shaping,
                                          default_max_len(self.config.rollout)))  # fmt: skip
        return rollout.episodes, metrics

    def close(self) -> None:
        """Close the worker's environments."""
        self.pool.close()


@dataclass
class EnvWorkerFactory:
    """Builds workers that run real RepoEnv episodes (picklable: rebuilt in processes/actors).

    Attributes:
        config: The trainer's config (model, tasks, interface, rollout settings).
    """

    config: TrainConfig

    def __call__(self, worker_id: int, template: Policy | None = None) -> _EnvWorker:
        interface = build_interface(self.config)
        if template is not None:
            policy = template
        else:
            policy = build_policy(self.config, interface, value_head=False).requires_grad_(False)
        policy.value_head = None
        return _EnvWorker(policy.eval(), interface, make_pool(self.config), self.config, worker_id)


@dataclass
class _SimulatedWorker:
    policy: Policy
    factory: SimulatedWorkerFactory
    rng: np.random.Generator

    def run(self, index: int) -> tuple[list[Episode], dict[str, float]]:
        f = self.factory
        time.sleep(f.median_s * float(self.rng.lognormal(0.0, f.sigma)))
        episodes = []
        for g in range(f.group_size):
            actions = f.actions[int(self.rng.integers(len(f.actions)))]
            ids = self.policy.encode(actions)
            ep = Episode(task="sim", prompt=f.prompt, reward=float(self.rng.integers(2)))
            ep.turns.append(Turn(ids, [0.0] * len(ids), f.observation))
            episodes.append(ep)
        _score_behaviour(self.policy, episodes)
        reward = sum(e.reward for e in episodes) / len(episodes)
        return episodes, {"reward/mean": reward, "resolve_rate": reward}


@torch.no_grad()
def _score_behaviour(policy: Policy, episodes: list[Episode]) -> None:
    """Fill the episodes' action logprobs with the policy's (the behaviour logprobs)."""
    batch = collate(policy.tokenizer, episodes).to(policy.device)
    logp = policy.score(batch.input_ids, batch.attention_mask).logp.cpu()
    for b, ep in enumerate(episodes):
        pos = torch.nonzero(batch.action_mask[b].cpu()).squeeze(-1).tolist()
        ep.turns[0].action_logprobs = [float(logp[b, p]) for p in pos]


@dataclass
class SimulatedWorkerFactory:
    """Workers whose episode *durations* are simulated (benchmarks and tests).

    Each group sleeps a log-normal time (``median_s * exp(N(0, sigma))``: with ``sigma = 0.8``
    about 1 episode in 20 takes over 4x the median), then returns ``group_size`` one-turn
    episodes with a random action string from ``actions`` and a random 0/1 reward. The
    behaviour logprobs are real: the worker scores the tokens with its own (possibly stale)
    copy of the policy. No environment runs.

    Attributes:
        median_s: Median episode duration in seconds.
        sigma: Log-normal shape (0 gives a constant duration).
        group_size: Episodes per group.
        actions: Candidate action texts.
        prompt: The prompt text.
        observation: The observation after the action.
        seed: Seeds the durations, actions and rewards (offset by the worker id).
        model_seed: Seed of the tiny model built when no template policy is given.
    """

    median_s: float = 0.2
    sigma: float = 0.8
    group_size: int = 4
    actions: tuple[str, ...] = ("fix 1\n", "fix 2\n", "fix 3\n", "submit\n")
    prompt: str = "task sim\n"
    observation: str = "Wrote 10 characters to a.py.\n"
    seed: int = 0
    model_seed: int = 0

    def build_policy(self) -> Policy:
        """The tiny policy the workers build (use it for the learner too: same tokenizer)."""
        from repogym.agents.policy import load_policy

        return load_policy("tiny", device="cpu", stop=["\n"], tiny_corpus=list(self.actions),
                           seed=self.model_seed)  # fmt: skip

    def __call__(self, worker_id: int, template: Policy | None = None) -> _SimulatedWorker:
        policy = template if template is not None else self.build_policy().requires_grad_(False)
        policy.value_head = None
        return _SimulatedWorker(policy.eval(), self, np.random.default_rng(self.seed + worker_id))


def model_weights(policy: Policy) -> dict[str, torch.Tensor]:
    """A CPU copy of the model's weights (the value head stays with the learner)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in policy.model.state_dict().items()}


def _worker_loop(
    factory: WorkerFactory,
    worker_id: int,
    template: Policy | None,
    inbox: Any,
    outbox: Any,
    stop: Any,
) -> None:
    """Body of a thread or process worker: newest weights, one group, repeat until ``stop``."""
    try:
        worker = factory(worker_id, template)
    except Exception:  # noqa: BLE001 - reported to the learner, which raises it
        outbox.put(RolloutResult([], -1, worker_id, error=traceback.format_exc()))
        return
    try:
        _serve(worker, worker_id, inbox, outbox, stop)
    finally:
        getattr(worker, "close", lambda: None)()


def _serve(worker: RolloutWorker, worker_id: int, inbox: Any, outbox: Any, stop: Any) -> None:
    """Newest weights, one group, repeat until ``stop``."""
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
        if version < 0:
            continue
        outbox.put(_run_one(worker, worker_id, version, index))
        index += 1


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
    """Rollout workers as threads or (spawned) processes, fed through queues.

    Args:
        factory: Builds each worker (must be picklable for processes).
        num_workers: How many.
        backend: ``thread`` or ``process``.
        template: A policy the thread workers copy (processes build their own).
    """

    def __init__(
        self, factory: WorkerFactory, num_workers: int, backend: Backend, template: Policy | None
    ) -> None:
        _check("backend", backend, Backend)
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
            target_args = (factory, i, own, self.inboxes[i], self.outbox, self.stop)
            maker = threading.Thread if ctx is None else ctx.Process
            w = maker(target=_worker_loop, args=target_args, daemon=True, name=f"rollout-{i}")
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
    """Rollout workers as Ray actors, one group in flight per actor.

    Args:
        factory: Builds each worker inside its actor (picklable).
        num_workers: How many actors.
        address: ``local`` starts Ray here (``num_cpus=max(2, num_workers)``), else a cluster
            address.
    """

    def __init__(self, factory: WorkerFactory, num_workers: int, address: str) -> None:
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
        actor_cls = ray.remote(num_cpus=0)(_RayActor)
        self.actors = [actor_cls.remote(factory, i) for i in range(num_workers)]
        self.pending: dict[Any, int] = {}
        self.index = 0

    def publish(self, version: int, weights: dict[str, torch.Tensor]) -> None:
        """Queue the weights on every actor (they apply between groups), then keep each busy."""
        ref = self.ray.put(weights)
        for actor in self.actors:
            actor.set_weights.remote(version, ref)
        busy = set(self.pending.values())
        for i, actor in enumerate(self.actors):
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


# --------------------------------------------------------------------------------------------
# The learner loop
# --------------------------------------------------------------------------------------------


@dataclass
class AsyncOptions:
    """Actor/learner settings (the ``async_`` option of the GRPO and PPO trainers).

    Attributes:
        num_workers: Rollout workers.
        backend: ``thread`` or ``process`` (ignored when ``ray`` is set).
        ray: None, ``local`` (start Ray here) or a Ray cluster address: workers are actors.
        sync_every: Push the learner's weights to the workers every this many updates (K).
        max_staleness: Oldest usable group, in learner updates; older ones are dropped.
        correction: Off-policy correction (see the module docstring).
        is_cap: Truncation ``C`` of the importance weights (None: untruncated).
        groups_per_step: Groups per update (None: one per task).
        timeout_s: Longest wait for one group before failing.
    """

    num_workers: int = 2
    backend: Backend = "thread"
    ray: str | None = None
    sync_every: int = 1
    max_staleness: int = 2
    correction: Correction = "decoupled"
    is_cap: float | None = 2.0
    groups_per_step: int | None = None
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        _check("correction", self.correction, Correction)
        _check("backend", self.backend, Backend)
        if self.num_workers < 1 or self.sync_every < 1 or self.max_staleness < 0:
            raise ValueError(
                f"need num_workers >= 1, sync_every >= 1, max_staleness >= 0; got "
                f"{self.num_workers}, {self.sync_every}, {self.max_staleness}"
            )


def _make_workers(
    opts: AsyncOptions, factory: WorkerFactory, template: Policy
) -> LocalWorkers | RayWorkers:
    if opts.ray:
        return RayWorkers(factory, opts.num_workers, opts.ray)
    return LocalWorkers(factory, opts.num_workers, opts.backend, template)


def iterate_async(
    policy: Policy,
    opts: AsyncOptions,
    factory: WorkerFactory,
    update: Callable[[Batch], dict[str, float]],
    steps: int,
    groups_per_step: int,
) -> Iterator[dict[str, float]]:
    """Run ``steps`` asynchronous learner updates; yields each step's metrics.

    The learner waits for ``groups_per_step`` groups no older than ``max_staleness``, drops
    older ones (counted), collates them (behaviour logprobs in ``Batch.old_logp``), calls
    ``update`` and pushes new weights every ``sync_every`` updates.
    """
    workers = _make_workers(opts, factory, policy)
    version, dropped_total = 0, 0
    try:
        workers.publish(version, model_weights(policy))
        for _ in range(steps):
            start = time.monotonic()
            kept, ages, dropped = [], [], 0
            while len(kept) < groups_per_step:
                fresh, n_drop, age = filter_stale(
                    [workers.get(opts.timeout_s)], version, opts.max_staleness
                )
                kept += fresh
                ages += age
                dropped += n_drop
            waited = time.monotonic() - start
            episodes = _regroup(kept)
            metrics = mean_metrics([r.metrics for r in kept])
            batch = collate(policy.tokenizer, episodes)
            if batch.num_action_tokens:
                metrics.update(update(batch))
            version += 1
            if version % opts.sync_every == 0:
                workers.publish(version, model_weights(policy))
            dropped_total += dropped
            elapsed = max(time.monotonic() - start, 1e-9)
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
    trainer: Trainer,
    opts: AsyncOptions,
    *,
    steps: int | None = None,
    factory: WorkerFactory | None = None,
    log: bool = True,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Train any :class:`repogym.agents.common.Trainer` (GRPO, PPO, ...) asynchronously.

    The trainer's own ``update`` is the learner step. For trainers whose loss is PPO's clip
    to the recomputed old (= proximal) policy, the correction enters as
    ``batch.extras["behaviour_weight"]`` from :func:`behaviour_weights`, which their loss
    multiplies into the advantages: the decoupled objective (with token or sequence weights).
    An :class:`AsyncTrainer` computes its own corrected loss instead.

    Args:
        trainer: The trainer (its policy, config and ``update``).
        opts: Actor/learner settings.
        steps: Updates (default ``trainer.config.steps``).
        factory: Builds the workers (default: real environments, :class:`EnvWorkerFactory`).
        log: Write ``OUT/metrics.jsonl``, ``OUT/config.json`` and a final checkpoint.
        on_step: Called with ``(step, metrics)`` after each update.

    Returns:
        Every step's metrics.
    """
    from repogym.agents.common import MetricsLogger, save_checkpoint, write_config

    config = trainer.config
    steps = config.steps if steps is None else steps
    factory = factory or EnvWorkerFactory(config)
    groups = opts.groups_per_step or len(config.tasks)
    if not trainer.warm_started:
        trainer.warm_start()
    update = trainer.update if isinstance(trainer, AsyncTrainer) else _weighted(trainer, opts)
    logger = MetricsLogger(config.out) if log else None
    if log:
        write_config(config, config.out)
    history: list[dict[str, float]] = []
    try:
        loop = iterate_async(trainer.policy, opts, factory, update, steps, groups)
        for step, metrics in enumerate(loop, start=1):
            history.append(metrics)
            if logger is not None:
                logger.log(step, metrics)
            if on_step is not None:
                on_step(step, metrics)
        if log:
            save_checkpoint(trainer.policy, config.out, steps)
    finally:
        if logger is not None:
            logger.close()
    return history


def train_async_option(
    trainer: Trainer, steps: int | None = None, **kwargs: Any
) -> list[dict[str, float]]:
    """The ``async_`` option of the GRPO and PPO trainers: :func:`train_async` with the
    :class:`AsyncOptions` in ``trainer.config.async_`` (True: the defaults)."""
    value = trainer.config.async_  # type: ignore[attr-defined]
    opts = AsyncOptions() if value is True else AsyncOptions(**dict(value))
    if opts.correction == "product":
        raise ValueError("async_ correction 'product' is unsafe. Fix: use 'tis', 'seq' or "
                         "'decoupled'")  # fmt: skip
    if not getattr(trainer.config, "recompute_old_logp", True):
        raise ValueError(
            "async_ needs recompute_old_logp=True: the trainer's clipped ratio is taken to the "
            "recomputed (proximal) policy and the behaviour weight corrects for staleness"
        )
    return train_async(trainer, opts, steps=steps, **kwargs)


def _weighted(trainer: Trainer, opts: AsyncOptions) -> Callable[[Batch], dict[str, float]]:
    """``trainer.update`` with the behaviour weights of ``opts.correction`` in the batch."""

    def update(batch: Batch) -> dict[str, float]:
        prox = _score(trainer.policy, batch, trainer.config)
        weights = behaviour_weights(prox, batch.old_logp, batch.action_mask, opts.correction,
                                    opts.is_cap)  # fmt: skip
        batch.extras["behaviour_weight"] = weights
        raw = behaviour_weights(prox, batch.old_logp, batch.action_mask, opts.correction)
        sel = batch.action_mask.bool()
        metrics = trainer.update(batch)
        return {**metrics, **weight_metrics(raw[sel], opts.is_cap)}

    return update


@torch.no_grad()
def _score(policy: Policy, batch: Batch, config: TrainConfig) -> torch.Tensor:
    """The policy's logprobs of the batch (no gradient), on the CPU."""
    out = []
    for mb in batch.split(config.micro_batch):
        mb = mb.to(policy.device)
        with autocast(policy.device, config.bf16):
            out.append(policy.score(mb.input_ids, mb.attention_mask).logp.float().cpu())
    return torch.cat(out)


# --------------------------------------------------------------------------------------------
# The --algo async trainer
# --------------------------------------------------------------------------------------------


@dataclass
class AsyncConfig(GRPOConfig):
    """``--algo async``: GRPO-style advantages, asynchronous workers, corrected loss.

    Attributes (besides :class:`repogym.agents.grpo.GRPOConfig`'s; see :class:`AsyncOptions`):
        num_workers: Rollout workers.
        backend: ``thread`` or ``process``.
        ray: None, ``local`` or a Ray cluster address.
        sync_every: Weight push interval K in updates.
        max_staleness: Oldest usable group in updates.
        correction: ``tis``, ``seq``, ``decoupled``, ``product`` or ``none``.
        is_cap: Truncation C.
        groups_per_step: Groups per update (None: one per task).
        shaping: Reward shaping applied by the workers
            (:class:`repogym.agents.shaping.ShapingConfig` or its dict; None: the env's reward).
    """

    epochs: int = 1
    num_workers: int = 2
    backend: Backend = "thread"
    ray: str | None = None
    sync_every: int = 1
    max_staleness: int = 2
    correction: Correction = "decoupled"
    is_cap: float | None = 2.0
    groups_per_step: int | None = None
    shaping: ShapingConfig | dict | None = None

    def options(self) -> AsyncOptions:
        """The actor/learner settings of this config."""
        names = {f.name for f in dataclasses.fields(AsyncOptions)}
        return AsyncOptions(**{k: getattr(self, k) for k in names if hasattr(self, k)})

    def __post_init__(self) -> None:
        super().__post_init__()
        self.shaping = ShapingConfig.coerce(self.shaping)
        self.options()  # validates


class AsyncTrainer(GRPOTrainer):
    """Asynchronous actor/learner trainer with an off-policy-corrected loss.

    Args:
        config: :class:`AsyncConfig`.
        factory: Worker factory (default: real environments).
        **kwargs: ``policy``, ``interface``, ``pool``, ``extra_terms`` as for every trainer.
    """

    config: AsyncConfig

    def __init__(
        self, config: AsyncConfig, *, factory: WorkerFactory | None = None, **kwargs: Any
    ) -> None:
        super().__init__(config, **kwargs)
        self.factory = factory

    def train(self, steps: int | None = None, *, log: bool = True,
              on_step: Callable[[int, dict[str, float]], None] | None = None,
              ) -> list[dict[str, float]]:  # fmt: skip
        """Run ``steps`` asynchronous updates (see :func:`train_async`)."""
        return train_async(self, self.config.options(), steps=steps, factory=self.factory,
                           log=log, on_step=on_step)  # fmt: skip

    def update(self, batch: Batch) -> dict[str, float]:
        """``epochs`` optimiser steps of the corrected loss on ``batch``."""
        cfg = self.config
        start = time.monotonic()
        batch.extras["advantages"] = batch_advantages(batch, cfg.adv_mode)
        if cfg.echo_lambda:
            from repogym.agents.echo import with_echo_norm

            with_echo_norm(batch)
        if cfg.correction == "decoupled":
            batch.extras["prox_logp"] = _score(self.policy, batch, cfg)
        if self.ref is not None:
            batch.extras["ref_logp"] = _score(self.ref, batch, cfg)
        batch = batch.to(self.device)
        norm = {
            "global_num_tokens": batch.action_mask.sum(),
            "global_num_seqs": (batch.action_mask.sum(-1) > 0).sum(),
            "norm_len": float(cfg.rollout.max_new_tokens * (cfg.rollout.max_steps or 1)),
        }
        epochs = []
        for _ in range(cfg.epochs):
            rows = [self._corrected_step(mb, norm) for mb in batch.split(cfg.micro_batch)]
            grad_norm = clip_and_step(self.policy.parameters(), self.optimizer, cfg.max_grad_norm)
            epochs.append({**sum_losses(rows), "grad_norm": grad_norm})
        metrics = mean_metrics(epochs)
        tokens = int(batch.attention_mask.sum()) * cfg.epochs
        metrics["throughput/tokens_per_s"] = tokens / max(time.monotonic() - start, 1e-9)
        return metrics

    def _corrected_step(self, mb: Batch, norm: Mapping[str, Any]) -> dict[str, float]:
        cfg = self.config
        with autocast(self.device, cfg.bf16):
            scores = self.policy.score(mb.input_ids, mb.attention_mask, with_entropy=True)
        mask = mb.action_mask
        pl, metrics = async_policy_loss(
            scores.logp, mb.old_logp, mb.extras["advantages"], mask,
            correction=cfg.correction, cap=cfg.is_cap, prox_logp=mb.extras.get("prox_logp"),
            eps_low=cfg.eps_low, eps_high=cfg.eps_high, agg=cfg.agg, **norm,
        )  # fmt: skip
        entropy = aggregate(scores.entropy, mask, cfg.agg, **norm)
        terms = {"policy": (1.0, pl), "entropy": (cfg.ent_coef, -entropy),
                 "kl": (cfg.beta, self._ref_kl(scores, mb, norm))}  # fmt: skip
        for name, (weight, fn) in self.extra_terms.items():
            terms[name] = (weight, fn(self.policy, mb, scores))
        total, loss_metrics = assemble_loss(terms)
        total.backward()
        masked = mask.bool()
        metrics["entropy"] = float(scores.entropy.detach()[masked].mean()) if masked.any() else 0.0
        return {**metrics, **loss_metrics}

    def _ref_kl(self, scores: Scores, mb: Batch, norm: Mapping[str, Any]) -> torch.Tensor:
        if "ref_logp" not in mb.extras:
            return scores.logp.new_zeros(())
        per_token = kl(scores.logp, mb.extras["ref_logp"], self.config.kl_kind)
        return aggregate(per_token, mb.action_mask, self.config.agg, **norm)


def sum_losses(rows: list[dict[str, float]]) -> dict[str, float]:
    """One optimiser step's micro-batch metrics: ``loss/*`` summed (global normalisers make the
    sum the batch loss), the rest averaged (``*/max``: maximum)."""
    out = mean_metrics(rows)
    for key in out:
        if key.startswith("loss/"):
            out[key] = sum(r[key] for r in rows if key in r)
    return out


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def train_from_args(
    algo: str,
    config_cls: type,
    trainer_cls: type,
    args: argparse.Namespace,
) -> int:
    """Build ``config_cls`` from the train CLI's flags, train, plot; shared by the entry points
    of ``async``, ``distill``, ``opd`` and ``echo``. ``rollout.FIELD=VALUE`` pairs of ``--set``
    set rollout fields; ``--ray`` sets the config's ``ray`` field."""
    from repogym.agents.rollout import RolloutConfig
    from repogym.harness.cmd_train import _coerce, config_from_args

    rollout_fields = {f.name: f for f in dataclasses.fields(RolloutConfig)}
    rollout, rest = {}, []
    for pair in list(getattr(args, "overrides", None) or []):
        key, sep, text = pair.partition("=")
        if not key.startswith("rollout."):
            rest.append(pair)
        elif sep and key[8:] in rollout_fields:
            rollout[key[8:]] = _coerce(RolloutConfig, rollout_fields[key[8:]], text)
        else:
            raise SystemExit(f"--set {pair!r}: unknown rollout field. Fix: use rollout.FIELD="
                             f"VALUE with FIELD one of {sorted(rollout_fields)}")  # fmt: skip
    args.overrides = rest
    if getattr(args, "ray", None) and "ray" in {f.name for f in dataclasses.fields(config_cls)}:
        args.overrides.append(f"ray={args.ray}")
    config = config_from_args(config_cls, args)
    if rollout:
        config.rollout = dataclasses.replace(config.rollout, **rollout)
        config.__post_init__()
    if getattr(args, "out", None) is None:
        config.out = f"runs/{algo}"
    trainer = trainer_cls(config)
    try:
        trainer.train(on_step=_print_step)
    finally:
        trainer.close()
    from repogym.harness.cmd_plot import plot_metrics

    print(f"metrics: {config.out}/metrics.jsonl; curves: {plot_metrics(config.out)}")
    return 0


def _print_step(step: int, m: Mapping[str, float]) -> None:
    keys = ("reward/mean", "loss/policy", "loss/kl", "loss/echo", "is_weight/max",
            "staleness/mean")  # fmt: skip
    shown = " ".join(f"{k} {m[k]:.4g}" for k in keys if k in m)
    print(f"step {step}: {shown} ({m.get('time/step_s', 0.0):.1f}s)", flush=True)


def main(args: argparse.Namespace) -> int:
    """``repogym train --algo async``."""
    return train_from_args("async", AsyncConfig, AsyncTrainer, args)
