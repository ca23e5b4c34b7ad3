"""Memory-safe scoring: log-probabilities, entropies and KL from hidden states, in chunks.

The language-model head turns each hidden state into ``V`` logits; at Qwen's 152k
vocabulary one fp32 ``[B, T, V]`` copy for 16 x 4096 tokens is ~40 GB. Here only the
positions a loss needs are scored, ``chunk`` of them at a time: each chunk's logits are built
(in the autocast dtype), cast to fp32, reduced to per-token numbers and dropped; with autograd
on, the chunk is recomputed in the backward pass (activation checkpointing), so peak memory
is ``O(chunk * V)`` whatever ``T`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from repogym.agents.losses import full_kl

__all__ = ["Head", "chunked", "distill_stats", "token_stats"]

Head = tuple[torch.Tensor, torch.Tensor | None]
"""An LM head as ``(weight [V, H], bias [V] or None)``."""


def chunked(
    fn: Callable[..., tuple[torch.Tensor, ...]],
    rows: tuple[torch.Tensor, ...],
    shared: tuple[torch.Tensor | None, ...],
    chunk: int,
) -> tuple[torch.Tensor, ...]:
    """Apply ``fn(*row_chunk, *shared)`` to ``chunk`` rows at a time; concatenate the outputs.

    With grad enabled each call is checkpointed (recomputed in the backward pass).
    """
    n = rows[0].shape[0]
    if n == 0:
        return fn(*rows, *shared)
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (*rows, *shared)
    )
    parts = []
    for i in range(0, n, max(chunk, 1)):
        args = (*(r[i : i + chunk] for r in rows), *shared)
        parts.append(checkpoint(fn, *args, use_reentrant=False) if grad else fn(*args))
    return tuple(torch.cat(p) for p in zip(*parts, strict=True))


def _logits(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    return F.linear(hidden, weight, bias).float() / temperature


def _token_chunk(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = _logits(hidden, weight, bias, temperature)
    lse = logits.logsumexp(-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    entropy = lse - (logits.softmax(-1) * logits).sum(-1)
    return logp, entropy


def token_stats(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    head: Head,
    *,
    temperature: float = 1.0,
    chunk: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``log pi(target)`` and the entropy of ``pi`` for each row of ``hidden``.

    Args:
        hidden: ``[N, H]`` hidden states (the position *before* each target).
        targets: ``[N]`` token ids.
        head: The LM head.
        temperature: Logits are divided by it.
        chunk: Rows scored at once (peak memory ~ ``chunk * V`` floats, a few copies).

    Returns:
        ``(logp [N], entropy [N])`` in float32.
    """
    weight, bias = head
    return chunked(  # type: ignore[return-value]
        lambda h, t, w, b: _token_chunk(h, t, w, b, temperature),
        (hidden, targets),
        (weight, bias),
        chunk,
    )


def _distill_chunk(
    hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    t_weight: torch.Tensor,
    t_bias: torch.Tensor | None,
    temperature: float,
    direction: str,
) -> tuple[torch.Tensor, ...]:
    s = torch.log_softmax(_logits(hidden, weight, bias, temperature), -1)
    with torch.no_grad():
        t = torch.log_softmax(_logits(teacher_hidden, t_weight, t_bias, temperature), -1)
    pick = targets[:, None]
    loss_kl = full_kl(s, t, direction)  # type: ignore[arg-type]
    with torch.no_grad():
        other = full_kl(s, t, "reverse" if direction == "forward" else "forward")
        entropy = -(s.exp() * s).sum(-1)
    return s.gather(-1, pick).squeeze(-1), t.gather(-1, pick).squeeze(-1), loss_kl, other, entropy


def distill_stats(
    hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    targets: torch.Tensor,
    head: Head,
    teacher_head: Head,
    *,
    direction: Literal["forward", "reverse"],
    temperature: float = 1.0,
    chunk: int = 1024,
) -> dict[str, torch.Tensor]:
    """Student and teacher token log-probs and the exact per-position KL, chunked.

    Args:
        hidden: ``[N, H]`` student hidden states (with gradient).
        teacher_hidden: ``[N, H_t]`` teacher hidden states at the aligned positions.
        targets: ``[N]`` token ids.
        head: The student's LM head.
        teacher_head: The teacher's LM head (one vocabulary with the student's).
        direction: Which KL carries the gradient (the other is reported without gradient).
        temperature: Logits are divided by it.
        chunk: Rows at once.

    Returns:
        ``logp``, ``teacher_logp``, ``kl`` (of ``direction``, with gradient), ``kl_other`` and
        ``entropy`` (the student's, without gradient).
    """
    out = chunked(
        lambda h, th, t, w, b, tw, tb: _distill_chunk(
            h, th, t, w, b, tw, tb, temperature, direction
        ),
        (hidden, teacher_hidden, targets),
        (*head, *teacher_head),
        chunk,
    )
    return dict(zip(("logp", "teacher_logp", "kl", "kl_other", "entropy"), out, strict=True))
