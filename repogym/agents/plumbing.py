"""The loss plumbing every trainer shares (the base of :class:`repogym.agents.trainer.Trainer`).

Its dependencies are its constructor's arguments: the config, the policy, the data-parallel
group, the reference (for a KL term), the extra terms and the off-policy correction. Scored
positions, the entropy and KL terms, extra terms passed in (the Echo observation loss),
the policy term with or without an off-policy correction, gradient accumulation over
micro-batches with global normalisers (counted over every data-parallel rank), and the
supervised warm start. Under FSDP every rank runs the same number of passes: a rank with
fewer micro-batches pads with passes whose masks are zero (they add nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from repogym.agents.batch import Batch, LossNorm, PreparedBatch
from repogym.agents.config import AsyncCorrection, ExtraTerm, TrainConfig
from repogym.agents.distributed import Parallel
from repogym.agents.episode import Episode, Turn, collate
from repogym.agents.losses import aggregate, async_policy_loss, kl, kl_loss, policy_loss
from repogym.agents.metrics import mean_metrics, sum_losses
from repogym.agents.policy import Policy, Reference, Scores

__all__ = ["LossPlumbing", "clip_and_step"]


class LossPlumbing:
    """Loss helpers: scoring, the shared loss terms, gradient accumulation, the warm start.

    Args:
        config: The trainer's config (``micro_batch``, ``ent_coef``, ``beta``, ``kl_mode``,
            ``kl_kind``, ``max_grad_norm``).
        policy: The trained policy (its ``device`` is where the loss is computed).
        parallel: The data-parallel group (counts are summed over it).
        ref: The reference of a KL term (None: no KL term).
        extra_terms: Extra loss terms by name, reported as ``loss/<name>``.
        correction: The off-policy correction of the policy term (None: the plain clipped
            loss); the asynchronous wrapper replaces it before training.
    """

    def __init__(
        self,
        config: TrainConfig,
        policy: Policy,
        parallel: Parallel,
        *,
        ref: Reference | None = None,
        extra_terms: Mapping[str, ExtraTerm] | None = None,
        correction: AsyncCorrection | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.parallel = parallel
        self.device = policy.device
        self.ref = ref
        self.extra_terms: dict[str, ExtraTerm] = dict(extra_terms or {})
        self.correction = correction

    def parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimiser trains (by default the policy's trainable ones)."""
        return [p for p in self.policy.parameters() if p.requires_grad]

    def positions(self, mb: Batch) -> torch.Tensor:
        """The positions to score: completion tokens, and observations if a term needs them."""
        need = mb.action_mask.bool()
        if any(t.positions == "obs" for t in self.extra_terms.values()):
            need = need | mb.obs_mask.bool()
        return need

    def micro_batches(self, batch: Batch) -> list[tuple[Batch, bool]]:
        """``batch`` in micro-batches, padded to every rank's count with passes that add
        nothing (``real`` False: their masks are zero)."""
        return [
            (mb if real else mb.zeroed(), real)
            for mb, real in self.parallel.pad_micro_batches(batch.split(self.config.micro_batch))
        ]

    def score(self, mb: Batch, *, with_values: bool = False) -> Scores:
        """The policy's scores of a micro-batch (entropy included)."""
        return self.policy.score(
            mb.input_ids,
            mb.attention_mask,
            self.positions(mb),
            with_entropy=True,
            with_values=with_values,
            entropy_grad=bool(self.config.ent_coef),
        )

    @torch.no_grad()
    def score_batch(self, batch: Batch, *, with_values: bool = False) -> Scores:
        """Scores of a whole batch without gradient, micro-batch by micro-batch."""
        parts = []
        for mb, real in self.micro_batches(batch):  # every pass runs: FSDP's collectives
            out = self.policy.score(
                mb.input_ids, mb.attention_mask, self.positions(mb), with_values=with_values
            )
            if real:
                parts.append(out)
        values = torch.cat([p.values for p in parts]) if with_values else None
        return Scores(logp=torch.cat([p.logp for p in parts]), values=values)

    @torch.no_grad()
    def ref_logp(self, batch: Batch) -> torch.Tensor | None:
        """The reference's log-probabilities of the completion tokens (None without one)."""
        if self.ref is None:
            return None
        parts = [
            (self.ref.logp(mb.input_ids, mb.attention_mask, mb.action_mask), real)
            for mb, real in self.micro_batches(batch)
        ]
        return torch.cat([p for p, real in parts if real])

    def global_sum(self, value: torch.Tensor | float) -> torch.Tensor:
        """``value`` summed over data-parallel ranks, on this rank's device (float32)."""
        return self.parallel.sum(value).to(self.device, torch.float32)

    def norm(
        self, batch: Batch, *, norm_len: float | None = None, num_turns: torch.Tensor | None = None
    ) -> LossNorm:
        """The optimiser batch's global counts (summed over every rank), for every aggregation.

        Args:
            batch: The optimiser batch.
            norm_len: The constant length of ``seq_mean_token_sum_norm``.
            num_turns: This rank's count of valid turns (PPO's value loss), summed too.
        """
        own = batch.norm()
        total = self.global_sum if self.parallel.enabled else (lambda v: v)
        return LossNorm(
            num_tokens=total(own.num_tokens),
            num_seqs=total(own.num_seqs),
            num_obs_tokens=total(own.num_obs_tokens),
            norm_len=norm_len,
            num_turns=None if num_turns is None else self.global_sum(num_turns),
        )

    def common_terms(
        self, scores: Scores, mb: Batch, norm: LossNorm, agg: str
    ) -> dict[str, tuple[float, torch.Tensor]]:
        """The entropy bonus, the KL loss (with a prepared batch's ``ref_logp``) and the extra
        terms of one micro-batch."""
        counts = norm.aggregation()
        entropy = aggregate(scores.entropy, mb.action_mask, agg, **counts)
        terms = {"entropy": (self.config.ent_coef, -entropy)}
        kl_value = scores.logp.new_zeros(())
        as_loss = self.config.kl_mode == "loss"
        ref = mb.ref_logp if isinstance(mb, PreparedBatch) else None
        if ref is not None:  # in reward mode the k1 value is reported, not added
            per_token = (
                kl_loss(scores.logp, ref, self.config.kl_kind)
                if as_loss
                else kl(scores.logp.detach(), ref, "k1")
            )
            kl_value = aggregate(per_token, mb.action_mask, agg, **counts)
        terms["kl"] = (self.config.beta if as_loss else 0.0, kl_value)
        for name, term in self.extra_terms.items():
            terms[name] = (term.weight, term.fn(scores, mb, norm))
        return terms

    def policy_term(
        self, logp: torch.Tensor, mb: PreparedBatch, norm: LossNorm, **loss: Any
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The clipped policy loss of ``mb.advantages`` to ``mb.prox_logp``, or, under an
        off-policy correction, :func:`repogym.agents.losses.async_policy_loss` with it (the
        behaviour logprobs from the engine, ``mb.prox_logp`` as the proximal policy)."""
        counts = norm.aggregation()
        c = self.correction
        if c is None:
            return policy_loss(logp, mb.prox_logp, mb.advantages, mb.action_mask, **loss, **counts)
        loss.pop("dual_clip", None)
        return async_policy_loss(
            logp,
            mb.old_logp,
            mb.advantages,
            mb.action_mask,
            correction=c.name,
            cap=c.cap,
            prox_logp=mb.prox_logp,
            **loss,
            **counts,
        )

    def backward(
        self,
        terms: dict[str, tuple[float, torch.Tensor]],
        mb: Batch,
        scores: Scores,
        metrics: dict[str, float],
    ) -> dict[str, float]:
        """Backpropagate ``sum(weight * term)``; returns metrics with ``loss/*``, ``entropy``."""
        total: torch.Tensor | None = None
        for name, (weight, value) in terms.items():
            metrics[f"loss/{name}"] = float(value.detach())
            if weight:
                total = weight * value if total is None else total + weight * value
        if total is not None and total.requires_grad:
            (total * self.parallel.grad_scale).backward()
        masked = mb.action_mask.bool()
        metrics["entropy"] = float(scores.entropy.detach()[masked].mean()) if masked.any() else 0.0
        return metrics

    def optimise(
        self,
        batch: Batch,
        micro_step: Callable[[Any], dict[str, float]],
        *,
        epochs: int,
        optimizer: torch.optim.Optimizer,
    ) -> dict[str, float]:
        """``epochs`` steps of ``optimizer`` over ``batch`` (gradients accumulated over
        micro-batches of it, each passed to ``micro_step``).

        Returns:
            The metrics averaged over epochs (``loss/*`` summed over micro-batches),
            ``grad_norm`` and ``throughput/tokens_per_s`` (tokens scored per second).
        """
        start = time.monotonic()
        rows = []
        for _ in range(epochs):
            micro = [(micro_step(mb), real) for mb, real in self.micro_batches(batch)]
            rows.append(
                {
                    **sum_losses([m for m, real in micro if real]),
                    "grad_norm": clip_and_step(optimizer, self.config.max_grad_norm, self.parallel),
                }
            )
        metrics = mean_metrics(rows)
        tokens = int(batch.attention_mask.sum()) * epochs
        metrics["throughput/tokens_per_s"] = tokens / max(time.monotonic() - start, 1e-9)
        return metrics

    def sft(
        self,
        episodes: Sequence[Episode],
        steps: int,
        lr: float,
        on_step: Callable[[int, float], None] | None = None,
    ) -> float:
        """Supervised steps (cross-entropy on completion tokens) on ``episodes``; last loss.

        Args:
            episodes: The trajectories to imitate.
            steps: Optimiser steps.
            lr: AdamW's learning rate.
            on_step: Called after each step with its number (1-based) and loss (every rank).
        """
        mine = [e for _, e in self.parallel.mine(list(episodes))] or [self.empty_batch_episode()]
        batch = collate(mine, self.policy.tokenizer.pad_token_id).to(self.device)
        optimizer = torch.optim.AdamW(self.parameters(), lr=lr, weight_decay=0.0)
        total = max(float(self.global_sum(batch.num_action_tokens)), 1.0)
        loss = 0.0
        for step in range(steps):
            loss = 0.0
            for mb, _ in self.micro_batches(batch):
                logp = self.policy.score(mb.input_ids, mb.attention_mask, mb.action_mask).logp
                part = -(logp * mb.action_mask).sum() / total
                (part * self.parallel.grad_scale).backward()
                loss += float(part.detach())
            clip_and_step(optimizer, self.config.max_grad_norm, self.parallel)
            if on_step is not None:
                on_step(step + 1, float(self.parallel.sum(loss)))
        return float(self.parallel.sum(loss))

    def empty_batch_episode(self) -> Episode:
        """An episode with no token in any loss (a rank with no data still runs FSDP's passes)."""
        pad = self.policy.tokenizer.pad_token_id
        return Episode(task="", turns=[Turn([pad], [pad], [0.0])], masked=True)

    def empty_batch(self) -> Batch:
        """A batch of :meth:`empty_batch_episode`."""
        return collate([self.empty_batch_episode()], self.policy.tokenizer.pad_token_id)


def clip_and_step(
    optimizer: torch.optim.Optimizer, max_grad_norm: float, parallel: Parallel | None = None
) -> float:
    """Clip the optimiser's gradients to a global norm, step, zero them; returns the pre-clip
    norm.

    The parameters are the optimiser's own (under FSDP, the sharded ones: a module between
    passes may show its gathered copies instead). Each rank holds disjoint shards of every
    gradient, so the norm is the square root of the squared shard norms summed over ranks.
    """
    params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if parallel is None or not parallel.enabled:
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if params else 0.0
    else:
        local = torch.zeros((), dtype=torch.float64)
        for p in params:
            local += _local(p.grad).double().pow(2).sum().cpu()
        norm = parallel.sum(local).sqrt()
        scale = min(1.0, max_grad_norm / (float(norm) + 1e-6))
        for p in params:
            _local(p.grad).mul_(scale)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a (possibly distributed) tensor."""
    return t.to_local() if hasattr(t, "to_local") else t
