"""Reducing per-token losses to scalars, and the two losses that are nothing more.

:func:`aggregate` is verl's ``agg_loss`` (four modes, with global normalisers so gradient
accumulation over micro-batches equals one large batch); :func:`value_loss` (PPO's clipped
critic loss) and :func:`echo_loss` (next-token loss on observation tokens) are masked token
means of it. Also the helpers every loss module shares: :func:`check_choice` and
:data:`LOG_RATIO_CLAMP`. Shapes: ``B`` sequences, ``T`` time steps or tokens.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

__all__ = ["LOG_RATIO_CLAMP", "AggMode", "aggregate", "check_choice", "echo_loss", "value_loss"]

AggMode = Literal[
    "token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"
]

LOG_RATIO_CLAMP = 20.0
"""Log importance ratios are clamped to +-this before ``exp`` (as verl does), against overflow."""


def check_choice(name: str, value: str, literal: object) -> None:
    """Raise a ValueError naming ``value`` and the allowed values of the ``Literal``."""
    allowed = get_args(literal)
    if value not in allowed:
        raise ValueError(
            f"unknown {name} {value!r}; expected one of {', '.join(map(repr, allowed))}"
        )


def aggregate(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    agg: AggMode = "token_mean",
    *,
    global_num_tokens: float | torch.Tensor | None = None,
    global_num_seqs: float | torch.Tensor | None = None,
    norm_len: float | None = None,
) -> torch.Tensor:
    """Reduce a ``[B, T]`` loss matrix to a scalar over the masked entries (verl's ``agg_loss``).

    - ``token_mean``: sum of masked losses / number of masked tokens (DAPO, TRL ``bnpo``/``dapo``).
    - ``seq_mean_token_mean``: per-sequence token mean, then mean over sequences (GRPO paper,
      TRL ``grpo``).
    - ``seq_mean_token_sum``: per-sequence token sum, then mean over sequences.
    - ``seq_mean_token_sum_norm``: per-sequence token sum divided by a constant length
      ``norm_len`` (default ``T``), then mean over sequences (Dr. GRPO, TRL ``dr_grpo``). Note:
      verl's mode of this name omits the mean over sequences (its value is ours times ``B``).

    Sequences with no masked token are left out of the sequence count. Gradient accumulation:
    pass the counts of the whole optimiser batch as ``global_num_tokens`` / ``global_num_seqs``
    (and a fixed ``norm_len``); then the sum of the micro-batch losses equals the loss of the
    whole batch, and so do the gradients.

    Args:
        loss_mat: Per-token losses ``[B, T]``.
        mask: 1 for tokens that count, ``[B, T]`` (bool or float).
        agg: Aggregation mode.
        global_num_tokens: Token count normaliser for ``token_mean`` (default: this mask's).
        global_num_seqs: Sequence count normaliser for the ``seq_mean_*`` modes (default: this
            batch's non-empty sequences).
        norm_len: Constant length for ``seq_mean_token_sum_norm`` (default ``T``).

    Returns:
        A scalar tensor.

    Raises:
        ValueError: For an unknown ``agg``.
    """
    check_choice("agg", agg, AggMode)
    mask = mask.to(loss_mat.dtype)
    masked = loss_mat * mask
    if agg == "token_mean":
        count = mask.sum() if global_num_tokens is None else global_num_tokens
        return masked.sum() / _at_least_one(count, loss_mat)
    tokens_per_seq = mask.sum(dim=-1)
    seq_losses = masked.sum(dim=-1)
    if agg == "seq_mean_token_mean":
        seq_losses = seq_losses / tokens_per_seq.clamp(min=1.0)
    elif agg == "seq_mean_token_sum_norm":
        seq_losses = seq_losses / (loss_mat.shape[-1] if norm_len is None else norm_len)
    count = (tokens_per_seq > 0).sum() if global_num_seqs is None else global_num_seqs
    return seq_losses.sum() / _at_least_one(count, loss_mat)


def _at_least_one(count: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``count`` as a tensor of ``like``'s dtype, floored at 1 so empty batches give 0."""
    return torch.as_tensor(count, dtype=like.dtype, device=like.device).clamp(min=1.0)


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


def echo_loss(
    logp: torch.Tensor, obs_mask: torch.Tensor, num_tokens: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Mean negative log-likelihood of the observation tokens (the Echo term).

    Args:
        logp: ``[B, T]`` log-probabilities of each token given its prefix.
        obs_mask: ``[B, T]``, 1 on observation tokens.
        num_tokens: Normaliser (default: this mask's count), e.g. the whole batch's count when
            accumulating micro-batches.

    Returns:
        A scalar; 0 when there is no observation token.
    """
    return aggregate(-logp, obs_mask, "token_mean", global_num_tokens=num_tokens)
