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
reward. The critic is a value head on the policy (``critic="head"``), a separate copy of
the model with its own head (``critic="separate"``), or the policy's own LM head answering a
yes/no question (``critic="token"``, :mod:`repogym.agents.critics`: no new parameters,
trained with a cross-entropy on the outcome, or on Monte-Carlo values as soft targets).

``advantage="mc"`` (VinePPO, Kazemnejad et al. 2024) replaces the critic's values in the
advantages by Monte-Carlo estimates: each turn's state is re-entered by forking the
environment and ``mc_rollouts`` continuations are sampled from it with the current policy
(:mod:`repogym.agents.mc`); the advantage of turn ``k`` is ``r_k + gamma V_mc(s_{k+1}) -
V_mc(s_k)`` (GAE with lambda 0; ``V_mc(s_T) = 0`` after a graded end). The critic, if any,
is still trained (the token critic on the MC values as soft targets).

Run it: ``repogym train --algo ppo --model PATH --steps 20 --out runs/ppo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch

from repogym.agents.batch import Batch, LossNorm, PreparedBatch
from repogym.agents.config import TrainConfig
from repogym.agents.critics import DEFAULT_QUESTION, TokenCritic
from repogym.agents.episode import Episode
from repogym.agents.losses import (
    AggMode,
    check_choice,
    gae,
    kl_reward_penalty,
    token_critic_loss,
    value_loss,
    yes_no_value,
)
from repogym.agents.mc import MCConfig, mc_turn_values
from repogym.agents.policy import Policy
from repogym.agents.trainer import Trainer

__all__ = ["MCBatch", "PPOBatch", "PPOConfig", "PPOTrainer", "turn_advantages"]


@dataclass
class PPOConfig(TrainConfig):
    """PPO settings.

    Attributes:
        critic: ``head`` (value head on the policy), ``separate`` (a copy of the model) or
            ``token`` (the policy's own yes/no answer to ``critic_question``).
        critic_question: The token critic's question, appended to each state.
        advantage: ``gae`` (the critic's values) or ``mc`` (Monte-Carlo values from
            ``mc_rollouts`` forked continuations per turn, lambda 0).
        mc_rollouts: Continuations per turn state with ``advantage=mc``.
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

    critic: Literal["head", "separate", "token"] = "head"
    critic_question: str = DEFAULT_QUESTION
    advantage: Literal["gae", "mc"] = "gae"
    mc_rollouts: int = 4
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
        check_choice("critic", self.critic, Literal["head", "separate", "token"])
        check_choice("advantage", self.advantage, Literal["gae", "mc"])
        if self.mc_rollouts < 1:
            raise ValueError(f"mc_rollouts must be >= 1; got {self.mc_rollouts}")


def turn_advantages(
    batch: Batch,
    state_values: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
    lam: float,
    turn_penalty: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
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


@dataclass(kw_only=True)
class MCBatch(Batch):
    """A collected batch with the Monte-Carlo values of its turns (``advantage=mc``).

    Attributes:
        mc_values: ``[B, K]`` ``V_mc(s_k)`` of each turn's state (0 on padded turns).
        mc_final: ``[B]`` ``V_mc(s_T)`` of the state after the last action (0 if graded).
    """

    mc_values: torch.Tensor
    mc_final: torch.Tensor


@dataclass(kw_only=True)
class PPOBatch(PreparedBatch):
    """PPO's prepared batch: ``advantages`` is ``[B, T]``, each turn's on its completion
    tokens (0 elsewhere).

    Attributes:
        turn_returns: ``[B, K]`` the value targets of the turns.
        turn_mask: ``[B, K]`` True on the valid turns of valid episodes (the value loss's).
        old_values: ``[B, T]`` the critic's values before the update (the clipped value
            loss's anchor); None with the token critic.
        critic_targets: ``[B, K]`` the token critic's targets in ``[0, 1]``; None otherwise.
    """

    LOSS_MASKS: ClassVar[tuple[str, ...]] = ("action_mask", "obs_mask", "turn_mask")

    turn_returns: torch.Tensor
    turn_mask: torch.Tensor
    old_values: torch.Tensor | None = None
    critic_targets: torch.Tensor | None = None


class PPOTrainer(Trainer):
    """PPO with a critic on LM policies in RepoEnv episodes. See the module docstring."""

    config: PPOConfig

    critic: Policy | None = None
    token_critic: TokenCritic | None = None

    @classmethod
    def wants_value_head(cls, config: PPOConfig) -> bool:  # type: ignore[override]
        """A value head on the policy unless the critic is the token critic."""
        return config.critic != "token"

    def build_models(self) -> list[Policy]:
        """The separate critic (a copy of the model with its own value head), if asked for."""
        if self.config.critic == "token":
            self.token_critic = TokenCritic(self.policy, self.config.critic_question)
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
            groups.append(
                {
                    "params": list(self.critic.parameters()),
                    "lr": self.config.critic_lr or self.config.lr,
                }
            )
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
        return self.critic.score(
            mb.input_ids, mb.attention_mask, mb.action_mask, with_values=True
        ).values

    def update(self, batch: Batch, episodes: Sequence[Episode] | None = None) -> dict[str, float]:
        """``epochs`` optimiser steps on ``batch``; returns the metrics of the step."""
        prepared = self.prepare(batch.to(self.device))
        norm = self.norm(prepared, num_turns=prepared.turn_mask.sum())
        return self.optimise(
            prepared,
            lambda mb: self.micro_step(mb, norm),
            epochs=self.config.epochs,
            optimizer=self.optimizer,
        )

    def collect(self, step: int) -> tuple[Batch | None, list[Episode], dict[str, float]]:
        """The step's episodes; with ``advantage=mc`` an :class:`MCBatch` of them (each turn's
        Monte-Carlo value too)."""
        batch, episodes, metrics = super().collect(step)
        if batch is None or self.config.advantage != "mc":
            return batch, episodes, metrics
        cfg = self.config
        mc = MCConfig(rollouts=cfg.mc_rollouts, seed=cfg.seed + 1000 * step + 500)
        with self.sampling():
            est = [
                mc_turn_values(
                    self.engine,
                    self.fmt,
                    self.pool,
                    ep,
                    cfg.rollout,
                    mc,
                    max_context=self.policy.max_len,
                    index=b,
                    seed=cfg.seed,
                )
                for b, ep in enumerate(episodes)
            ]
        self.engine.release()
        k_max = batch.state_pos.shape[1]
        values = torch.zeros(len(batch), k_max)
        final = torch.zeros(len(batch))
        for b, e in enumerate(est):
            values[b, : len(e.turns)] = torch.tensor([v.value for v in e.turns])
            final[b] = e.final.value if e.final is not None else 0.0
        rollouts = sum(e.rollouts for e in est)
        metrics.update(
            {
                "mc/rollouts": float(rollouts),
                "mc/replay_mismatches": float(sum(e.replay_mismatches for e in est)),
                "mc/value_mean": float(values[batch.state_pos >= 0].mean()),
            }
        )
        return MCBatch(**batch.batch_fields(), mc_values=values, mc_final=final), episodes, metrics

    @torch.no_grad()
    def prepare(self, batch: Batch) -> PPOBatch:
        """Old logprobs and values, turn advantages and returns, per-token advantages."""
        cfg = self.config
        with_values = self.critic is None and self.token_critic is None
        scores = self.score_batch(batch, with_values=with_values)
        behaviour = self.correction is not None and self.correction.name != "decoupled"
        old_values, state_values, final_values = self.prepare_values(batch, scores.values)
        penalty = None
        ref = self.ref_logp(batch)
        if ref is not None and cfg.kl_mode == "reward":
            penalty = _per_turn(kl_reward_penalty(batch.old_logp, ref, cfg.beta), batch)
        lam = cfg.lam
        if isinstance(batch, MCBatch):  # VinePPO: one-step TD over the MC values
            state_values, final_values, lam = batch.mc_values, batch.mc_final, 0.0
        adv, ret = turn_advantages(batch, state_values, final_values, cfg.gamma, lam, penalty)
        turn_mask = (batch.state_pos >= 0) & batch.valid[:, None]
        count = self.global_sum(turn_mask.sum())
        if cfg.norm_adv and count > 1:  # mean and unbiased std over every rank's valid turns
            mean = self.global_sum(adv[turn_mask].sum()) / count
            var = self.global_sum(((adv[turn_mask] - mean) ** 2).sum()) / (count - 1)
            adv = torch.where(turn_mask, (adv - mean) / (var.sqrt() + 1e-8), 0.0)
        targets = self.critic_targets(batch) if self.token_critic is not None else None
        token_turn = batch.turn_index.clamp(min=0, max=adv.shape[1] - 1)
        return PPOBatch(
            **batch.batch_fields(),
            prox_logp=batch.old_logp if behaviour else scores.logp,
            advantages=torch.where(batch.turn_index >= 0, adv.gather(1, token_turn), 0.0),
            ref_logp=ref,
            turn_returns=ret,
            turn_mask=turn_mask,
            old_values=old_values,
            critic_targets=targets,
        )

    def prepare_values(
        self, batch: Batch, policy_values: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """The critic's ``(old values [B, T] (None for the token critic), V(s_k) [B, K],
        V(s_T) [B])``."""
        if self.token_critic is not None:
            parts = [(self.token_values(mb), real) for mb, real in self.micro_batches(batch)]
            kept = [v for v, real in parts if real]
            return None, torch.cat([v for v, _ in kept]), torch.cat([f for _, f in kept])
        values = policy_values
        if self.critic is not None:
            parts = [(self.values(mb, None), real) for mb, real in self.micro_batches(batch)]
            values = torch.cat([v for v, real in parts if real])
        state_values = values.gather(1, batch.state_pos.clamp(min=0))
        return values, state_values, values.gather(1, batch.final_pos[:, None]).squeeze(1)

    def token_values(self, mb: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The token critic's ``p(yes)`` at each turn's state and at the final state."""
        lg = self.token_critic.state_logits(self.policy, mb)
        return yes_no_value(lg.yes, lg.no), yes_no_value(lg.final_yes, lg.final_no)

    @staticmethod
    def critic_targets(batch: Batch) -> torch.Tensor:
        """``[B, K]`` targets of the token critic: the MC values when the batch has them,
        else the episode's outcome (its reward clamped to ``[0, 1]``) at every turn."""
        if isinstance(batch, MCBatch):
            return batch.mc_values.clamp(0.0, 1.0)
        outcome = batch.rewards.clamp(0.0, 1.0)[:, None]
        return outcome.expand_as(batch.state_pos).to(torch.float32).clone()

    def micro_step(self, mb: PPOBatch, norm: LossNorm) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        scores = self.score(mb, with_values=self.critic is None and self.token_critic is None)
        pl, metrics = self.policy_term(
            scores.logp, mb, norm, kind="ppo", eps_low=cfg.clip, eps_high=cfg.clip, agg=cfg.agg
        )
        if self.token_critic is not None:
            lg = self.token_critic.state_logits(self.policy, mb)
            vl = token_critic_loss(
                lg.yes, lg.no, mb.critic_targets, mb.turn_mask, global_count=norm.num_turns
            )
        else:
            values = self.values(mb, scores.values)
            pos = mb.state_pos.clamp(min=0)
            vl = value_loss(
                values.gather(1, pos),
                mb.old_values.gather(1, pos),
                mb.turn_returns,
                mb.turn_mask,
                cfg.vf_clip,
                global_count=norm.num_turns,
            )
        terms = {
            "policy": (1.0, pl),
            "value": (cfg.vf_coef, vl),
            **self.common_terms(scores, mb, norm, cfg.agg),
        }
        return self.backward(terms, mb, scores, metrics)
