"""GRPO and its variants (GSPO, DAPO, CISPO, Dr. GRPO): critic-free policy optimisation.

Per step: sample ``group_size`` episodes per task, give each episode the advantage of its
reward within its group (:func:`repogym.agents.losses.group_advantages`, over the group's
valid episodes), spread it over the episode's completion tokens, and run ``epochs``
optimisation passes, so that from the second pass on the importance ratios differ from 1 and
clipping acts. ``variant`` sets the loss kind, clip bounds, advantage normalisation,
aggregation and dynamic sampling as the papers do; any of them can be overridden:

============  ==========  ===========  =============  ========================  =========
variant       loss        eps low/hi   advantages     aggregation               dyn. samp.
============  ==========  ===========  =============  ========================  =========
``grpo``      ppo clip    0.2 / 0.2    (r-mean)/std   seq_mean_token_mean       no
``dr_grpo``   ppo clip    0.2 / 0.2    r - mean       seq_mean_token_sum_norm   no
``dapo``      ppo clip    0.2 / 0.28   (r-mean)/std   token_mean                yes
``gspo``      seq ratio   3e-4 / 4e-4  (r-mean)/std   seq_mean_token_mean       no
``cispo``     IS weight   1.0 / 4.0    (r-mean)/std   token_mean                no
============  ==========  ===========  =============  ========================  =========

(DeepSeekMath; Liu et al. 2025; Yu et al. 2025; Zheng et al. 2025; MiniMax-M1 with
ScaleRL's eps_max = 5.) KL to the initial policy: ``beta`` with ``kl_mode="loss"``
(``kl_kind`` k2, k3 or low_var_kl) or ``kl_mode="reward"`` (k1 summed over the episode's
tokens, subtracted from its reward before the group baseline). Under the asynchronous
wrapper (:mod:`repogym.agents.async_rl`) the policy term is its off-policy-corrected loss.

Run it: ``repogym train --algo grpo --model PATH --steps 20 --out runs/grpo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch

from repogym.agents.batch import Batch, LossNorm, PreparedBatch
from repogym.agents.config import TrainConfig
from repogym.agents.episode import Episode
from repogym.agents.losses import (
    AggMode,
    GroupMode,
    PolicyLossKind,
    group_advantages,
    kl_reward_penalty,
)
from repogym.agents.trainer import Trainer

__all__ = ["VARIANTS", "GRPOBatch", "GRPOConfig", "GRPOTrainer", "Variant", "batch_advantages"]

Variant = Literal["grpo", "gspo", "dapo", "cispo", "dr_grpo"]

VARIANTS: dict[str, dict[str, Any]] = {
    "grpo": {
        "loss_kind": "ppo",
        "eps_low": 0.2,
        "eps_high": 0.2,
        "adv_mode": "grpo",
        "agg": "seq_mean_token_mean",
        "dynamic_sampling": False,
    },
    "dr_grpo": {
        "loss_kind": "ppo",
        "eps_low": 0.2,
        "eps_high": 0.2,
        "adv_mode": "dr_grpo",
        "agg": "seq_mean_token_sum_norm",
        "dynamic_sampling": False,
    },
    "dapo": {
        "loss_kind": "ppo",
        "eps_low": 0.2,
        "eps_high": 0.28,
        "adv_mode": "grpo",
        "agg": "token_mean",
        "dynamic_sampling": True,
    },
    "gspo": {
        "loss_kind": "gspo",
        "eps_low": 3e-4,
        "eps_high": 4e-4,
        "adv_mode": "grpo",
        "agg": "seq_mean_token_mean",
        "dynamic_sampling": False,
    },
    "cispo": {
        "loss_kind": "cispo",
        "eps_low": 1.0,
        "eps_high": 4.0,
        "adv_mode": "grpo",
        "agg": "token_mean",
        "dynamic_sampling": False,
    },
}
"""Each variant's loss kind, clip bounds, advantage mode, aggregation and dynamic sampling."""


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO-family settings; ``None`` fields take the variant's value (see :data:`VARIANTS`).

    Attributes:
        variant: Which paper's recipe.
        epochs: Optimisation passes over each batch (ratios differ from 1 after the first).
        loss_kind: Override: ``ppo``, ``gspo`` or ``cispo``.
        eps_low: Override: lower clip range.
        eps_high: Override: upper clip range.
        adv_mode: Override: ``grpo``, ``dr_grpo`` or ``rloo``.
        agg: Override: loss aggregation.
        dynamic_sampling: Override: resample zero-variance groups (``rollout.max_resample``).
        dual_clip: Dual-clip constant (> 1) for the ppo/gspo losses; None disables it.
        recompute_old_logp: Score the batch before the first pass and use that as the old
            policy; False uses the engine's behaviour logprobs.
        async_: Asynchronous rollout workers, the one way to ask for them: True or a dict of
            :class:`repogym.agents.async_rl.AsyncOptions` fields (``--set async_=true``,
            ``--set async_.FIELD=VALUE``); None: synchronous.
    """

    variant: Variant = "grpo"
    epochs: int = 2
    loss_kind: PolicyLossKind | None = None
    eps_low: float | None = None
    eps_high: float | None = None
    adv_mode: GroupMode | None = None
    agg: AggMode | None = None
    dynamic_sampling: bool | None = None
    dual_clip: float | None = None
    recompute_old_logp: bool = True
    async_: bool | dict | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(
                f"unknown variant {self.variant!r}; expected one of {', '.join(get_args(Variant))}"
            )
        for key, value in VARIANTS[self.variant].items():
            if getattr(self, key) is None:
                setattr(self, key, value)
        self.rollout.dynamic_sampling = bool(self.dynamic_sampling)
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1; got {self.epochs}")


def batch_advantages(batch: Batch, mode: GroupMode, rewards: torch.Tensor | None = None):
    """Per-episode advantages ``[B]`` within each group, over its valid episodes only.

    Episodes with an infrastructure error get 0 and do not shift their group's baseline; a
    group with fewer than two valid episodes gets 0.

    Args:
        batch: The episodes.
        mode: Group baseline/normalisation.
        rewards: Rewards to use instead of ``batch.rewards`` (e.g. with a KL penalty).
    """
    rewards = batch.rewards if rewards is None else rewards
    adv = torch.zeros_like(rewards)
    for g in batch.groups.unique():
        idx = torch.nonzero((batch.groups == g) & batch.valid).squeeze(-1)
        if idx.numel() >= 2:
            adv[idx] = group_advantages(rewards[idx], idx.numel(), mode)
    return adv


@dataclass(kw_only=True)
class GRPOBatch(PreparedBatch):
    """GRPO's prepared batch: ``advantages`` is ``[B]``, one per episode (spread over its
    completion tokens by the loss).

    Attributes:
        kl_penalty: ``[B]`` with ``kl_mode="reward"``: ``-beta`` times the episode's summed k1
            to the reference, added to its reward before the group baseline (else None).
    """

    kl_penalty: torch.Tensor | None = None


class GRPOTrainer(Trainer):
    """The GRPO family on LM policies in RepoEnv episodes. See the module docstring."""

    config: GRPOConfig

    def update(self, batch: Batch, episodes: Sequence[Episode] | None = None) -> dict[str, float]:
        """``epochs`` optimiser steps on ``batch``; returns the metrics of the step."""
        cfg = self.config
        prepared = self.prepare(batch.to(self.device))
        norm = self.norm(
            prepared, norm_len=float(cfg.rollout.max_new_tokens * (cfg.rollout.max_steps or 1))
        )
        metrics = self.optimise(
            prepared,
            lambda mb: self.micro_step(mb, norm),
            epochs=cfg.epochs,
            optimizer=self.optimizer,
        )
        if prepared.kl_penalty is not None:
            metrics["kl/reward_penalty"] = float(prepared.kl_penalty.mean())
        return metrics

    def uses_behaviour_old(self) -> bool:
        """Whether the clipped ratio is taken to the engine's behaviour logprobs."""
        if self.correction is not None:
            return self.correction.name != "decoupled"
        return not self.config.recompute_old_logp

    @torch.no_grad()
    def prepare(self, batch: Batch) -> GRPOBatch:
        """Old-policy and reference logprobs, then advantages (reward KL included)."""
        cfg = self.config
        prox = batch.old_logp if self.uses_behaviour_old() else self.score_batch(batch).logp
        rewards, penalty = batch.rewards, None
        ref = self.ref_logp(batch)
        if ref is not None and cfg.kl_mode == "reward":
            penalty = (kl_reward_penalty(batch.old_logp, ref, cfg.beta) * batch.action_mask).sum(-1)
            rewards = rewards + penalty
        return GRPOBatch(
            **batch.batch_fields(),
            prox_logp=prox,
            ref_logp=ref,
            kl_penalty=penalty,
            advantages=batch_advantages(batch, cfg.adv_mode, rewards),
        )

    def micro_step(self, mb: GRPOBatch, norm: LossNorm) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        scores = self.score(mb)
        pl, metrics = self.policy_term(
            scores.logp,
            mb,
            norm,
            kind=cfg.loss_kind,
            eps_low=cfg.eps_low,
            eps_high=cfg.eps_high,
            agg=cfg.agg,
            dual_clip=cfg.dual_clip,
        )
        terms = {"policy": (1.0, pl), **self.common_terms(scores, mb, norm, cfg.agg)}
        return self.backward(terms, mb, scores, metrics)
