"""Clipped policy-gradient surrogates: PPO (DAPO clip-higher, dual clip), GSPO and CISPO.

:func:`policy_loss` returns the loss and its metrics (clip fractions, importance-weight
stats, k3 approximate KL); :func:`token_advantages` checks and broadcasts ``[B]`` or
``[B, T]`` advantages against ``[B, T]`` log-probabilities (the off-policy losses share it).
"""

from __future__ import annotations

from typing import Literal

import torch

from repogym.agents.losses.aggregation import LOG_RATIO_CLAMP, AggMode, aggregate, check_choice

__all__ = ["PolicyLossKind", "policy_loss", "token_advantages"]

PolicyLossKind = Literal["ppo", "gspo", "cispo"]


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    kind: PolicyLossKind = "ppo",
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: AggMode = "token_mean",
    dual_clip: float | None = None,
    global_num_tokens: float | torch.Tensor | None = None,
    global_num_seqs: float | torch.Tensor | None = None,
    norm_len: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped policy-gradient loss (to minimise) and its metrics.

    With ``r = exp(logp - old_logp)`` per token:

    - ``ppo``: ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``; ``eps_high > eps_low`` is
      DAPO's clip-higher. ``dual_clip = c > 1`` (Ye et al. 2020, as in verl) also bounds the
      loss of negative-advantage tokens by ``-c A``, i.e. TRL's ``delta = c``.
    - ``gspo``: the same clipped surrogate with the sequence ratio
      ``s = exp(mean_t(logp - old_logp))`` over the mask (GSPO, Zheng et al. 2025). Written in
      the stop-gradient token form ``s_t = sg(s) * exp(logp_t - sg(logp_t))`` (verl), whose
      value and gradient equal TRL's ``importance_sampling_level="sequence"``. The paper uses
      ``agg="seq_mean_token_mean"``.
    - ``cispo``: ``-sg(clip(r, 1 - eps_low, 1 + eps_high)) * A * logp`` (MiniMax-M1): every
      token keeps a gradient. ``eps_low >= 1`` removes the lower bound, as in the paper; TRL's
      ``epsilon_high`` for cispo is our ``1 + eps_high``.

    Args:
        logp: Log-probabilities of the taken tokens under the current policy ``[B, T]``.
        old_logp: The same under the policy that sampled them ``[B, T]`` (no gradient).
        advantages: Per-sequence ``[B]`` or per-token ``[B, T]`` advantages.
        mask: 1 for tokens in the loss ``[B, T]``.
        kind: Which surrogate.
        eps_low: Lower clip range: ratios below ``1 - eps_low`` are clipped.
        eps_high: Upper clip range: ratios above ``1 + eps_high`` are clipped.
        agg: How to reduce the per-token losses, see :func:`aggregate`.
        dual_clip: Dual-clip constant ``c > 1`` for ``ppo``/``gspo``; None disables it.
        global_num_tokens: Passed to :func:`aggregate` for gradient accumulation.
        global_num_seqs: Passed to :func:`aggregate` for gradient accumulation.
        norm_len: Passed to :func:`aggregate`.

    Returns:
        ``(loss, metrics)``: a scalar tensor, and floats over the masked tokens:
        ``clip/low_frac`` (ratio below ``1 - eps_low`` with ``A < 0``), ``clip/high_frac``
        (ratio above ``1 + eps_high`` with ``A > 0``), ``is_weight/max`` and ``is_weight/mean``
        (the importance ratio the loss uses: per token, or per sequence for ``gspo``), and
        ``approx_kl`` (k3 estimate of KL(old || new): ``mean(r - 1 - log r)``).

    Raises:
        ValueError: For an unknown ``kind``/``agg``, bad shapes, or a bad ``dual_clip``.
    """
    check_choice("kind", kind, PolicyLossKind)
    check_choice("agg", agg, AggMode)
    adv = token_advantages(advantages, logp)
    if dual_clip is not None and (kind == "cispo" or dual_clip <= 1.0):
        raise ValueError(
            f"dual_clip must be a float > 1 with kind 'ppo' or 'gspo'; got {dual_clip!r} with "
            f"kind {kind!r} (use None to disable it)"
        )
    log_ratio = (logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    if kind == "gspo":
        log_ratio = _sequence_log_ratio(logp, log_ratio, mask)
    ratio = torch.exp(log_ratio)
    if kind == "cispo":
        weight = ratio.clamp(1.0 - eps_low, 1.0 + eps_high).detach()
        loss_mat = -weight * adv * logp
    else:
        loss_mat = _clipped_surrogate(ratio, adv, eps_low, eps_high, dual_clip)
    loss = aggregate(
        loss_mat,
        mask,
        agg,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
        norm_len=norm_len,
    )
    return loss, _policy_metrics(
        ratio.detach(), (logp - old_logp).detach(), adv, mask, eps_low, eps_high
    )


def token_advantages(advantages: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Advantages as ``[B, T]`` (or broadcastable ``[B, 1]``), checked against ``logp``."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T]; got shape {tuple(logp.shape)}")
    if advantages.shape == logp.shape[:1]:
        return advantages.unsqueeze(-1)
    if advantages.shape == logp.shape:
        return advantages
    raise ValueError(
        f"advantages must be [B] or [B, T] = {tuple(logp.shape)}; got {tuple(advantages.shape)}"
    )


def _sequence_log_ratio(
    logp: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """GSPO's per-token log ratio ``sg(mean_t log r) + logp - sg(logp)``, ``[B, T]``."""
    mask = mask.to(log_ratio.dtype)
    seq = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return seq.detach().unsqueeze(-1) + logp - logp.detach()


def _clipped_surrogate(
    ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float, dual_clip: float | None
) -> torch.Tensor:
    """Per-token PPO loss ``max(-r A, -clip(r) A)``, bounded by ``-c A`` where ``A < 0``."""
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1.0 - eps_low, 1.0 + eps_high))
    if dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * dual_clip), loss)
    return loss


def _policy_metrics(
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, float]:
    """Clip fractions, importance-weight stats and k3 approx KL over the masked tokens."""
    m = mask.to(torch.bool).expand(ratio.shape)
    n = max(int(m.sum()), 1)
    low = (ratio < 1.0 - eps_low) & (adv < 0) & m
    high = (ratio > 1.0 + eps_high) & (adv > 0) & m
    selected = ratio[m]
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    k3 = torch.expm1(log_ratio) - log_ratio
    return {
        "clip/low_frac": float(low.sum()) / n,
        "clip/high_frac": float(high.sum()) / n,
        "is_weight/max": float(selected.max()) if selected.numel() else 0.0,
        "is_weight/mean": float(selected.sum()) / n,
        "approx_kl": float(k3[m].sum()) / n,
    }
