"""KL to a reference policy, the exact KL between two distributions, and entropy.

- :func:`kl` (Schulman's k1/k2/k3 estimators and verl's ``low_var_kl``), :func:`kl_loss`
  and :func:`kl_reward_penalty`, with what each one's *gradient* is (see :func:`kl_loss`);
- :func:`full_kl`: the exact KL over the vocabulary (distillation);
- :func:`entropy_from_logits`.
"""

from __future__ import annotations

from typing import Literal

import torch

from repogym.agents.losses.aggregation import LOG_RATIO_CLAMP, check_choice

__all__ = ["KLKind", "entropy_from_logits", "full_kl", "kl", "kl_loss", "kl_reward_penalty"]

KLKind = Literal["k1", "k2", "k3", "low_var_kl"]


def kl(logp: torch.Tensor, ref_logp: torch.Tensor, kind: KLKind = "k3") -> torch.Tensor:
    """Per-token estimates of the *value* of KL(pi || pi_ref) from tokens sampled from pi.

    With ``log_r = ref_logp - logp`` (Schulman 2020): ``k1 = -log_r`` (unbiased, high
    variance, can be negative), ``k2 = log_r**2 / 2`` (biased, low variance),
    ``k3 = exp(log_r) - 1 - log_r`` (unbiased, low variance, >= 0), ``low_var_kl`` = k3
    clamped to [-10, 10] (verl's name). What their *gradients* estimate differs: see
    :func:`kl_loss`.

    Args:
        logp: Log-probabilities of the sampled tokens under the policy.
        ref_logp: The same under the reference policy.
        kind: Which estimator.

    Returns:
        Per-token estimates shaped like ``logp``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    check_choice("kind", kind, KLKind)
    log_r = ref_logp - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r.square()
    log_r = log_r.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    k3 = torch.expm1(log_r) - log_r
    return k3.clamp(-10.0, 10.0) if kind == "low_var_kl" else k3


def kl_loss(logp: torch.Tensor, ref_logp: torch.Tensor, kind: KLKind = "k2") -> torch.Tensor:
    """A per-token KL term to *differentiate* (add ``beta * aggregate(...)`` to the loss).

    On tokens sampled from pi (on-policy), the expected gradient of each estimator is:

    - ``k2``: ``E[(log pi - log pi_ref) grad log pi] = grad KL(pi || pi_ref)``: the reverse KL
      the penalty is meant to be. The default.
    - ``k3`` / ``low_var_kl``: ``E[(1 - pi_ref/pi) grad log pi] = -sum_x pi_ref(x) grad log
      pi(x) = grad KL(pi_ref || pi)``: the *forward* KL (GRPO paper, TRL's ``beta``, verl's
      ``low_var_kl``), mode-covering; its value estimates the reverse KL, its gradient does not.
    - ``k1``: ``E[grad log pi] = 0``: no signal, only noise; refused here. Put k1 in the reward
      instead (:func:`kl_reward_penalty`).

    Args:
        logp: Log-probabilities of the sampled tokens under the policy (with gradient).
        ref_logp: The same under the frozen reference.
        kind: ``k2``, ``k3`` or ``low_var_kl``.

    Returns:
        Per-token terms shaped like ``logp``.

    Raises:
        ValueError: For ``k1`` or an unknown kind (the message names the fix).
    """
    if kind == "k1":
        raise ValueError(
            "k1 as a loss has zero expected gradient (E[grad log pi] = 0). Fix: kl_kind='k2' "
            "(gradient of KL(pi||ref)) or kl_mode='reward' (k1 in the reward)"
        )
    return kl(logp, ref_logp, kind)


def kl_reward_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, beta: float) -> torch.Tensor:
    """k1 in the reward: the per-token penalty ``-beta (log pi - log pi_ref)``, no gradient.

    Subtracted from the rewards before the advantages are computed (verl's
    ``use_kl_in_reward``), the policy-gradient estimator ``E[(R - beta sum_t k1_t) grad log
    pi]`` is unbiased for ``grad (E[R] - beta KL(pi || pi_ref))``: the reverse KL.

    Returns:
        ``[..]`` penalties shaped like ``logp`` (detached).
    """
    return -beta * kl(logp.detach(), ref_logp.detach(), "k1")


def full_kl(
    student_logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    direction: Literal["forward", "reverse"] = "forward",
) -> torch.Tensor:
    """Exact KL between two next-token distributions over the last axis ``[..., V] -> [...]``.

    ``forward``: ``KL(teacher || student) = sum_v p_T (log p_T - log p_S)`` (mode covering);
    ``reverse``: ``KL(student || teacher) = sum_v p_S (log p_S - log p_T)`` (mode seeking).
    """
    if direction == "forward":
        return (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)
    if direction == "reverse":
        return (student_logp.exp() * (student_logp - teacher_logp)).sum(-1)
    raise ValueError(f"unknown KL direction {direction!r}; expected 'forward' or 'reverse'")


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution over the last axis, ``logsumexp - E[logits]``.

    Args:
        logits: Unnormalised log-probabilities ``[..., V]``.

    Returns:
        Entropies ``[...]`` in nats.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
