"""Pure loss and advantage functions shared by the reference trainers.

Everything here is a stateless torch function on tensors, with closed-form tests in
``tests/agents/test_losses.py`` that also compare against verl's ``core_algos`` and TRL's
``GRPOTrainer`` loss. Shapes: ``B`` sequences (batch), ``T`` time steps or tokens.

- :func:`gae`: generalised advantage estimation over one time axis.
- :func:`group_advantages`: critic-free baselines over groups of samples of one prompt
  (GRPO, Dr. GRPO, RLOO).
- :func:`policy_loss`: clipped surrogate losses (PPO with DAPO clip-higher and dual clip,
  GSPO's sequence ratio, CISPO's clipped stop-gradient weight) and their metrics.
- :func:`aggregate`: verl's four ways of reducing a ``[B, T]`` loss matrix to a scalar, with
  global normalisers so gradient accumulation over micro-batches equals one large batch.
- :func:`kl` (Schulman's k1/k2/k3 estimators) and :func:`entropy_from_logits`.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

__all__ = [
    "AggMode",
    "GroupMode",
    "KLKind",
    "PolicyLossKind",
    "aggregate",
    "entropy_from_logits",
    "gae",
    "group_advantages",
    "kl",
    "policy_loss",
]

GroupMode = Literal["grpo", "dr_grpo", "rloo"]
PolicyLossKind = Literal["ppo", "gspo", "cispo"]
AggMode = Literal[
    "token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"
]
KLKind = Literal["k1", "k2", "k3"]

LOG_RATIO_CLAMP = 20.0
"""Log importance ratios are clamped to +-this before ``exp`` (as verl does), against overflow."""


def _check_choice(name: str, value: str, literal: object) -> None:
    """Raise a ValueError naming ``value`` and the allowed values of the ``Literal``."""
    allowed = get_args(literal)
    if value not in allowed:
        raise ValueError(
            f"unknown {name} {value!r}; expected one of {', '.join(map(repr, allowed))}"
        )


# --------------------------------------------------------------------------------------------
# Advantages
# --------------------------------------------------------------------------------------------


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
    _check_choice("mode", mode, GroupMode)
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


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


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
    _check_choice("agg", agg, AggMode)
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


# --------------------------------------------------------------------------------------------
# Policy losses
# --------------------------------------------------------------------------------------------


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
    _check_choice("kind", kind, PolicyLossKind)
    _check_choice("agg", agg, AggMode)
    adv = _token_advantages(advantages, logp)
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


def _token_advantages(advantages: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
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


# --------------------------------------------------------------------------------------------
# KL and entropy
# --------------------------------------------------------------------------------------------


def kl(logp: torch.Tensor, ref_logp: torch.Tensor, kind: KLKind = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled from pi (Schulman 2020).

    With ``log_r = ref_logp - logp``: ``k1 = -log_r`` (unbiased, high variance, can be
    negative), ``k2 = log_r**2 / 2`` (biased, low variance), ``k3 = exp(log_r) - 1 - log_r``
    (unbiased, low variance, always >= 0; the GRPO paper's penalty and TRL's ``beta`` term).

    Args:
        logp: Log-probabilities of the sampled tokens under the policy.
        ref_logp: The same under the reference policy.
        kind: Which estimator.

    Returns:
        Per-token estimates shaped like ``logp``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    _check_choice("kind", kind, KLKind)
    log_r = ref_logp - logp
    if kind == "k1":
        return -log_r
    if kind == "k2":
        return 0.5 * log_r.square()
    log_r = log_r.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.expm1(log_r) - log_r


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution over the last axis, ``logsumexp - E[logits]``.

    Args:
        logits: Unnormalised log-probabilities ``[..., V]``.

    Returns:
        Entropies ``[...]`` in nats.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
