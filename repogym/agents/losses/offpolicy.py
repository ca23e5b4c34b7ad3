"""Off-policy corrections of the asynchronous learner: one meaning per :data:`Correction`.

:func:`token_is_weights` and :func:`sequence_ratio` (importance weights to the behaviour
policy, without gradient), :func:`behaviour_weights` (the ``decoupled`` correction's),
:func:`weight_metrics` (max, mean, effective sample size) and :func:`async_policy_loss`.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from repogym.agents.losses.aggregation import LOG_RATIO_CLAMP, AggMode, aggregate, check_choice
from repogym.agents.losses.surrogate import PolicyLossKind, policy_loss, token_advantages

__all__ = [
    "Correction",
    "async_policy_loss",
    "behaviour_weights",
    "sequence_ratio",
    "token_is_weights",
    "weight_metrics",
]

Correction = Literal["none", "tis", "seq", "decoupled", "product"]


def token_is_weights(
    logp: torch.Tensor, behav_logp: torch.Tensor, cap: float | None = None
) -> torch.Tensor:
    """Per-token importance weights ``min(exp(logp - behav_logp), cap)``, without gradient."""
    log_ratio = (logp - behav_logp).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    weights = log_ratio.exp()
    return weights if cap is None else weights.clamp(max=cap)


def sequence_ratio(
    logp: torch.Tensor, behav_logp: torch.Tensor, mask: torch.Tensor, *, normalise: bool = True
) -> torch.Tensor:
    """Per-sequence ratio over the masked tokens, without gradient.

    ``normalise=True``: the length-normalised (geometric-mean) ratio
    ``exp(mean_t (logp - behav_logp))``; ``False``: the plain product ``exp(sum_t ...)``,
    whose spread grows with the sequence length.

    Returns:
        ``[B]`` ratios (the log clamped to +-20 before ``exp``; 1 for an empty sequence).
    """
    mask = mask.to(logp.dtype)
    total = ((logp - behav_logp).detach() * mask).sum(-1)
    if normalise:
        total = total / mask.sum(-1).clamp(min=1.0)
    return total.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp()


def weight_metrics(weights: torch.Tensor, cap: float | None = None) -> dict[str, float]:
    """``is_weight/max``, ``is_weight/mean``, ``is_weight/ess`` (and ``/truncated_frac``).

    ESS is Kish's effective sample size ``(sum w)^2 / sum w^2`` as a fraction of ``n``: 1 when
    every weight is equal, ``1/n`` when one weight dominates.
    """
    w = weights.detach().double().flatten()
    if w.numel() == 0:
        return {"is_weight/max": 0.0, "is_weight/mean": 0.0, "is_weight/ess": 0.0}
    out = {
        "is_weight/max": float(w.max()),
        "is_weight/mean": float(w.mean()),
        "is_weight/ess": float(w.sum() ** 2 / (w.numel() * w.square().sum()).clamp(min=1e-300)),
    }
    if cap is not None:
        out["is_weight/truncated_frac"] = float((w > cap).double().mean())
    return out


def behaviour_weights(
    prox_logp: torch.Tensor, behav_logp: torch.Tensor, mask: torch.Tensor, cap: float | None
) -> torch.Tensor:
    """The ``decoupled`` correction's per-token behaviour weight ``min(pi_prox / mu, C)``.

    Returns:
        ``[B, T]`` weights, 0 outside ``mask``.
    """
    return token_is_weights(prox_logp, behav_logp, cap) * mask.to(prox_logp.dtype)


def async_policy_loss(
    logp: torch.Tensor,
    behav_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    correction: Correction = "decoupled",
    cap: float | None = 2.0,
    prox_logp: torch.Tensor | None = None,
    kind: PolicyLossKind = "ppo",
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    agg: AggMode = "token_mean",
    **norm: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Off-policy-corrected policy loss (to minimise) and its metrics; one meaning per name.

    ``mu`` is the behaviour policy that sampled the tokens (``behav_logp``), ``r_t = pi/mu``:

    - ``none``: :func:`policy_loss` of ``kind`` with ``mu`` as the old policy (what a
      synchronous trainer does with the sampler's logprobs).
    - ``tis``: truncated importance sampling, ``-sg(min(r_t, C)) A_t log pi_t`` (IMPALA's
      truncation; gradient ``-min(r_t, C) A_t grad log pi_t``; no proximal policy).
    - ``seq``: PPO's clipped surrogate on GSPO's length-normalised sequence ratio to ``mu``.
    - ``decoupled``: decoupled PPO (Hilton et al. 2021; AReaL): :func:`policy_loss` of ``kind``
      with the *proximal* policy (the learner's weights before the update, ``prox_logp``) as
      the old policy, each token's advantage times ``w_t = min(pi_prox/mu, C)``.
    - ``product``: ``-sg(prod_t r_t) A_t log pi_t``, the plain sequence product. Unsafe (the
      weights explode on long, stale sequences); for the demonstration only.

    Args:
        logp: Current log-probabilities of the taken tokens ``[B, T]`` (with gradient).
        behav_logp: Behaviour (sampling) log-probabilities ``[B, T]``.
        advantages: ``[B]`` or ``[B, T]``.
        mask: 1 on tokens in the loss ``[B, T]``.
        correction: See above.
        cap: Truncation ``C`` for ``tis`` and ``decoupled`` (None: no truncation).
        prox_logp: Proximal policy log-probabilities (``decoupled`` only).
        kind: The surrogate of ``none`` and ``decoupled`` (``ppo``, ``gspo``, ``cispo``).
        eps_low: Lower clip range.
        eps_high: Upper clip range.
        agg: Aggregation (see :func:`aggregate`).
        **norm: ``global_num_tokens``, ``global_num_seqs``, ``norm_len`` for micro-batching.

    Returns:
        ``(loss, metrics)``; ``is_weight/*`` describe the *untruncated* weights (per token, or
        per sequence for ``seq``/``product``), so a blow-up shows even when the cap tames it.

    Raises:
        ValueError: For an unknown correction, or ``decoupled`` without ``prox_logp``.
    """
    check_choice("correction", correction, Correction)
    adv = token_advantages(advantages, logp).expand_as(logp)
    m = mask.bool()
    clip = {"eps_low": eps_low, "eps_high": eps_high, "agg": agg, **norm}
    if correction in ("none", "seq"):
        kind = "gspo" if correction == "seq" else kind
        loss, metrics = policy_loss(logp, behav_logp, adv, mask, kind=kind, **clip)
        if kind == "gspo":
            raw = sequence_ratio(logp, behav_logp, mask)[m.any(-1)]
        else:
            raw = token_is_weights(logp, behav_logp)[m]
        return loss, {**metrics, **weight_metrics(raw)}
    if correction == "decoupled":
        if prox_logp is None:
            raise ValueError(
                "correction 'decoupled' needs prox_logp (the proximal policy's logprobs: score "
                "the batch with the learner's weights before the update)"
            )
        raw = token_is_weights(prox_logp, behav_logp)
        w = raw if cap is None else raw.clamp(max=cap)
        loss, metrics = policy_loss(logp, prox_logp, adv * w, mask, kind=kind, **clip)
        return loss, {**metrics, **weight_metrics(raw[m], cap)}
    if correction == "tis":
        raw = token_is_weights(logp, behav_logp)
        w = raw if cap is None else raw.clamp(max=cap)
        stats = weight_metrics(raw[m], cap)
    else:  # product
        seq = sequence_ratio(logp, behav_logp, mask, normalise=False)
        w = seq[:, None].expand_as(logp)
        stats = weight_metrics(seq[m.any(-1)])
    loss = aggregate(-w * adv * logp, mask, agg, **norm)
    log_ratio = (logp - behav_logp).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    k3 = (torch.expm1(log_ratio) - log_ratio)[m]
    return loss, {**stats, "approx_kl": float(k3.mean()) if k3.numel() else 0.0}
