"""PPO with a critic for multi-turn LM episodes: GAE over turns, clipped value loss.

The time step is the agent's turn, as in the environment: state ``s_k`` is the context up to
the ``k``-th action (its value is read at the last token before the action), the reward is 0
on every turn but the last, which gets the episode's return. :func:`turn_advantages` runs
:func:`repogym.agents.losses.gae` per episode:

- terminated (``submit``): the bootstrap value after the last turn is 0;
- truncated by the step budget (TimeLimit): it is ``V(s_T)``, the critic's value of the
  state after the last action (read at the last token of the final observation) -- truncation
  is not termination;
- infrastructure errors are masked out of every loss.

Each turn's advantage goes to every token of its action; the policy loss is PPO's clipped
surrogate (:func:`repogym.agents.losses.policy_loss`), the value loss is clipped around the
old values (:func:`value_loss`). The critic is a value head on the policy's last hidden state
(``critic="head"``) or a separate copy of the model with its own head (``critic="separate"``).

Run it: ``repogym train --algo ppo --model tiny --steps 20 --out runs/ppo``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import torch

from repogym.agents.common import TrainConfig, Trainer, autocast, optimise_epochs
from repogym.agents.grpo import _first_action
from repogym.agents.losses import AggMode, aggregate, gae, policy_loss
from repogym.agents.policy import Batch, Policy

__all__ = ["PPOConfig", "PPOTrainer", "turn_advantages", "value_loss"]


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
        ent_coef: Entropy bonus weight.
        epochs: Optimisation passes per batch.
        norm_adv: Normalise advantages over the batch's valid turns.
        agg: Policy loss aggregation.
        critic_lr: Learning rate of a separate critic (default ``lr``).
        async_: Train with asynchronous rollout workers: True, or a dict of
            :class:`repogym.agents.async_rl.AsyncOptions` fields; None/False: synchronous.
    """

    critic: Literal["head", "separate"] = "head"
    gamma: float = 1.0
    lam: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    vf_clip: float | None = 0.2
    ent_coef: float = 0.0
    epochs: int = 4
    norm_adv: bool = True
    agg: AggMode = "token_mean"
    critic_lr: float | None = None
    async_: bool | dict | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic not in ("head", "separate"):
            raise ValueError(f"critic must be 'head' or 'separate'; got {self.critic!r}")


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None,
    *,
    global_count: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """PPO's value loss ``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, +-c) - R)^2))``.

    Args:
        values: New values (with gradient).
        old_values: Values when the batch was collected.
        returns: Targets.
        mask: 1 where the loss counts.
        clip: ``c``; None gives the plain squared error.
        global_count: Normaliser for gradient accumulation (default: ``mask``'s count).

    Returns:
        A scalar: the masked mean (0 for an empty mask).
    """
    loss = (values - returns).square()
    if clip is not None:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns).square())
    return 0.5 * aggregate(loss, mask, "token_mean", global_num_tokens=global_count)


def turn_advantages(
    batch: Batch, state_values: torch.Tensor, final_values: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the turns of each episode, with the truncation bootstrap.

    Args:
        batch: The episodes (``rewards``, ``n_turns``, ``terminated``, ``truncated``).
        state_values: ``[B, K]`` values ``V(s_k)`` before each action.
        final_values: ``[B]`` values ``V(s_T)`` of the state after the last action.
        gamma: Discount per turn.
        lam: GAE lambda.

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
        dones = torch.zeros_like(rewards)
        bootstrap = bool(batch.truncated[b]) and not bool(batch.terminated[b])
        dones[-1] = 0.0 if bootstrap else 1.0
        last = final_values[b] if bootstrap else 0.0
        adv[b, :k], ret[b, :k] = gae(rewards, state_values[b, :k], dones, last, gamma, lam)
    return adv, ret


class PPOTrainer(Trainer):
    """PPO with a critic on LM policies in RepoEnv episodes. See the module docstring.

    Args:
        config: :class:`PPOConfig`.
        **kwargs: ``policy``, ``interface``, ``pool``, ``extra_terms`` (see
            :class:`repogym.agents.common.Trainer`).
    """

    config: PPOConfig
    value_head = True

    def __init__(self, config: PPOConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        groups = [{"params": [p for p in self.policy.parameters() if p.requires_grad]}]
        self.critic: Policy | None = None
        if config.critic == "separate":
            self.critic = self.policy.frozen_copy().requires_grad_(True).train()
            if self.critic.value_head is None:
                raise ValueError("critic='separate' needs a policy with a value head")
            groups.append(
                {"params": list(self.critic.parameters()), "lr": config.critic_lr or config.lr}
            )
        self.optimizer = torch.optim.AdamW(groups, lr=config.lr, weight_decay=0.0)

    def _values(self, mb: Batch, scores_values: torch.Tensor | None) -> torch.Tensor:
        """``[B, T]`` values from the value head or the separate critic."""
        if self.critic is None:
            return scores_values
        return self.critic.score(mb.input_ids, mb.attention_mask, with_values=True).values

    def update(self, batch: Batch) -> dict[str, float]:
        """``epochs`` optimiser steps on ``batch``; returns the metrics of the step."""
        cfg = self.config
        start = time.monotonic()
        batch = batch.to(self.device)
        self._prepare(batch)
        norm = {"global_num_tokens": batch.action_mask.sum()}
        num_turns = batch.extras["turn_mask"].sum()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        return optimise_epochs(
            batch, lambda mb: self._micro_step(mb, norm, num_turns), params, self.optimizer,
            epochs=cfg.epochs, micro_batch=cfg.micro_batch, max_grad_norm=cfg.max_grad_norm,
            start=start,
        )  # fmt: skip

    @torch.no_grad()
    def _prepare(self, batch: Batch) -> None:
        """Old logprobs and values, turn advantages and returns, per-token advantages."""
        cfg = self.config
        logps, values = [], []
        for mb in batch.split(cfg.micro_batch):
            with autocast(self.device, cfg.bf16):
                s = self.policy.score(mb.input_ids, mb.attention_mask,
                                      with_values=self.critic is None,
                                      keep_from=_first_action(mb))  # fmt: skip
                logps.append(s.logp)
                values.append(self._values(mb, s.values).float())
        old_values = torch.cat(values)
        batch.extras["old_logp"] = torch.cat(logps)
        batch.extras["old_values"] = old_values
        state_pos = batch.state_pos.clamp(min=0)
        state_values = old_values.gather(1, state_pos)
        final_values = old_values.gather(1, batch.final_pos[:, None]).squeeze(1)
        adv, ret = turn_advantages(batch, state_values, final_values, cfg.gamma, cfg.lam)
        turn_mask = (batch.state_pos >= 0) & batch.valid[:, None]
        if cfg.norm_adv and turn_mask.sum() > 1:
            mean, std = adv[turn_mask].mean(), adv[turn_mask].std()
            adv = torch.where(turn_mask, (adv - mean) / (std + 1e-8), 0.0)
        batch.extras["turn_returns"] = ret
        batch.extras["turn_mask"] = turn_mask
        token_turn = batch.turn_index.clamp(min=0)
        batch.extras["advantages"] = torch.where(
            batch.turn_index >= 0, adv.gather(1, token_turn.clamp(max=adv.shape[1] - 1)), 0.0
        )

    def _micro_step(
        self, mb: Batch, norm: dict[str, Any], num_turns: torch.Tensor
    ) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        with autocast(self.device, cfg.bf16):
            scores = self.policy.score(
                mb.input_ids, mb.attention_mask, with_entropy=True,
                with_values=self.critic is None, keep_from=_first_action(mb),
                entropy_grad=bool(cfg.ent_coef),
            )  # fmt: skip
            values = self._values(mb, scores.values).float()
        mask = mb.action_mask
        adv = mb.extras["advantages"]
        if "behaviour_weight" in mb.extras:  # async_: decoupled correction (async_rl)
            adv = adv * mb.extras["behaviour_weight"]
        pl, metrics = policy_loss(
            scores.logp, mb.extras["old_logp"], adv, mask,
            kind="ppo", eps_low=cfg.clip, eps_high=cfg.clip, agg=cfg.agg, **norm,
        )  # fmt: skip
        pos = mb.state_pos.clamp(min=0)
        vl = value_loss(
            values.gather(1, pos), mb.extras["old_values"].gather(1, pos),
            mb.extras["turn_returns"], mb.extras["turn_mask"], cfg.vf_clip,
            global_count=num_turns,
        )  # fmt: skip
        entropy = aggregate(scores.entropy, mask, cfg.agg, **norm)
        terms = {
            "policy": (1.0, pl),
            "value": (cfg.vf_coef, vl),
            "entropy": (cfg.ent_coef, -entropy),
            "kl": (0.0, scores.logp.new_zeros(())),
        }
        return self._backward(terms, mb, scores, metrics)
