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
(``ray="local"`` or a cluster address); they live in :mod:`repogym.agents.async_workers`
(their names are re-exported here). The learner's loss corrects for the gap between the
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
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from repogym.agents.async_workers import (
    Backend,
    EnvWorkerFactory,
    LocalWorkers,
    RayWorkers,
    RolloutResult,
    RolloutWorker,
    SimulatedWorkerFactory,
    WorkerFactory,
    make_workers,
    model_weights,
)
from repogym.agents.common import (
    TrainConfig,
    Trainer,
    autocast,
    check_choice,
    mean_metrics,
    run_logged,
    sum_losses,
)
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.losses import LOG_RATIO_CLAMP, aggregate, policy_loss
from repogym.agents.policy import Batch, Episode, Policy, collate
from repogym.agents.shaping import ShapingConfig
from repogym.agents.train_cli import train_from_args

__all__ = [
    "AsyncConfig",
    "AsyncOptions",
    "AsyncTrainer",
    "Correction",
    "async_policy_loss",
    "behaviour_weights",
    "filter_stale",
    "iterate_async",
    "main",
    "sequence_ratio",
    "token_is_weights",
    "train_async",
    "train_async_option",
    "weight_metrics",
]
# Re-exported from async_workers, common and train_cli (their old home was this module):
__all__ += [
    "Backend",
    "EnvWorkerFactory",
    "LocalWorkers",
    "RayWorkers",
    "RolloutResult",
    "RolloutWorker",
    "SimulatedWorkerFactory",
    "WorkerFactory",
    "model_weights",
    "sum_losses",
    "train_from_args",
]

Correction = Literal["tis", "seq", "decoupled", "product", "none"]


# --------------------------------------------------------------------------------------------
# Corrections (pure functions)
# --------------------------------------------------------------------------------------------


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
    check_choice("correction", correction, Correction)
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
    check_choice("correction", correction, Correction)
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
# The learner loop
# --------------------------------------------------------------------------------------------


@dataclass
class _ActorLearnerFields:
    """The actor/learner fields (and defaults) that :class:`AsyncOptions` and
    :class:`AsyncConfig` share."""

    num_workers: int = 2
    backend: Backend = "thread"
    ray: str | None = None
    sync_every: int = 1
    max_staleness: int = 2
    correction: Correction = "decoupled"
    is_cap: float | None = 2.0
    groups_per_step: int | None = None


@dataclass
class AsyncOptions(_ActorLearnerFields):
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

    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        check_choice("correction", self.correction, Correction)
        check_choice("backend", self.backend, Backend)
        if self.num_workers < 1 or self.sync_every < 1 or self.max_staleness < 0:
            raise ValueError(
                f"need num_workers >= 1, sync_every >= 1, max_staleness >= 0; got "
                f"{self.num_workers}, {self.sync_every}, {self.max_staleness}"
            )


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
    workers = make_workers(factory, opts.num_workers, opts.backend, opts.ray, policy)
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
        log: Write ``OUT/metrics.jsonl``, ``OUT/config.json`` and checkpoints (every
            ``config.save_every`` updates if set, and a final one).
        on_step: Called with ``(step, metrics)`` after each update.

    Returns:
        Every step's metrics.
    """
    config = trainer.config
    steps = config.steps if steps is None else steps
    factory = factory or EnvWorkerFactory(config)
    groups = opts.groups_per_step or len(config.tasks)
    if not trainer.warm_started:
        trainer.warm_start()
    update = trainer.update if isinstance(trainer, AsyncTrainer) else _weighted(trainer, opts)
    loop = iterate_async(trainer.policy, opts, factory, update, steps, groups)
    return run_logged(config, trainer.policy, steps, loop, log=log, on_step=on_step)


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
class AsyncConfig(_ActorLearnerFields, GRPOConfig):
    """``--algo async``: GRPO-style advantages, asynchronous workers, corrected loss.

    Attributes (besides :class:`repogym.agents.grpo.GRPOConfig`'s):
        num_workers, backend, ray, sync_every, max_staleness, correction, is_cap,
            groups_per_step: As in :class:`AsyncOptions`.
        epochs: Optimisation passes per batch (default 1 here).
        shaping: Reward shaping applied by the workers
            (:class:`repogym.agents.shaping.ShapingConfig` or its dict; None: the env's reward).
    """

    epochs: int = 1
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

    @torch.no_grad()
    def _prepare(self, batch: Batch) -> None:
        """Proximal (``decoupled``) and reference logprobs, with the weights before the update.

        The loss takes its behaviour logprobs from the workers (``Batch.old_logp``).
        """
        cfg = self.config
        if cfg.correction == "decoupled":
            batch.extras["prox_logp"] = _score(self.policy, batch, cfg).to(self.device)
        if self.ref is not None:
            batch.extras["ref_logp"] = _score(self.ref, batch, cfg).to(self.device)

    def _micro_step(self, mb: Batch, norm: Mapping[str, Any]) -> dict[str, float]:
        """Forward and backward of the corrected loss (:func:`async_policy_loss`) on one
        micro-batch; returns its metrics."""
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
                 "kl": (cfg.beta, self._kl(scores, mb, norm))}  # fmt: skip
        return self._backward(terms, mb, scores, metrics)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    """``repogym train --algo async``."""
    return train_from_args("async", AsyncConfig, AsyncTrainer, args)
