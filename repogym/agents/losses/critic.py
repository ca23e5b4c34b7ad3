"""Critics without a value head: the yes/no token critic's loss, and success estimates.

- :func:`yes_no_value`: the probability of "yes" against "no", normalised over those two
  tokens, from the LM head's two logits: ``sigmoid(z_yes - z_no)``.
- :func:`token_critic_loss`: binary cross-entropy of that probability against a target in
  ``[0, 1]`` (the episode's outcome, or a Monte-Carlo value as a soft target); its gradient
  with respect to ``z_yes`` is ``(p - target) / n`` and the opposite for ``z_no``.
- :func:`wilson_interval`: the Wilson score interval of a success fraction (``k`` of ``n``).
- :func:`beta_mixed_prob`: the probability that a group of ``G`` samples holds both a
  success and a failure when the success rate has a Beta posterior.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from repogym.agents.losses.aggregation import aggregate

__all__ = ["beta_mixed_prob", "token_critic_loss", "wilson_interval", "yes_no_value"]


def yes_no_value(logit_yes: torch.Tensor, logit_no: torch.Tensor) -> torch.Tensor:
    """``p(yes) / (p(yes) + p(no)) = sigmoid(logit_yes - logit_no)`` (any shape)."""
    return torch.sigmoid(logit_yes.float() - logit_no.float())


def token_critic_loss(
    logit_yes: torch.Tensor,
    logit_no: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor,
    *,
    global_count: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean binary cross-entropy of :func:`yes_no_value` against ``targets``.

    ``-(t log p + (1 - t) log(1 - p))`` with ``p = sigmoid(z_yes - z_no)``, computed from the
    logit difference (stable for large logits).

    Args:
        logit_yes: The LM head's logit of the "yes" token, ``[B, K]`` (with gradient).
        logit_no: The logit of the "no" token, same shape.
        targets: Targets in ``[0, 1]`` (outcomes, or soft targets such as MC values).
        mask: 1 where the loss counts.
        global_count: Normaliser for gradient accumulation (default: ``mask``'s count).

    Returns:
        A scalar: the masked mean (0 for an empty mask).

    Raises:
        ValueError: If a target lies outside ``[0, 1]``.
    """
    live = targets[mask.bool()]
    if live.numel() and (float(live.min()) < 0.0 or float(live.max()) > 1.0):
        raise ValueError("token critic targets must lie in [0, 1]; clamp the rewards first")
    z = logit_yes.float() - logit_no.float()
    bce = F.binary_cross_entropy_with_logits(z, targets.to(z.dtype), reduction="none")
    return aggregate(bce, mask, "token_mean", global_num_tokens=global_count)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success fraction ``successes / n`` at ``z`` (1.96: 95%).

    Raises:
        ValueError: For ``n < 1`` or ``successes`` outside ``[0, n]``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1; got {successes} of {n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def beta_mixed_prob(alpha: float, beta: float, group_size: int) -> float:
    """``P(a group of G holds a success and a failure)`` when ``p ~ Beta(alpha, beta)``.

    ``1 - E[p^G] - E[(1 - p)^G]`` with ``E[p^G] = prod_{i<G} (alpha + i) / (alpha + beta + i)``:
    the chance that the group gives GRPO a gradient at all.
    """
    if alpha <= 0 or beta <= 0 or group_size < 1:
        raise ValueError(
            f"need alpha, beta > 0 and group_size >= 1; got {alpha}, {beta}, {group_size}"
        )
    all_yes = all_no = 1.0
    for i in range(group_size):
        all_yes *= (alpha + i) / (alpha + beta + i)
        all_no *= (beta + i) / (alpha + beta + i)
    return max(0.0, 1.0 - all_yes - all_no)
