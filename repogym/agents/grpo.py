"""GRPO and its variants (GSPO, DAPO, CISPO, Dr. GRPO): critic-free policy optimisation.

Per step: sample ``group_size`` episodes per task (:func:`repogym.agents.rollout.collect`),
give each episode the advantage of its reward within its group
(:func:`repogym.agents.losses.group_advantages`, over the group's valid episodes), spread it
over the episode's action tokens, and run ``epochs`` optimisation passes over the batch, so
that from the second pass on the importance ratios differ from 1 and clipping acts.

``variant`` sets the loss kind, clip bounds, advantage normalisation, aggregation and dynamic
sampling as the papers do; any of them can be overridden field by field:

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
ScaleRL's eps_max = 5, i.e. weights clipped to [0, 5].) Optional: KL to a frozen copy of the
initial policy (``beta``, ``kl_kind`` k1/k2/k3) and an entropy bonus (``ent_coef``).

Run it: ``repogym train --algo grpo --model tiny --steps 20 --out runs/grpo``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch

from repogym.agents.common import (
    TrainConfig,
    Trainer,
    autocast,
    optimise_epochs,
)
from repogym.agents.losses import (
    AggMode,
    GroupMode,
    KLKind,
    PolicyLossKind,
    aggregate,
    group_advantages,
    kl,
    policy_loss,
)
from repogym.agents.policy import Batch, Policy, Scores

__all__ = ["VARIANTS", "GRPOConfig", "GRPOTrainer", "Variant", "batch_advantages"]

Variant = Literal["grpo", "gspo", "dapo", "cispo", "dr_grpo"]

VARIANTS: dict[str, dict[str, Any]] = {
    "grpo": {"loss_kind": "ppo", "eps_low": 0.2, "eps_high": 0.2, "adv_mode": "grpo",
        "agg": "seq_mean_token_mean", "dynamic_sampling": False},
    "dr_grpo": {"loss_kind": "ppo", "eps_low": 0.2, "eps_high": 0.2, "adv_mode": "dr_grpo",
        "agg": "seq_mean_token_sum_norm", "dynamic_sampling": False},
    "dapo": {"loss_kind": "ppo", "eps_low": 0.2, "eps_high": 0.28, "adv_mode": "grpo",
        "agg": "token_mean", "dynamic_sampling": True},
    "gspo": {"loss_kind": "gspo", "eps_low": 3e-4, "eps_high": 4e-4, "adv_mode": "grpo",
        "agg": "seq_mean_token_mean", "dynamic_sampling": False},
    "cispo": {"loss_kind": "cispo", "eps_low": 1.0, "eps_high": 4.0, "adv_mode": "grpo",
        "agg": "token_mean", "dynamic_sampling": False},
}  # fmt: skip
"""Each variant's loss kind, clip bounds, advantage mode, aggregation and dynamic sampling."""


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO-family settings; ``None`` fields take the variant's value (see :data:`VARIANTS`).

    Attributes:
        variant: Which paper's recipe.
        epochs: Optimisation passes over each batch (ratios differ from 1 after the first).
        beta: Weight of the KL to a frozen copy of the initial policy (0: no reference).
        kl_kind: KL estimator (k3 is GRPO's).
        ent_coef: Entropy bonus weight.
        loss_kind: Override: ``ppo``, ``gspo`` or ``cispo``.
        eps_low: Override: lower clip range.
        eps_high: Override: upper clip range.
        adv_mode: Override: ``grpo``, ``dr_grpo`` or ``rloo``.
        agg: Override: loss aggregation.
        dynamic_sampling: Override: resample zero-variance groups (``rollout.max_resample``).
        dual_clip: Dual-clip constant (> 1) for the ppo/gspo losses; None disables it.
        recompute_old_logp: Score the batch before the first pass and use that as the old
            policy (exact on-policy ratios); False uses the sampler's logprobs (what an
            asynchronous actor has).
        echo_lambda: Weight of the Echo observation loss (:mod:`repogym.agents.echo`); 0: off.
        async_: Train with asynchronous rollout workers: True, or a dict of
            :class:`repogym.agents.async_rl.AsyncOptions` fields; None/False: synchronous.
    """

    variant: Variant = "grpo"
    epochs: int = 2
    beta: float = 0.0
    kl_kind: KLKind = "k3"
    ent_coef: float = 0.0
    loss_kind: PolicyLossKind | None = None
    eps_low: float | None = None
    eps_high: float | None = None
    adv_mode: GroupMode | None = None
    agg: AggMode | None = None
    dynamic_sampling: bool | None = None
    dual_clip: float | None = None
    recompute_old_logp: bool = True
    echo_lambda: float = 0.0
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


def batch_advantages(batch: Batch, mode: GroupMode) -> torch.Tensor:
    """Per-episode advantages ``[B]`` within each group, over its valid episodes only.

    Episodes with an infrastructure error get 0 and do not shift their group's baseline; a
    group with fewer than two valid episodes gets 0.
    """
    adv = torch.zeros_like(batch.rewards)
    for g in batch.groups.unique():
        idx = torch.nonzero((batch.groups == g) & batch.valid).squeeze(-1)
        if idx.numel() >= 2:
            adv[idx] = group_advantages(batch.rewards[idx], idx.numel(), mode)
    return adv


class GRPOTrainer(Trainer):
    """The GRPO family on LM policies in RepoEnv episodes. See the module docstring.

    Args:
        config: :class:`GRPOConfig`.
        **kwargs: ``policy``, ``interface``, ``pool``, ``extra_terms`` (see
            :class:`repogym.agents.common.Trainer`).
    """

    config: GRPOConfig

    def __init__(self, config: GRPOConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        self.ref: Policy | None = self.policy.frozen_copy() if config.beta else None
        if config.echo_lambda:  # the Echo observation loss, see repogym.agents.echo
            from repogym.agents.echo import echo_term

            self.extra_terms.setdefault("echo", (config.echo_lambda, echo_term))

    def update(self, batch: Batch) -> dict[str, float]:
        """``epochs`` optimiser steps on ``batch``; returns the metrics of the step."""
        cfg = self.config
        start = time.monotonic()
        batch.extras["advantages"] = batch_advantages(batch, cfg.adv_mode)
        if cfg.echo_lambda:  # normalise the Echo term by the whole batch's observation tokens
            from repogym.agents.echo import with_echo_norm

            with_echo_norm(batch)
        batch = batch.to(self.device)
        self._prepare(batch)
        norm = {
            "global_num_tokens": batch.action_mask.sum(),
            "global_num_seqs": (batch.action_mask.sum(-1) > 0).sum(),
            "norm_len": float(cfg.rollout.max_new_tokens * (cfg.rollout.max_steps or 1)),
        }
        return optimise_epochs(
            batch, lambda mb: self._micro_step(mb, norm), list(self.policy.parameters()),
            self.optimizer, epochs=cfg.epochs, micro_batch=cfg.micro_batch,
            max_grad_norm=cfg.max_grad_norm, start=start,
        )  # fmt: skip

    @torch.no_grad()
    def _prepare(self, batch: Batch) -> None:
        """Old-policy and reference logprobs for the whole batch (no gradient)."""
        cfg = self.config
        if not cfg.recompute_old_logp:
            batch.extras["old_logp"] = batch.old_logp
        olds, refs = [], []
        for mb in batch.split(cfg.micro_batch):
            with autocast(self.device, cfg.bf16):
                if cfg.recompute_old_logp:
                    olds.append(
                        self.policy.score(
                            mb.input_ids, mb.attention_mask, keep_from=_first_action(mb)
                        ).logp
                    )
                if self.ref is not None:
                    refs.append(self.ref.score(mb.input_ids, mb.attention_mask).logp)
        if olds:
            batch.extras["old_logp"] = torch.cat(olds)
        if refs:
            batch.extras["ref_logp"] = torch.cat(refs)

    def _micro_step(self, mb: Batch, norm: Mapping[str, Any]) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        with autocast(self.device, cfg.bf16):
            scores = self.policy.score(
                mb.input_ids,
                mb.attention_mask,
                with_entropy=True,
                keep_from=_first_action(mb),
                entropy_grad=bool(cfg.ent_coef),
            )
        mask = mb.action_mask
        adv = mb.extras["advantages"]
        if "behaviour_weight" in mb.extras:  # async_: decoupled correction (async_rl)
            adv = adv.reshape(len(adv), -1) * mb.extras["behaviour_weight"]
        pl, metrics = policy_loss(
            scores.logp, mb.extras["old_logp"], adv, mask,
            kind=cfg.loss_kind, eps_low=cfg.eps_low, eps_high=cfg.eps_high, agg=cfg.agg,
            dual_clip=cfg.dual_clip, **norm,
        )  # fmt: skip
        entropy = aggregate(scores.entropy, mask, cfg.agg, **norm)
        terms = {"policy": (1.0, pl), "entropy": (cfg.ent_coef, -entropy)}
        terms["kl"] = (cfg.beta, self._kl(scores, mb, norm))
        return self._backward(terms, mb, scores, metrics)

    def _kl(self, scores: Scores, mb: Batch, norm: Mapping[str, Any]) -> torch.Tensor:
        """Aggregated KL(policy || reference) on action tokens (0 without a reference)."""
        if "ref_logp" not in mb.extras:
            return scores.logp.new_zeros(())
        per_token = kl(scores.logp, mb.extras["ref_logp"], self.config.kl_kind)
        return aggregate(per_token, mb.action_mask, self.config.agg, **norm)


def _first_action(batch: Batch) -> int:
    """The first position holding an action token in any row (logits before it are skipped)."""
    cols = batch.action_mask.any(0).nonzero()
    return int(cols[0]) if cols.numel() else 1

