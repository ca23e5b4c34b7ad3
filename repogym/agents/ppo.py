"""PPO with a critic for multi-turn LM episodes: GAE over turns, clipped value loss.

The time step is the agent's turn: state ``s_k`` is the context up to the ``k``-th
completion (its value is read at the last token before it); the reward is 0 on every turn
but the last, which gets the episode's return. :func:`turn_advantages` runs
:func:`repogym.agents.losses.gae` per episode:

- graded (``submit``, or RepoEnv's graded truncation at the step budget): the outcome is
  final, the bootstrap value after the last turn is 0;
- cut without grading (``Episode.bootstrap``): it is ``V(s_T)``, the critic's value of the
  state after the last action -- truncation is not termination;
- infrastructure errors are masked out of every loss.

Each turn's advantage goes to every token of its completion; the policy loss is PPO's clipped
surrogate with the batch's global token and sequence counts, the value loss is clipped around
the old values. A KL to the initial policy works as in GRPO: ``kl_mode="loss"`` adds the term,
``kl_mode="reward"`` subtracts ``beta * k1`` summed over each turn's tokens from that turn's
reward. The critic is a value head on the policy (``critic="head"``) or a separate copy of
the model with its own head (``critic="separate"``).

Run it: ``repogym train --algo ppo --model PATH --steps 20 --out runs/ppo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from repogym.agents.batch import Batch
from repogym.agents.config import TrainConfig
from repogym.agents.losses import AggMode, gae, kl_reward_penalty, value_loss
from repogym.agents.policy import Policy
from repogym.agents.trainer import Trainer

__all__ = ["PPOConfig", "PPOTrainer", "turn_advantages"]


@dataclass
class PPOConfig(TrainConfig):
    """PPO settings.

    Attributes:
        critic: ``head`` (value head on the policy) or ``separate`` (a copy of the model).
        gamma: Discount per turn.
        lam: GAE lambda.
        clip: Policy clip range (``eps_low = eps_high``).
        vf_coef: Value loss weight.
        vf_clip: Value clip range around the old values; None disables clipping.
        epochs: Optimisation passes per batch.
        norm_adv: Normalise advantages over the batch's valid turns.
        agg: Policy loss aggregation.
        critic_lr: Learning rate of a separate critic (default ``lr``).
        async_: Asynchronous rollout workers (see :class:`repogym.agents.grpo.GRPOConfig`).
    """

    critic: Literal["head", "separate"] = "head"
    gamma: float = 1.0
    lam: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    vf_clip: float | None = 0.2
    epochs: int = 4
    norm_adv: bool = True
    agg: AggMode = "token_mean"
    critic_lr: float | None = None
    async_: bool | dict | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic not in ("head", "separate"):
            raise ValueError(f"critic must be 'head' or 'separate'; got {self.critic!r}")


def turn_advantages(
    batch: Batch, state_values: torch.Tensor, final_values: torch.Tensor, gamma: float,
    lam: float, turn_penalty: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """GAE over the turns of each episode; bootstrap only where the env did not grade.

    Args:
        batch: The episodes (``rewards``, ``n_turns``, ``bootstrap``).
        state_values: ``[B, K]`` values ``V(s_k)`` before each completion.
        final_values: ``[B]`` values ``V(s_T)`` of the state after the last completion.
        gamma: Discount per turn.
        lam: GAE lambda.
        turn_penalty: ``[B, K]`` extra per-turn rewards (the KL-in-reward penalty).

    Returns:
        ``(advantages, returns)``, each ``[B, K]`` (0 on padded turns).
    """
    adv = torch.zeros_like(state_values)
    ret = torch.zeros_like(state_values)
    for b in range(len(batch)):
        k = int(batch.n_turns[b])
        if k == 0:
            continue
        rewards = torch.zeros(k, dtype=state_values.dtype, device=state_values.device)
        rewards[-1] = batch.rewards[b]
        if turn_penalty is not None:
            rewards = rewards + turn_penalty[b, :k]
        bootstrap = bool(batch.bootstrap[b])
        dones = torch.zeros_like(rewards)
        dones[-1] = 0.0 if bootstrap else 1.0
        last = final_values[b] if bootstrap else 0.0
        adv[b, :k], ret[b, :k] = gae(rewards, state_values[b, :k], dones, last, gamma, lam)
    return adv, ret


def _per_turn(token_values: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Sum per-token values ``[B, T]`` over each turn's completion tokens: ``[B, K]``."""
    k = batch.state_pos.shape[1]
    out = torch.zeros(len(batch), k + 1, dtype=token_values.dtype, device=token_values.device)
    index = torch.where(batch.turn_index >= 0, batch.turn_index, k)
    return out.scatter_add_(1, index, token_values * batch.action_mask)[:, :k]


class PPOTrainer(Trainer):
    """PPO with a critic on LM policies in RepoEnv episodes. See the module docstring."""

    config: PPOConfig
    value_head = True

    critic: Policy | None = None

    def build_models(self) -> list[Policy]:
        """The separate critic (a copy of the model with its own value head), if asked for."""
        if self.config.critic != "separate":
            return []
        self.critic = self.policy.frozen_copy().requires_grad_(True).train()
        if self.critic.value_head is None:
            raise ValueError("critic='separate' needs a policy with a value head")
        return [self.critic]

    def param_groups(self) -> list[dict[str, Any]]:
        """The policy's parameters, and the critic's at ``critic_lr``."""
        groups = super().param_groups()
        if self.critic is not None:
            groups.append({"params": list(self.critic.parameters()),
                           "lr": self.config.critic_lr or self.config.lr})  # fmt: skip
        return groups

    def state_module(self) -> torch.nn.Module:
        """The policy, and the critic beside it when there is one."""
        if self.critic is None:
            return self.policy
        return torch.nn.ModuleDict({"policy": self.policy, "critic": self.critic})

    def state(self) -> dict[str, Any]:
        """The shared state and the separate critic's weights."""
        state = super().state()
        if self.critic is not None:
            state["critic"] = self.parallel.full_state_dict(self.critic)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`."""
        if self.critic is not None and "critic" in state:
            self.parallel.load_full_state_dict(self.critic, state["critic"])
        super().load_state(state)

    def values(self, mb: Batch, policy_values: torch.Tensor | None) -> torch.Tensor:
        """``[B, T]`` values from the value head or the separate critic."""
        if self.critic is None:
            return policy_values
        return self.critic.score(mb.input_ids, mb.attention_mask, mb.action_mask,
                                 with_values=True).values  # fmt: skip

    def update(self, batch: Batch) -> dict[str, float]:
        """``epochs`` optimiser steps on ``batch``; returns the metrics of the step."""
        cfg = self.config
        batch = batch.to(self.device)
        self.prepare(batch)
        norm = self.norm(batch)
        norm["num_turns"] = self.global_sum(batch.extras["turn_mask"].sum())
        return self.optimise(batch, lambda mb: self.micro_step(mb, norm), epochs=cfg.epochs)

    @torch.no_grad()
    def prepare(self, batch: Batch) -> None:
        """Old logprobs and values, turn advantages and returns, per-token advantages."""
        cfg = self.config
        scores = self.score_batch(batch, with_values=self.critic is None)
        values = scores.values
        if self.critic is not None:
            parts = [(self.values(mb, None), real) for mb, real in self.micro_batches(batch)]
            values = torch.cat([v for v, real in parts if real])
        behaviour = self.correction is not None and self.correction.name != "decoupled"
        batch.extras["old_logp"] = batch.old_logp if behaviour else scores.logp
        batch.extras["old_values"] = values
        penalty = None
        ref = self.ref_logp(batch)
        if ref is not None:
            batch.extras["ref_logp"] = ref
            if cfg.kl_mode == "reward":
                penalty = _per_turn(kl_reward_penalty(batch.old_logp, ref, cfg.beta), batch)
        state_values = values.gather(1, batch.state_pos.clamp(min=0))
        final_values = values.gather(1, batch.final_pos[:, None]).squeeze(1)
        adv, ret = turn_advantages(batch, state_values, final_values, cfg.gamma, cfg.lam,
                                   penalty)  # fmt: skip
        turn_mask = (batch.state_pos >= 0) & batch.valid[:, None]
        count = self.global_sum(turn_mask.sum())
        if cfg.norm_adv and count > 1:  # mean and unbiased std over every rank's valid turns
            mean = self.global_sum(adv[turn_mask].sum()) / count
            var = self.global_sum(((adv[turn_mask] - mean) ** 2).sum()) / (count - 1)
            adv = torch.where(turn_mask, (adv - mean) / (var.sqrt() + 1e-8), 0.0)
        batch.extras["turn_returns"] = ret
        batch.extras["turn_mask"] = turn_mask
        token_turn = batch.turn_index.clamp(min=0, max=adv.shape[1] - 1)
        batch.extras["advantages"] = torch.where(batch.turn_index >= 0,
                                                 adv.gather(1, token_turn), 0.0)  # fmt: skip

    def micro_step(self, mb: Batch, norm: dict[str, Any]) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        scores = self.score(mb, with_values=self.critic is None)
        values = self.values(mb, scores.values)
        pl, metrics = self.policy_term(scores.logp, mb, mb.extras["advantages"], norm,
                                       kind="ppo", eps_low=cfg.clip, eps_high=cfg.clip,
                                       agg=cfg.agg)  # fmt: skip
        pos = mb.state_pos.clamp(min=0)
        vl = value_loss(values.gather(1, pos), mb.extras["old_values"].gather(1, pos),
                        mb.extras["turn_returns"], mb.extras["turn_mask"], cfg.vf_clip,
                        global_count=norm["num_turns"])  # fmt: skip
        terms = {"policy": (1.0, pl), "value": (cfg.vf_coef, vl),
                 **self.common_terms(scores, mb, norm, cfg.agg)}  # fmt: skip
        return self.backward(terms, mb, scores, metrics)
