"""The pure maths of the reference trainers: advantages, policy losses, KL, corrections.

Layer 0 of :mod:`repogym.agents`: stateless torch functions on tensors, importing nothing
else from repogym, with closed-form tests in ``tests/agents/test_losses.py`` that also compare
against verl's ``core_algos`` and TRL's ``GRPOTrainer`` loss. Shapes: ``B`` sequences
(batch), ``T`` time steps or tokens.

- :func:`gae`: generalised advantage estimation over one time axis.
- :func:`group_advantages`: critic-free baselines over groups of samples of one prompt
  (GRPO, Dr. GRPO, RLOO).
- :func:`policy_loss`: clipped surrogate losses (PPO with DAPO clip-higher and dual clip,
  GSPO's sequence ratio, CISPO's clipped stop-gradient weight) and their metrics.
- :func:`aggregate`: verl's four ways of reducing a ``[B, T]`` loss matrix to a scalar, with
  global normalisers so gradient accumulation over micro-batches equals one large batch.
- :func:`kl` (Schulman's k1/k2/k3 estimators and verl's ``low_var_kl``), :func:`kl_loss`
  and :func:`kl_reward_penalty`, with what each one's *gradient* is (see :func:`kl_loss`).
- :func:`value_loss` (PPO's clipped critic loss), :func:`echo_loss` (next-token loss on
  observation tokens), :func:`full_kl` and :func:`opd_advantages` (distillation).
- Off-policy corrections of the asynchronous learner: :func:`token_is_weights`,
  :func:`sequence_ratio`, :func:`behaviour_weights`, :func:`async_policy_loss`,
  :func:`weight_metrics`; one meaning per :data:`Correction` name.
- :func:`entropy_from_logits`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import torch

__all__ = [
    "AggMode",
    "Correction",
    "GroupMode",
    "KLKind",
    "PolicyLossKind",
    "aggregate",
    "async_policy_loss",
    "behaviour_weights",
    "check_choice",
    "echo_loss",
    "entropy_from_logits",
    "full_kl",
    "gae",
    "group_advantages",
    "kl",
    "kl_loss",
    "kl_reward_penalty",
    "opd_advantages",
    "policy_loss",
    "sequence_ratio",
    "token_is_weights",
    "value_loss",
    "weight_metrics",
]

GroupMode = Literal["grpo", "dr_grpo", "rloo"]
PolicyLossKind = Literal["ppo", "gspo", "cispo"]
AggMode = Literal[
    "token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"
]
KLKind = Literal["k1", "k2", "k3", "low_var_kl"]
Correction = Literal["none", "tis", "seq", "decoupled", "product"]

LOG_RATIO_CLAMP = 20.0
"""Log importance ratios are clamped to +-this before ``exp`` (as verl does), against overflow."""


def check_choice(name: str, value: str, literal: object) -> None:
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
    check_choice("kind", kind, PolicyLossKind)
    check_choice("agg", agg, AggMode)
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
# KL to a reference policy
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Critic, Echo, distillation
# --------------------------------------------------------------------------------------------


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


def opd_advantages(student_token_logp: torch.Tensor, teacher_token_logp: torch.Tensor):
    """On-policy distillation's per-token advantage ``-(log pi_S(a_t) - log pi_T(a_t))``.

    The bracket is the one-sample estimate of the reverse KL at that position; tokens the
    teacher finds likelier than the student get a positive advantage. No gradient.
    """
    return -(student_token_logp - teacher_token_logp).detach()


# --------------------------------------------------------------------------------------------
# Off-policy corrections (asynchronous learner)
# --------------------------------------------------------------------------------------------


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
    adv = _token_advantages(advantages, logp).expand_as(logp)
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


# --------------------------------------------------------------------------------------------
# Entropy
# --------------------------------------------------------------------------------------------


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution over the last axis, ``logsumexp - E[logits]``.

    Args:
        logits: Unnormalised log-probabilities ``[..., V]``.

    Returns:
        Entropies ``[...]`` in nats.
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
