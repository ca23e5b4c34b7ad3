"""Advantages: GAE with a critic, group baselines without one, distillation's per token.

- :func:`gae`: generalised advantage estimation over one time axis (PPO).
- :func:`group_advantages`: critic-free baselines over groups of samples of one prompt
  (GRPO, Dr. GRPO, RLOO).
- :func:`opd_advantages`: on-policy distillation's per-token advantage.
"""

from __future__ import annotations

from typing import Literal

import torch

from repogym.agents.losses.aggregation import check_choice

__all__ = ["GroupMode", "gae", "group_advantages", "opd_advantages"]

GroupMode = Literal["grpo", "dr_grpo", "rloo"]


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor | float,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over the last axis.

    ``delta_t = r_t + gamma (1 - done_t) V_{t+1} - V_t`` with ``V_T = last_value``, and
    ``A_t = delta_t + gamma lam (1 - done_t) A_{t+1}``; returns are ``A + V``.

    Truncation is not termination: at the end of the rollout pass ``last_value = 0`` if the
    episode terminated and ``V(s_T)`` if it was truncated (cut by a step budget). A truncation
    in the middle of the rollout is handled as in SB3: add ``gamma * V(s_final)`` to that step's
    reward and mark it done.

    Args:
        rewards: Rewards ``[T]`` or ``[B, T]``.
        values: Critic values ``V(s_t)``, same shape as ``rewards``.
        dones: 1 where the episode ended after step ``t`` (bool or float), same shape.
        last_value: Bootstrap value after the last step: a scalar, or ``[B]`` for batched input.
        gamma: Discount factor.
        lam: GAE lambda; 1 gives discounted returns minus V, 0 gives one-step TD errors.

    Returns:
        ``(advantages, returns)``, each shaped like ``rewards``.

    Raises:
        ValueError: If the shapes of ``rewards``, ``values`` and ``dones`` differ.
    """
    if not (rewards.shape == values.shape == dones.shape):
        raise ValueError(
            f"rewards, values and dones must have one shape; got {tuple(rewards.shape)}, "
            f"{tuple(values.shape)}, {tuple(dones.shape)}"
        )
    not_done = 1.0 - dones.to(values.dtype)
    next_value = torch.as_tensor(last_value, dtype=values.dtype, device=values.device)
    next_value = next_value.expand(values.shape[:-1])
    next_adv = torch.zeros_like(next_value)
    advantages = torch.empty_like(values)
    for t in reversed(range(values.shape[-1])):
        delta = rewards[..., t] + gamma * not_done[..., t] * next_value - values[..., t]
        next_adv = delta + gamma * lam * not_done[..., t] * next_adv
        advantages[..., t] = next_adv
        next_value = values[..., t]
    return advantages, advantages + values


def group_advantages(
    rewards: torch.Tensor, group_size: int, mode: GroupMode = "grpo", eps: float = 1e-6
) -> torch.Tensor:
    """Critic-free advantages from groups of samples of the same prompt.

    Consecutive runs of ``group_size`` rewards form one group.

    - ``grpo``: ``(r - mean) / (std + eps)`` with the unbiased (n-1) group std, as in
      DeepSeekMath, TRL and verl. Rewards {1, 0} give +-0.7071; an all-equal group gives 0.
    - ``dr_grpo``: ``r - mean`` (Dr. GRPO, Liu et al. 2025: no std normalisation).
    - ``rloo``: ``r - mean of the other samples`` = ``G / (G - 1) * (r - mean)``.

    Args:
        rewards: Rewards of any shape with ``numel`` divisible by ``group_size``.
        group_size: Samples per prompt, at least 2.
        mode: Which baseline/normalisation to use.
        eps: Added to the std for ``grpo``.

    Returns:
        Advantages shaped like ``rewards``.

    Raises:
        ValueError: For an unknown ``mode``, ``group_size < 2``, or a size mismatch.
    """
    check_choice("mode", mode, GroupMode)
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 to form a baseline; got {group_size}")
    if rewards.numel() % group_size:
        raise ValueError(
            f"{rewards.numel()} rewards do not split into groups of {group_size}; "
            "pass a whole number of groups"
        )
    grouped = rewards.reshape(-1, group_size)
    centred = grouped - grouped.mean(dim=-1, keepdim=True)
    if mode == "grpo":
        out = centred / (grouped.std(dim=-1, keepdim=True) + eps)
    elif mode == "dr_grpo":
        out = centred
    else:
        out = centred * (group_size / (group_size - 1))
    return out.reshape(rewards.shape)


def opd_advantages(student_token_logp: torch.Tensor, teacher_token_logp: torch.Tensor):
    """On-policy distillation's per-token advantage ``-(log pi_S(a_t) - log pi_T(a_t))``.

    The bracket is the one-sample estimate of the reverse KL at that position; tokens the
    teacher finds likelier than the student get a positive advantage. No gradient.
    """
    return -(student_token_logp - teacher_token_logp).detach()
