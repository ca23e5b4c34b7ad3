"""A batch of episodes as padded tensors: the one input of every trainer.

:func:`repogym.agents.episode.collate` builds a :class:`Batch` from episodes; trainers
move it to their device, add their own tensors to ``extras`` (advantages, returns,
reference log-probabilities, ...) and split it into micro-batches.

Alignment convention of every per-token tensor ``[B, T]``: position ``t`` is token ``t``;
``logp[b, t] = log pi(input_ids[b, t] | input_ids[b, :t])`` (0 at ``t = 0``), so the action
mask selects the log-probabilities of the completion tokens directly; ``values[b, t]`` is the
value of the state that ends with token ``t``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

__all__ = ["Batch"]


@dataclass
class Batch:
    """Episodes padded on the right: the input of every trainer.

    Per-token tensors are ``[B, T]``; per-episode ones ``[B]``; per-turn ones ``[B, K]``
    (padded with -1). ``extras`` carries what a trainer adds (advantages, returns, reference
    logprobs, ...), indexed like the batch.

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
        extras: Trainer-specific tensors with a leading batch dimension.
    """

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
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

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

    def norm(self) -> dict[str, torch.Tensor]:
        """Global counts of this (optimiser) batch for :func:`repogym.agents.losses.aggregate`."""
        return {
            "global_num_tokens": self.action_mask.sum(),
            "global_num_seqs": (self.action_mask.sum(-1) > 0).sum(),
        }

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor on ``device``."""
        return self._map(lambda t: t.to(device))

    def select(self, index: torch.Tensor | slice) -> Batch:
        """The episodes at ``index`` (a slice or an index tensor)."""
        return self._map(lambda t: t[index])

    def zeroed(self) -> Batch:
        """A copy whose loss masks (``action_mask``, ``obs_mask`` and ``*_mask`` extras) are
        zero: a forward/backward pass of it adds nothing to any loss."""
        out = self._map(lambda t: t)
        out.action_mask = torch.zeros_like(self.action_mask)
        out.obs_mask = torch.zeros_like(self.obs_mask)
        for key, value in self.extras.items():
            if key.endswith("_mask"):
                out.extras[key] = torch.zeros_like(value)
        return out

    def split(self, size: int) -> list[Batch]:
        """Consecutive micro-batches of at most ``size`` episodes."""
        return [self.select(slice(i, i + size)) for i in range(0, len(self), size)]

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extras"}
        mapped = {k: fn(v) for k, v in values.items()}
        return Batch(**mapped, extras={k: fn(v) for k, v in self.extras.items()})
