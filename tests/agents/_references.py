"""Reference implementations to check ``repogym.agents.losses`` against.

``verl_*``: re-implementations of functions in verl's ``verl/trainer/ppo/core_algos.py``
(volcengine/verl; read at commits 012be9d9dcb7c38499f23616142870d2682757fc and
26b5d6b2bbf0202683e49d9999f9174179ab5af3, plus the later ``agg_loss`` with ``dp_size``,
``batch_num_tokens``, ``global_batch_size`` and ``loss_scale_factor``). They follow verl's
semantics, argument order and naming (``old_log_prob, log_prob, advantages, response_mask``,
``clip_ratio_c``, ``"token-mean"`` ...) but are written independently, mostly as explicit
per-element loops, so that they do not share code paths with the vectorised module under test.

``trl_compute_loss``: calls TRL's own ``GRPOTrainer._compute_loss`` on tensors, with a stub in
place of the trainer (one process, no model: the stub returns the given log-probabilities).
"""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import torch

# ---------------------------------------------------------------------------------------------
# verl core_algos, re-implemented
# ---------------------------------------------------------------------------------------------


def verl_masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """verl_F.masked_mean: sum(x * mask) / sum(mask)."""
    return (x * mask).sum() / mask.sum()


def verl_agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    dp_size: int = 1,
    batch_num_tokens: float | None = None,
    global_batch_size: float | None = None,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """core_algos.agg_loss (version with global batch info), one sequence at a time."""
    rows = range(loss_mat.shape[0])
    seq_sum = [
        sum(loss_mat[i, t] * loss_mask[i, t] for t in range(loss_mat.shape[1])) for i in rows
    ]
    seq_len = [float(loss_mask[i].sum()) for i in rows]
    nonempty = sum(1.0 for n in seq_len if n > 0)
    if loss_agg_mode == "token-mean":
        n_tok = float(loss_mask.sum()) if batch_num_tokens is None else batch_num_tokens
        return sum(seq_sum) / n_tok * dp_size
    if loss_agg_mode == "seq-mean-token-sum":
        n_seq = nonempty if global_batch_size is None else global_batch_size
        return sum(s for s, n in zip(seq_sum, seq_len, strict=True) if n > 0) / n_seq * dp_size
    if loss_agg_mode == "seq-mean-token-mean":
        n_seq = nonempty if global_batch_size is None else global_batch_size
        means = [s / (n + 1e-8) for s, n in zip(seq_sum, seq_len, strict=True) if n > 0]
        return sum(means) / n_seq * dp_size
    if loss_agg_mode == "seq-mean-token-sum-norm":
        scale = loss_mat.shape[-1] if loss_scale_factor is None else loss_scale_factor
        return sum(seq_sum) / scale
    raise ValueError(loss_agg_mode)


def verl_compute_policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """core_algos.compute_policy_loss_vanilla: PPO clip with clip-higher and dual clip.

    Returns (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower) as verl does.
    """
    assert clip_ratio_c > 1.0
    out = torch.zeros_like(log_prob)
    clipped = torch.zeros_like(log_prob)
    dual = torch.zeros_like(log_prob)
    for i in range(log_prob.shape[0]):
        for t in range(log_prob.shape[1]):
            a = advantages[i, t]
            ratio = torch.exp(torch.clamp(log_prob[i, t] - old_log_prob[i, t], -20.0, 20.0))
            unclipped = -a * ratio
            clip = -a * torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
            loss = torch.maximum(unclipped, clip)
            clipped[i, t] = float(clip > unclipped)
            if a < 0:
                dual[i, t] = float(loss > -a * clip_ratio_c)
                loss = torch.minimum(loss, -a * clip_ratio_c)
            out[i, t] = loss
    ppo_kl = verl_masked_mean(old_log_prob - log_prob, response_mask)
    pg_loss = verl_agg_loss(out, response_mask, loss_agg_mode)
    return (
        pg_loss,
        verl_masked_mean(clipped, response_mask),
        ppo_kl,
        verl_masked_mean(dual, response_mask),
    )


def verl_compute_policy_loss_gspo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> torch.Tensor:
    """core_algos.compute_policy_loss_gspo: token-form sequence ratio, seq-mean-token-mean."""
    out = torch.zeros_like(log_prob)
    for i in range(log_prob.shape[0]):
        n = response_mask[i].sum().clamp(min=1)
        seq_log_ratio = ((log_prob[i] - old_log_prob[i]) * response_mask[i]).sum() / n
        for t in range(log_prob.shape[1]):
            log_s = log_prob[i, t] - log_prob[i, t].detach() + seq_log_ratio.detach()
            s = torch.exp(torch.clamp(log_s, max=10.0))
            a = advantages[i, t]
            out[i, t] = torch.maximum(
                -a * s, -a * torch.clamp(s, 1 - clip_ratio_low, 1 + clip_ratio_high)
            )
    return verl_agg_loss(out, response_mask, "seq-mean-token-mean")


def verl_compute_policy_loss_cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    loss_agg_mode: str = "token-mean",
) -> torch.Tensor:
    """core_algos.compute_policy_loss_cispo: -sg(clip(ratio)) * A * log_prob."""
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
    weight = torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high).detach()
    return verl_agg_loss(-weight * advantages * log_prob, response_mask, loss_agg_mode)


def verl_kl_penalty(
    logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str
) -> torch.Tensor:
    """core_algos.kl_penalty for "k1"/"kl", "k2"/"mse" and "k3"/"low_var_kl"."""
    if kl_penalty in ("kl", "k1"):
        return logprob - ref_logprob
    if kl_penalty in ("mse", "k2"):
        return (logprob - ref_logprob) ** 2 / 2
    if kl_penalty in ("low_var_kl", "k3"):
        log_r = torch.clamp(ref_logprob - logprob, -20, 20)
        return torch.clamp(torch.exp(log_r) - log_r - 1, -10, 10)
    raise NotImplementedError(kl_penalty)


def verl_compute_gae_advantage_return(
    token_level_rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """core_algos.compute_gae_advantage_return before whitening (all tokens valid).

    verl bootstraps 0 after the last token. Written as the explicit sum
    ``A_t = sum_l (gamma lam)^l delta_{t+l}`` rather than verl's backward recursion.
    """
    bsz, length = values.shape
    nxt = torch.cat([values[:, 1:], torch.zeros(bsz, 1, dtype=values.dtype)], dim=1)
    delta = token_level_rewards + gamma * nxt - values
    adv = torch.zeros_like(values)
    for t in range(length):
        for k in range(t, length):
            adv[:, t] += (gamma * lam) ** (k - t) * delta[:, k]
    return adv, adv + values


def verl_outcome_advantage(
    scores: torch.Tensor, index: list[Any], estimator: str, epsilon: float = 1e-6
) -> torch.Tensor:
    """compute_grpo_outcome_advantage (with/without norm_adv_by_std_in_grpo) and
    compute_rloo_outcome_advantage, on per-sequence scores grouped by ``index``."""
    groups: dict[Any, list[float]] = defaultdict(list)
    for i, idx in enumerate(index):
        groups[idx].append(float(scores[i]))
    out = torch.zeros_like(scores)
    for i, idx in enumerate(index):
        g = groups[idx]
        n = len(g)
        mean = sum(g) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in g) / (n - 1))
        if estimator == "grpo":
            out[i] = (scores[i] - mean) / (std + epsilon)
        elif estimator == "dr_grpo":  # norm_adv_by_std_in_grpo=False
            out[i] = scores[i] - mean
        elif estimator == "rloo":
            out[i] = scores[i] * n / (n - 1) - mean * n / (n - 1)
    return out


# ---------------------------------------------------------------------------------------------
# TRL GRPOTrainer._compute_loss, called on tensors
# ---------------------------------------------------------------------------------------------


class _OneProcess:
    """The parts of ``accelerate.Accelerator`` that ``_compute_loss`` uses, for one process."""

    num_processes = 1
    sync_gradients = True

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def gather_for_metrics(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def reduce(self, x: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
        return x


def trl_compute_loss(
    grpo_trainer_cls: type,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: str,
    epsilon_low: float,
    epsilon_high: float,
    importance_sampling_level: str = "token",
    delta: float | None = None,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    num_items_in_batch: float | None = None,
    max_completion_length: int | None = None,
) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """TRL's GRPO loss on given per-token log-probabilities; returns (loss, logged metrics)."""
    bsz, length = logp.shape
    metrics: dict[str, dict[str, list[float]]] = {
        "train": defaultdict(list),
        "eval": defaultdict(list),
    }
    stub = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros_like(logp), None),
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=importance_sampling_level,
        beta=beta,
        loss_type=loss_type,
        epsilon_low=epsilon_low,
        epsilon_high=epsilon_high,
        args=SimpleNamespace(delta=delta, use_bias_correction_kl=False, steps_per_generation=1),
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1,
        accelerator=_OneProcess(),
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        max_completion_length=max_completion_length or length,
        _metrics=metrics,
    )
    inputs = {
        "prompt_ids": torch.zeros(bsz, 1, dtype=torch.long),
        "prompt_mask": torch.ones(bsz, 1, dtype=torch.long),
        "completion_ids": torch.zeros(bsz, length, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "old_per_token_logps": old_logp,
        "num_items_in_batch": torch.tensor(
            float(mask.sum() if num_items_in_batch is None else num_items_in_batch)
        ),
    }
    if ref_logp is not None:
        inputs["ref_per_token_logps"] = ref_logp
    loss = grpo_trainer_cls._compute_loss(stub, None, inputs)
    return loss, metrics["train"]
