"""A batch of episodes as padded tensors: the one input of every trainer.

:func:`repogym.agents.episode.collate` builds a :class:`Batch` from episodes; a trainer moves
it to its device, turns it into its *prepared batch* (a subclass of :class:`PreparedBatch`
holding what its loss needs: advantages, returns, reference log-probabilities, ...) and splits
that into micro-batches. Every field is typed: no tensor travels under a string key.
:class:`LossNorm` holds the optimiser batch's global counts that every micro-batch's loss
divides by.

Alignment convention of every per-token tensor ``[B, T]``: position ``t`` is token ``t``;
``logp[b, t] = log pi(input_ids[b, t] | input_ids[b, :t])`` (0 at ``t = 0``), so the action
mask selects the log-probabilities of the completion tokens directly; ``values[b, t]`` is the
value of the state that ends with token ``t``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Self

import torch

__all__ = ["Batch", "LossNorm", "PreparedBatch"]


@dataclass
class Batch:
    """Episodes padded on the right: the input of every trainer.

    Per-token tensors are ``[B, T]``; per-episode ones ``[B]``; per-turn ones ``[B, K]``
    (padded with -1). Subclasses add fields of their own (tensors with a leading batch
    dimension, or None); :meth:`to`, :meth:`select`, :meth:`split` and :meth:`zeroed` carry
    them along.

    Attributes:
        input_ids: Token ids.
        attention_mask: 1 on real tokens.
        prompt_mask: 1 on the first prompt's tokens.
        action_mask: 1 on completion tokens of valid episodes (infra errors, and masked
            overlong episodes, are left out).
        obs_mask: 1 on observation tokens of those episodes.
        old_logp: Behaviour log-probabilities of the completion tokens.
        turn_index: Turn number of each completion token, -1 elsewhere.
        rewards: Episode returns.
        valid: False for episodes with an infrastructure error.
        groups: Group index of each episode.
        bootstrap: Cut without grading (the critic bootstraps with ``V(s_T)``).
        state_pos: ``[B, K]`` positions of the states ``s_k`` before each action, -1 pad.
        n_turns: Turns per episode.
        final_pos: Position of the last token (the state after the last action).
    """

    LOSS_MASKS: ClassVar[tuple[str, ...]] = ("action_mask", "obs_mask")
    """The masks that select what enters a loss (zeroed by :meth:`zeroed`)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_mask: torch.Tensor
    action_mask: torch.Tensor
    obs_mask: torch.Tensor
    old_logp: torch.Tensor
    turn_index: torch.Tensor
    rewards: torch.Tensor
    valid: torch.Tensor
    groups: torch.Tensor
    bootstrap: torch.Tensor
    state_pos: torch.Tensor
    n_turns: torch.Tensor
    final_pos: torch.Tensor

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_action_tokens(self) -> int:
        """Completion tokens that enter the loss."""
        return int(self.action_mask.sum())

    def first_action(self) -> int:
        """The first position holding a completion token in any row (1 if none)."""
        cols = self.action_mask.any(0).nonzero()
        return max(int(cols[0]), 1) if cols.numel() else 1

    def norm(self) -> LossNorm:
        """This batch's own counts (no data-parallel sum; see
        :meth:`repogym.agents.plumbing.LossPlumbing.norm` for the global ones)."""
        return LossNorm(
            num_tokens=self.action_mask.sum(),
            num_seqs=(self.action_mask.sum(-1) > 0).sum(),
            num_obs_tokens=self.obs_mask.sum(),
        )

    def batch_fields(self) -> dict[str, Any]:
        """The :class:`Batch` fields only (the base of a subclass's constructor call)."""
        return {f.name: getattr(self, f.name) for f in fields(Batch)}

    def to(self, device: torch.device | str) -> Self:
        """A copy with every tensor on ``device``."""
        return self._map(lambda t: t.to(device))

    def select(self, index: torch.Tensor | slice) -> Self:
        """The episodes at ``index`` (a slice or an index tensor)."""
        return self._map(lambda t: t[index])

    def zeroed(self) -> Self:
        """A copy whose loss masks (:attr:`LOSS_MASKS`) are zero: a forward/backward pass of
        it adds nothing to any loss."""
        masks = {
            k: torch.zeros_like(getattr(self, k))
            for k in self.LOSS_MASKS
            if getattr(self, k) is not None
        }
        return replace(self._map(lambda t: t), **masks)

    def split(self, size: int) -> list[Self]:
        """Consecutive micro-batches of at most ``size`` episodes."""
        return [self.select(slice(i, i + size)) for i in range(0, len(self), size)]

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Self:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return type(self)(**{k: v if v is None else fn(v) for k, v in values.items()})


@dataclass(kw_only=True)
class PreparedBatch(Batch):
    """A batch with what a clipped policy loss needs, computed once before the optimisation
    passes (:meth:`repogym.agents.plumbing.LossPlumbing.policy_term` reads it).

    Attributes:
        prox_logp: ``[B, T]`` log-probabilities of the policy the clipped ratio is taken to:
            the learner's before the update (recomputed), or the behaviour's
            (``old_logp``); under an off-policy correction the proximal policy.
        advantages: ``[B]`` (one per episode, spread over its completion tokens) or
            ``[B, T]`` (one per token).
        ref_logp: ``[B, T]`` the reference model's log-probabilities of the completion
            tokens (None without a KL term).
    """

    prox_logp: torch.Tensor
    advantages: torch.Tensor
    ref_logp: torch.Tensor | None = None


@dataclass(frozen=True)
class LossNorm:
    """The optimiser batch's counts every micro-batch's loss divides by (summed over every
    data-parallel rank), so that the accumulated gradient is the whole batch's.

    Attributes:
        num_tokens: Completion tokens in the loss.
        num_seqs: Episodes with at least one such token.
        num_obs_tokens: Observation tokens (the Echo term's denominator).
        norm_len: The constant length of ``seq_mean_token_sum_norm`` (None: the batch's
            width).
        num_turns: Valid turns (PPO's value loss; None where there is no critic).
    """

    num_tokens: torch.Tensor
    num_seqs: torch.Tensor
    num_obs_tokens: torch.Tensor
    norm_len: float | None = None
    num_turns: torch.Tensor | None = None

    def aggregation(self) -> dict[str, Any]:
        """Keyword arguments of :func:`repogym.agents.losses.aggregate` (and the policy
        losses): ``global_num_tokens``, ``global_num_seqs`` and ``norm_len``."""
        out: dict[str, Any] = {
            "global_num_tokens": self.num_tokens,
            "global_num_seqs": self.num_seqs,
        }
        if self.norm_len is not None:
            out["norm_len"] = self.norm_len
        return out
