"""The maths of repogym.agents.losses: closed forms, verl's core_algos and TRL's GRPO loss."""

from __future__ import annotations

import math

import pytest
import torch

from repogym.agents.losses import (
    aggregate,
    async_policy_loss,
    behaviour_weights,
    entropy_from_logits,
    gae,
    group_advantages,
    kl,
    kl_loss,
    kl_reward_penalty,
    policy_loss,
    sequence_ratio,
    token_is_weights,
    weight_metrics,
)

from ._references import (
    trl_compute_loss,
    verl_agg_loss,
    verl_compute_gae_advantage_return,
    verl_compute_policy_loss_cispo,
    verl_compute_policy_loss_gspo,
    verl_compute_policy_loss_vanilla,
    verl_kl_penalty,
    verl_outcome_advantage,
)

AGGS = ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"]
VERL_AGG = {a: a.replace("_", "-") for a in AGGS}
F64 = torch.float64


def close(a: torch.Tensor | float, b: torch.Tensor | float, tol: float = 1e-7) -> bool:
    """Element-wise closeness in float64 (verl adds 1e-8 to its token counts)."""
    return torch.allclose(
        torch.as_tensor(a, dtype=F64), torch.as_tensor(b, dtype=F64), atol=tol, rtol=tol
    )


def batch(
    seed: int = 0, bsz: int = 6, length: int = 7, spread: float = 0.4
) -> dict[str, torch.Tensor]:
    """Random float64 log-probs with ratios on both sides of the clip range, ragged masks."""
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(bsz, length, generator=g, dtype=F64) * 3 - 0.1
    new = old + torch.randn(bsz, length, generator=g, dtype=F64) * spread
    lengths = torch.randint(2, length + 1, (bsz,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(F64)
    adv = torch.randn(bsz, generator=g, dtype=F64)
    adv[0] = 0.0
    ref = old + torch.randn(bsz, length, generator=g, dtype=F64) * spread
    return {"logp": new, "old": old, "adv": adv, "mask": mask, "ref": ref}


def loss_and_grad(fn, logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Value of ``fn(leaf)`` and its gradient with respect to ``leaf``, a copy of ``logp``."""
    leaf = logp.detach().clone().requires_grad_(True)
    out = fn(leaf)
    loss = out[0] if isinstance(out, tuple) else out
    (grad,) = torch.autograd.grad(loss, leaf)
    return loss.detach(), grad


def ours(b: dict[str, torch.Tensor], logp: torch.Tensor | None = None, **kw) -> tuple:
    """``policy_loss`` on batch ``b`` (with ``logp`` in place of ``b["logp"]`` if given)."""
    return policy_loss(b["logp"] if logp is None else logp, b["old"], b["adv"], b["mask"], **kw)


def trl(
    grpo_trainer: type, b: dict[str, torch.Tensor], logp: torch.Tensor | None = None, **kw
) -> tuple:
    """TRL's ``_compute_loss`` on batch ``b`` (with ``logp`` in place of ``b["logp"]`` if given)."""
    logp = b["logp"] if logp is None else logp
    return trl_compute_loss(grpo_trainer, logp, b["old"], b["adv"], b["mask"], **kw)


def assert_same_loss_and_grad(b: dict[str, torch.Tensor], fn_a, fn_b) -> None:
    """Two loss functions of the log-probs agree in value and gradient on ``b["logp"]``."""
    (loss_a, grad_a), (loss_b, grad_b) = (
        loss_and_grad(fn_a, b["logp"]),
        loss_and_grad(fn_b, b["logp"]),
    )
    assert close(loss_a, loss_b) and close(grad_a, grad_b)


# ---------------------------------------------------------------------------------------------
# GAE
# ---------------------------------------------------------------------------------------------


def test_gae_hand_computed_truncation_bootstraps_last_value() -> None:
    r, v = torch.tensor([1.0, 0.0, 2.0], dtype=F64), torch.tensor([0.5, 1.0, 1.5], dtype=F64)
    adv, ret = gae(r, v, torch.zeros(3), 2.0, gamma=0.9, lam=0.8)
    # delta = [1 + .9*1 - .5, 0 + .9*1.5 - 1, 2 + .9*2 - 1.5] = [1.4, 0.35, 2.3]
    assert close(adv, [1.4 + 0.72 * (0.35 + 0.72 * 2.3), 0.35 + 0.72 * 2.3, 2.3])
    assert close(ret, adv + v)


def test_gae_terminal_ignores_last_value() -> None:
    r, v = torch.tensor([1.0, 0.0, 2.0], dtype=F64), torch.tensor([0.5, 1.0, 1.5], dtype=F64)
    done = torch.tensor([False, False, True])
    adv, _ = gae(r, v, done, 123.0, gamma=0.9, lam=0.8)
    assert close(adv, [1.4 + 0.72 * 0.71, 0.35 + 0.72 * 0.5, 0.5])
    assert close(adv, gae(r, v, done, 0.0, gamma=0.9, lam=0.8)[0])


def test_gae_done_mid_rollout_cuts_the_chain() -> None:
    r, v = torch.ones(4, dtype=F64), torch.full((4,), 0.5, dtype=F64)
    adv, _ = gae(r, v, torch.tensor([0.0, 1.0, 0.0, 1.0]), 0.0, gamma=1.0, lam=1.0)
    assert close(adv, [1.5, 0.5, 1.5, 0.5])


def test_gae_lambda_one_gives_discounted_returns_minus_values() -> None:
    g = torch.Generator().manual_seed(1)
    r, v = torch.randn(6, generator=g, dtype=F64), torch.randn(6, generator=g, dtype=F64)
    gamma, last = 0.95, 0.7
    adv, ret = gae(r, v, torch.zeros(6), last, gamma=gamma, lam=1.0)
    expected = [
        sum(gamma ** (k - t) * r[k] for k in range(t, 6)) + gamma ** (6 - t) * last
        for t in range(6)
    ]
    assert close(ret, expected)
    assert close(adv, torch.tensor(expected, dtype=F64) - v)


def test_gae_lambda_zero_gives_td_errors() -> None:
    g = torch.Generator().manual_seed(2)
    r, v = torch.randn(5, generator=g, dtype=F64), torch.randn(5, generator=g, dtype=F64)
    adv, _ = gae(r, v, torch.zeros(5), 0.3, gamma=0.9, lam=0.0)
    next_v = torch.cat([v[1:], torch.tensor([0.3], dtype=F64)])
    assert close(adv, r + 0.9 * next_v - v)


def test_gae_batched_matches_rows_and_verl() -> None:
    g = torch.Generator().manual_seed(3)
    r, v = torch.randn(3, 5, generator=g, dtype=F64), torch.randn(3, 5, generator=g, dtype=F64)
    dones, last = torch.zeros(3, 5), torch.tensor([0.0, 0.0, 0.0], dtype=F64)
    adv, ret = gae(r, v, dones, last, gamma=0.99, lam=0.95)
    for i in range(3):
        assert close(adv[i], gae(r[i], v[i], dones[i], last[i], gamma=0.99, lam=0.95)[0])
    # verl's GAE bootstraps 0 after the last token (its advantages are then whitened; returns not).
    verl_adv, verl_ret = verl_compute_gae_advantage_return(r, v, gamma=0.99, lam=0.95)
    assert close(adv, verl_adv) and close(ret, verl_ret)


def test_gae_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="one shape"):
        gae(torch.zeros(3), torch.zeros(4), torch.zeros(3), 0.0, gamma=0.9, lam=0.9)


# ---------------------------------------------------------------------------------------------
# Group advantages
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("grpo", [1.5, -0.5, -0.5, -0.5]),  # mean .25, unbiased std .5
        ("dr_grpo", [0.75, -0.25, -0.25, -0.25]),
        ("rloo", [1.0, -1 / 3, -1 / 3, -1 / 3]),  # r_i - mean of the other three
    ],
)
def test_group_advantages_reference_vectors(mode: str, expected: list[float]) -> None:
    out = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64), 4, mode)
    assert close(out, expected, tol=1e-5)


def test_group_advantages_binary_pair_and_equal_group() -> None:
    out = group_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), 2, "grpo")
    assert close(out, [1 / math.sqrt(2), -1 / math.sqrt(2), 0.0, 0.0], tol=1e-5)


@pytest.mark.parametrize("mode", ["grpo", "dr_grpo", "rloo"])
def test_group_advantages_match_verl(mode: str) -> None:
    scores = torch.randn(12, generator=torch.Generator().manual_seed(4), dtype=F64)
    index = [i // 4 for i in range(12)]
    assert close(group_advantages(scores, 4, mode), verl_outcome_advantage(scores, index, mode))


def test_group_advantages_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"unknown mode 'gpro'.*'grpo', 'dr_grpo', 'rloo'"):
        group_advantages(torch.zeros(4), 2, "gpro")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(torch.zeros(4), 3, "grpo")
    with pytest.raises(ValueError, match=">= 2"):
        group_advantages(torch.zeros(4), 1, "grpo")


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------


LOSS_MAT = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=F64)
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=F64)


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        ("token_mean", 7 / 3),
        ("seq_mean_token_mean", (1.5 + 4.0) / 2),
        ("seq_mean_token_sum", (3.0 + 4.0) / 2),
        ("seq_mean_token_sum_norm", (3.0 / 3 + 4.0 / 3) / 2),
    ],
)
def test_aggregate_hand_computed(agg: str, expected: float) -> None:
    assert close(aggregate(LOSS_MAT, MASK, agg), expected)


def test_aggregate_norm_len_and_global_counts() -> None:
    assert close(aggregate(LOSS_MAT, MASK, "seq_mean_token_sum_norm", norm_len=4), (3 / 4 + 1) / 2)
    assert close(aggregate(LOSS_MAT, MASK, "token_mean", global_num_tokens=14), 7 / 14)
    assert close(aggregate(LOSS_MAT, MASK, "seq_mean_token_sum", global_num_seqs=7), 1.0)


@pytest.mark.parametrize("agg", AGGS)
def test_aggregate_matches_verl(agg: str) -> None:
    b = batch(5)
    ours = aggregate(b["logp"], b["mask"], agg)
    theirs = verl_agg_loss(b["logp"], b["mask"], VERL_AGG[agg])
    if agg == "seq_mean_token_sum_norm":  # verl omits the mean over sequences
        theirs = theirs / b["mask"].shape[0]
    assert close(ours, theirs)
    n_tok, n_seq = 3 * float(b["mask"].sum()), 3 * b["mask"].shape[0]
    ours = aggregate(b["logp"], b["mask"], agg, global_num_tokens=n_tok, global_num_seqs=n_seq)
    theirs = verl_agg_loss(
        b["logp"], b["mask"], VERL_AGG[agg], batch_num_tokens=n_tok, global_batch_size=n_seq
    )
    if agg != "seq_mean_token_sum_norm":
        assert close(ours, theirs)


def test_aggregate_empty_mask_gives_zero_and_bad_mode_raises() -> None:
    for agg in AGGS:
        assert float(aggregate(LOSS_MAT, torch.zeros_like(MASK), agg)) == 0.0
    with pytest.raises(ValueError, match=r"unknown agg 'mean'.*'token_mean'"):
        aggregate(LOSS_MAT, MASK, "mean")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Policy losses: hand-computed values and gradients
# ---------------------------------------------------------------------------------------------

RATIOS = torch.tensor([[0.5, 1.0, 1.5]], dtype=F64)
OLD = torch.full((1, 3), -1.0, dtype=F64)
LOGP = OLD + RATIOS.log()
ONES = torch.ones(1, 3, dtype=F64)


def ppo(adv: float, **kw) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """PPO token-mean loss, gradient and metrics on ratios 0.5, 1, 1.5 with eps 0.2/0.28."""
    a = torch.tensor([adv], dtype=F64)
    kw = {"kind": "ppo", "eps_low": 0.2, "eps_high": 0.28, "agg": "token_mean", **kw}
    _, metrics = policy_loss(LOGP, OLD, a, ONES, **kw)
    loss, grad = loss_and_grad(lambda lp: policy_loss(lp, OLD, a, ONES, **kw), LOGP)
    return loss, grad, metrics


def test_ppo_positive_advantage_clips_high() -> None:
    loss, grad, m = ppo(1.0)
    assert close(loss, -(0.5 + 1.0 + 1.28) / 3)
    assert close(grad, [[-0.5 / 3, -1.0 / 3, 0.0]])  # the clipped token gets no gradient
    assert m["clip/high_frac"] == pytest.approx(1 / 3) and m["clip/low_frac"] == 0.0


def test_ppo_negative_advantage_clips_low() -> None:
    loss, grad, m = ppo(-1.0)
    assert close(loss, (0.8 + 1.0 + 1.5) / 3)
    assert close(grad, [[0.0, 1.0 / 3, 1.5 / 3]])
    assert m["clip/low_frac"] == pytest.approx(1 / 3) and m["clip/high_frac"] == 0.0


def test_ppo_dual_clip_bounds_negative_advantage_loss() -> None:
    loss, grad, _ = ppo(-1.0, dual_clip=1.4)
    assert close(loss, (0.8 + 1.0 + 1.4) / 3)
    assert close(grad, [[0.0, 1.0 / 3, 0.0]])
    assert close(ppo(1.0, dual_clip=1.4)[0], ppo(1.0)[0])  # no effect where A > 0


def test_policy_metrics_hand_computed() -> None:
    _, _, m = ppo(1.0)
    assert m["is_weight/max"] == pytest.approx(1.5)
    assert m["is_weight/mean"] == pytest.approx(1.0)
    k3 = [r - 1 - math.log(r) for r in (0.5, 1.0, 1.5)]
    assert m["approx_kl"] == pytest.approx(sum(k3) / 3)
    assert set(m) == {
        "clip/low_frac",
        "clip/high_frac",
        "is_weight/max",
        "is_weight/mean",
        "approx_kl",
    }
    assert all(isinstance(v, float) for v in m.values())


def test_gspo_sequence_ratio_value_and_gradient() -> None:
    old = torch.zeros(1, 4, dtype=F64)
    logp = torch.tensor([[0.3, -0.1, 0.1, 5.0]], dtype=F64)  # last token is padding
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64)
    a = torch.tensor([1.0], dtype=F64)
    kw = {"kind": "gspo", "eps_low": 0.2, "eps_high": 0.2, "agg": "seq_mean_token_mean"}
    loss, grad = loss_and_grad(lambda lp: policy_loss(lp, old, a, mask, **kw), logp)
    s = math.exp(0.1)  # geometric mean of the three ratios
    assert close(loss, -s)
    assert close(grad, [[-s / 3, -s / 3, -s / 3, 0.0]])
    _, m = policy_loss(logp, old, a, mask, **kw)
    assert m["is_weight/max"] == pytest.approx(s) and m["clip/high_frac"] == 0.0
    clipped = logp + torch.tensor([[0.6, 0.0, 0.0, 0.0]], dtype=F64)  # mean log ratio .3 > log 1.2
    loss, grad = loss_and_grad(lambda lp: policy_loss(lp, old, a, mask, **kw), clipped)
    assert close(loss, -1.2) and close(grad, torch.zeros(1, 4))
    assert policy_loss(clipped, old, a, mask, **kw)[1]["clip/high_frac"] == pytest.approx(1.0)


def test_cispo_keeps_gradient_of_clipped_tokens() -> None:
    a = torch.tensor([1.0], dtype=F64)
    kw = {"kind": "cispo", "eps_low": 1.0, "eps_high": 0.2, "agg": "token_mean"}
    loss, grad = loss_and_grad(lambda lp: policy_loss(lp, OLD, a, ONES, **kw), LOGP)
    weights = torch.tensor([[0.5, 1.0, 1.2]], dtype=F64)
    assert close(loss, -(weights * LOGP).sum() / 3)
    assert close(grad, -weights / 3)
    assert policy_loss(LOGP, OLD, a, ONES, **kw)[1]["clip/high_frac"] == pytest.approx(1 / 3)


def test_per_token_advantages_equal_broadcast_sequence_advantages() -> None:
    b = batch(6)
    per_seq = policy_loss(b["logp"], b["old"], b["adv"], b["mask"])[0]
    per_tok = policy_loss(b["logp"], b["old"], b["adv"][:, None].expand_as(b["logp"]), b["mask"])[0]
    assert close(per_seq, per_tok)


def test_policy_loss_errors_name_the_problem() -> None:
    b = batch(0)
    args = (b["logp"], b["old"], b["adv"], b["mask"])
    with pytest.raises(ValueError, match=r"unknown kind 'grpo'.*'ppo', 'gspo', 'cispo'"):
        policy_loss(*args, kind="grpo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown agg"):
        policy_loss(*args, agg="sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dual_clip"):
        policy_loss(*args, dual_clip=0.9)
    with pytest.raises(ValueError, match="dual_clip"):
        policy_loss(*args, kind="cispo", dual_clip=3.0)
    with pytest.raises(ValueError, match="advantages must be"):
        policy_loss(*args[:2], torch.zeros(2), args[3])


# ---------------------------------------------------------------------------------------------
# Policy losses against verl
# ---------------------------------------------------------------------------------------------


def token_adv(b: dict[str, torch.Tensor]) -> torch.Tensor:
    """The per-sequence advantages of ``b`` broadcast to tokens, as verl stores them."""
    return b["adv"][:, None].expand_as(b["logp"])


@pytest.mark.parametrize("agg", AGGS)
def test_ppo_dual_clip_matches_verl_vanilla(agg: str) -> None:
    b = batch(7, spread=0.6)
    adv = token_adv(b)

    def verl(lp: torch.Tensor) -> torch.Tensor:
        args = (b["old"], lp, adv, b["mask"], 0.2, 0.28, 3.0, VERL_AGG[agg])
        loss = verl_compute_policy_loss_vanilla(*args)[0]
        return loss / b["mask"].shape[0] if agg == "seq_mean_token_sum_norm" else loss

    mine = {"eps_low": 0.2, "eps_high": 0.28, "agg": agg, "dual_clip": 3.0}
    assert_same_loss_and_grad(
        b, lambda lp: policy_loss(lp, b["old"], adv, b["mask"], **mine)[0], verl
    )


def test_ppo_metrics_match_verl_clipfrac() -> None:
    b = batch(8, spread=0.6)
    _, m = ours(b, eps_low=0.2, eps_high=0.28)
    _, clipfrac, _, _ = verl_compute_policy_loss_vanilla(
        b["old"], b["logp"], token_adv(b), b["mask"], 0.2, 0.28
    )
    # verl counts a token as clipped where the clipped branch is active, on either side
    assert m["clip/low_frac"] + m["clip/high_frac"] == pytest.approx(float(clipfrac))


def test_gspo_matches_verl() -> None:
    b = batch(9, spread=0.2)
    mine = {"kind": "gspo", "eps_low": 3e-4, "eps_high": 4e-4, "agg": "seq_mean_token_mean"}
    assert_same_loss_and_grad(
        b,
        lambda lp: ours(b, lp, **mine)[0],
        lambda lp: verl_compute_policy_loss_gspo(b["old"], lp, token_adv(b), b["mask"], 3e-4, 4e-4),
    )
    m = ours(b, **mine)[1]
    assert m["clip/low_frac"] + m["clip/high_frac"] > 0


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean"])
def test_cispo_matches_verl(agg: str) -> None:
    b = batch(10, spread=0.6)
    args = (0.5, 0.3, VERL_AGG[agg])
    assert_same_loss_and_grad(
        b,
        lambda lp: ours(b, lp, kind="cispo", eps_low=0.5, eps_high=0.3, agg=agg)[0],
        lambda lp: verl_compute_policy_loss_cispo(b["old"], lp, token_adv(b), b["mask"], *args),
    )


# ---------------------------------------------------------------------------------------------
# Policy losses against TRL's GRPOTrainer._compute_loss
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grpo_trainer() -> type:
    """TRL's GRPOTrainer class (skips if trl is not installed)."""
    return pytest.importorskip("trl.trainer.grpo_trainer").GRPOTrainer


TRL_CASES = [
    # (TRL loss_type, importance_sampling_level, our kind, our agg)
    ("grpo", "token", "ppo", "seq_mean_token_mean"),
    ("bnpo", "token", "ppo", "token_mean"),
    ("dapo", "token", "ppo", "token_mean"),
    ("dr_grpo", "token", "ppo", "seq_mean_token_sum_norm"),
    ("grpo", "sequence", "gspo", "seq_mean_token_mean"),
]


@pytest.mark.parametrize(("loss_type", "level", "kind", "agg"), TRL_CASES)
def test_matches_trl_grpo_loss(
    grpo_trainer: type, loss_type: str, level: str, kind: str, agg: str
) -> None:
    b = batch(11, spread=0.6 if level == "token" else 0.15)
    eps_low, eps_high = (0.2, 0.28) if level == "token" else (0.03, 0.04)
    mine = {"kind": kind, "eps_low": eps_low, "eps_high": eps_high, "agg": agg}
    theirs = {"loss_type": loss_type, "epsilon_low": eps_low, "epsilon_high": eps_high}
    theirs["importance_sampling_level"] = level
    assert_same_loss_and_grad(
        b, lambda lp: ours(b, lp, **mine)[0], lambda lp: trl(grpo_trainer, b, lp, **theirs)[0]
    )
    m, trl_m = ours(b, **mine)[1], trl(grpo_trainer, b, **theirs)[1]
    if level == "token":  # at the sequence level TRL counts sequences, not tokens
        assert m["clip/low_frac"] == pytest.approx(trl_m["clip_ratio/low_mean"][0])
        assert m["clip/high_frac"] == pytest.approx(trl_m["clip_ratio/high_mean"][0])
    assert m["clip/low_frac"] + m["clip/high_frac"] > 0  # the case exercises clipping


def test_dual_clip_matches_trl_delta(grpo_trainer: type) -> None:
    b = batch(12, spread=0.8)
    assert_same_loss_and_grad(
        b,
        lambda lp: ours(b, lp, eps_low=0.2, eps_high=0.2, dual_clip=1.5)[0],
        lambda lp: trl(
            grpo_trainer, b, lp, loss_type="bnpo", epsilon_low=0.2, epsilon_high=0.2, delta=1.5
        )[0],
    )


def test_cispo_matches_trl(grpo_trainer: type) -> None:
    b = batch(13, spread=0.6)
    mine = {"kind": "cispo", "eps_low": 1.0, "eps_high": 0.25}
    # TRL's cispo epsilon_high is the largest weight, our 1 + eps_high; it has no lower bound.
    theirs = {"loss_type": "cispo", "epsilon_low": 0.2, "epsilon_high": 1.25}
    assert_same_loss_and_grad(
        b, lambda lp: ours(b, lp, **mine)[0], lambda lp: trl(grpo_trainer, b, lp, **theirs)[0]
    )
    high = ours(b, **mine)[1]["clip/high_frac"]
    assert high == pytest.approx(trl(grpo_trainer, b, **theirs)[1]["cispo_clip_ratio"][0])
    assert high > 0


def test_k3_penalty_matches_trl_beta_term(grpo_trainer: type) -> None:
    b = batch(14)
    common = {"loss_type": "bnpo", "epsilon_low": 0.2, "epsilon_high": 0.2}
    with_kl, trl_m = trl(grpo_trainer, b, beta=0.1, ref_logp=b["ref"], **common)
    without, _ = trl(grpo_trainer, b, **common)
    penalty = aggregate(kl(b["logp"], b["ref"], "k3"), b["mask"], "token_mean")
    assert close(with_kl - without, 0.1 * penalty)
    assert trl_m["kl"][0] == pytest.approx(float(penalty))


def test_gradient_accumulation_matches_trl_dapo_global_normaliser(grpo_trainer: type) -> None:
    b = batch(15, spread=0.6)
    total = float(b["mask"].sum())
    theirs = {"loss_type": "dapo", "epsilon_low": 0.2, "epsilon_high": 0.28}
    halves = [{k: v[s] for k, v in b.items()} for s in (slice(0, 3), slice(3, 6))]
    accumulated = sum(trl(grpo_trainer, h, num_items_in_batch=total, **theirs)[0] for h in halves)
    assert close(accumulated, ours(b, eps_low=0.2, eps_high=0.28)[0])


# ---------------------------------------------------------------------------------------------
# Gradient accumulation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ppo", "gspo", "cispo"])
@pytest.mark.parametrize("agg", AGGS)
def test_gradient_accumulation_equals_one_large_batch(kind: str, agg: str) -> None:
    b = batch(16, bsz=6, spread=0.5)
    counts = {"global_num_tokens": b["mask"].sum(), "global_num_seqs": 6, "norm_len": 7}
    kw = {"kind": kind, "eps_low": 0.2, "eps_high": 0.28, "agg": agg}
    full, full_grad = loss_and_grad(
        lambda lp: policy_loss(lp, b["old"], b["adv"], b["mask"], **kw), b["logp"]
    )

    def accumulated(lp: torch.Tensor) -> torch.Tensor:
        parts = [slice(0, 2), slice(2, 3), slice(3, 6)]
        return sum(
            policy_loss(lp[s], b["old"][s], b["adv"][s], b["mask"][s], **kw, **counts)[0]
            for s in parts
        )

    acc, acc_grad = loss_and_grad(accumulated, b["logp"])
    assert close(full, acc) and close(full_grad, acc_grad)


# ---------------------------------------------------------------------------------------------
# KL and entropy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_kl_matches_verl_kl_penalty(kind: str) -> None:
    b = batch(17)
    assert close(kl(b["logp"], b["ref"], kind), verl_kl_penalty(b["logp"], b["ref"], kind))


def test_kl_estimators_closed_form() -> None:
    logp, ref = torch.tensor([-1.0, -2.0], dtype=F64), torch.tensor([-1.5, -1.0], dtype=F64)
    assert close(kl(logp, ref, "k1"), [0.5, -1.0])
    assert close(kl(logp, ref, "k2"), [0.125, 0.5])
    assert close(kl(logp, ref, "k3"), [math.exp(-0.5) - 1 + 0.5, math.exp(1.0) - 1 - 1.0])
    assert bool((kl(batch(18)["logp"], batch(18)["ref"], "k3") >= 0).all())
    with pytest.raises(ValueError, match=r"unknown kind 'k4'.*'k1', 'k2', 'k3', 'low_var_kl'"):
        kl(logp, ref, "k4")  # type: ignore[arg-type]


def test_k1_and_k3_are_unbiased_on_samples() -> None:
    g = torch.Generator().manual_seed(19)
    p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=F64)
    q = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2], dtype=F64)
    exact = float((p * (p / q).log()).sum())
    x = torch.multinomial(p, 200_000, replacement=True, generator=g)
    for kind in ("k1", "k3"):
        estimate = float(kl(p.log()[x], q.log()[x], kind).mean())
        assert estimate == pytest.approx(exact, abs=0.01), kind


def test_entropy_from_logits_closed_form() -> None:
    assert close(entropy_from_logits(torch.zeros(3, 8, dtype=F64)), torch.full((3,), math.log(8)))
    logits = torch.randn(2, 4, 11, generator=torch.Generator().manual_seed(20), dtype=F64) * 3
    p = logits.softmax(-1)
    assert close(entropy_from_logits(logits), -(p * p.log()).sum(-1))
    assert close(
        entropy_from_logits(logits), torch.distributions.Categorical(logits=logits).entropy()
    )
    peaked = torch.tensor([[1000.0, 0.0, 0.0]])
    assert float(entropy_from_logits(peaked)) == pytest.approx(0.0, abs=1e-6)


# ---------------------------------------------------------------------------------------------
# What each KL term's gradient is: exact expectations over a categorical policy
# ---------------------------------------------------------------------------------------------


def _categorical() -> tuple[torch.Tensor, torch.Tensor]:
    theta = torch.tensor([0.3, -1.2, 0.8, 0.1, -0.4], dtype=F64)
    ref = torch.tensor([0.1, 0.2, 0.3, 0.15, 0.25], dtype=F64).log()
    return theta, ref


def _expected_grad(term) -> torch.Tensor:
    """``E_{x ~ pi}[grad term(x)]`` summed exactly over the support (samples are constants)."""
    theta, ref = _categorical()
    theta = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)
    weights = logp.exp().detach()
    (weights * term(logp, ref)).sum().backward()
    return theta.grad


def _analytic(kind: str) -> torch.Tensor:
    theta, ref = _categorical()
    theta = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, -1)
    p = logp.exp()
    value = (p * (logp - ref)).sum() if kind == "reverse" else (ref.exp() * (ref - logp)).sum()
    (grad,) = torch.autograd.grad(value, theta)
    return grad


def test_k2_loss_gradient_is_the_reverse_kl_gradient() -> None:
    grad = _expected_grad(lambda lp, ref: kl_loss(lp, ref, "k2"))
    assert close(grad, _analytic("reverse"), tol=1e-10)


@pytest.mark.parametrize("kind", ["k3", "low_var_kl"])
def test_k3_loss_gradient_is_the_forward_kl_gradient(kind: str) -> None:
    grad = _expected_grad(lambda lp, ref: kl_loss(lp, ref, kind))
    assert close(grad, _analytic("forward"), tol=1e-10)
    assert not close(grad, _analytic("reverse"), tol=1e-3)


def test_k1_as_a_loss_has_zero_expected_gradient_and_is_refused() -> None:
    grad = _expected_grad(lambda lp, ref: kl(lp, ref, "k1"))
    assert close(grad, torch.zeros(5, dtype=F64), tol=1e-12)
    with pytest.raises(ValueError, match="zero expected gradient.*kl_mode='reward'"):
        kl_loss(torch.zeros(2), torch.zeros(2), "k1")


def test_k1_in_the_reward_gives_the_reverse_kl_gradient() -> None:
    """REINFORCE with the penalty as reward: E[-penalty * grad log pi] = beta grad KL(pi||ref)."""
    beta = 0.3

    def surrogate(logp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        return -kl_reward_penalty(logp, ref, beta) * logp

    assert close(_expected_grad(surrogate), beta * _analytic("reverse"), tol=1e-10)


# ---------------------------------------------------------------------------------------------
# Off-policy corrections (one meaning per name)
# ---------------------------------------------------------------------------------------------


def _pair() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ratios pi/mu: row 0: 2, 0.5, 3; row 1: 4, 1.5, (masked)."""
    behav = torch.log(torch.tensor([[0.25, 0.4, 0.1], [0.1, 0.2, 0.3]]))
    logp = behav + torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]]).log()
    return logp, behav, torch.tensor([[1, 1, 1], [1, 1, 0]])


def test_token_weights_sequence_ratio_and_ess() -> None:
    logp, behav, mask = _pair()
    assert torch.allclose(
        token_is_weights(logp, behav, cap=2.5), torch.tensor([[2.0, 0.5, 2.5], [2.5, 1.5, 2.5]])
    )
    seq = sequence_ratio(logp, behav, mask)
    assert torch.allclose(seq, torch.tensor([(2 * 0.5 * 3) ** (1 / 3), (4 * 1.5) ** 0.5]))
    assert torch.allclose(
        sequence_ratio(logp, behav, mask, normalise=False), torch.tensor([3.0, 6.0])
    )
    assert weight_metrics(torch.tensor([1.0, 3.0]))["is_weight/ess"] == pytest.approx(0.8)


def test_tis_gradient_is_truncated_weight_times_advantage() -> None:
    logp, behav, mask = _pair()
    logp = logp.clone().requires_grad_(True)
    adv = torch.tensor([1.0, -2.0])
    _, m = async_policy_loss(logp, behav, adv, mask, correction="tis", cap=2.5)
    async_policy_loss(logp, behav, adv, mask, correction="tis", cap=2.5)[0].backward()
    w = torch.tensor([[2.0, 0.5, 2.5], [2.5, 1.5, 0.0]])
    assert torch.allclose(logp.grad, -w * adv[:, None] * mask / 5)
    assert m["is_weight/max"] == pytest.approx(4.0) and m["is_weight/truncated_frac"] == 0.4


def test_tis_equals_cispo_to_the_behaviour_policy_without_lower_bound() -> None:
    """One meaning: tis is -sg(min(r, C)) A log pi, i.e. CISPO with eps_low=1, eps_high=C-1."""
    logp, behav, mask = _pair()
    adv = torch.tensor([1.0, -2.0])
    tis = async_policy_loss(logp, behav, adv, mask, correction="tis", cap=2.5)[0]
    cispo = policy_loss(logp, behav, adv, mask, kind="cispo", eps_low=1.0, eps_high=1.5)[0]
    assert close(tis, cispo)


def test_decoupled_uses_behaviour_weight_and_the_trainers_clip_to_proximal() -> None:
    _, behav, mask = _pair()
    prox = behav + torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]]).log()
    adv = torch.tensor([1.0, -2.0])
    logp = prox.clone().requires_grad_(True)
    async_policy_loss(logp, behav, adv, mask, correction="decoupled", cap=None, prox_logp=prox)[
        0
    ].backward()
    w = torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 0.0]])
    assert torch.allclose(logp.grad, -w * adv[:, None] * mask / 5)
    for kind in ("ppo", "gspo", "cispo"):  # the trainer's own surrogate, to the proximal policy
        mine = async_policy_loss(
            prox, behav, adv, mask, correction="decoupled", cap=2.0, prox_logp=prox, kind=kind
        )[0]
        weighted = adv[:, None] * behaviour_weights(prox, behav, mask, 2.0)
        theirs = policy_loss(prox, prox, weighted, mask, kind=kind)[0]
        assert close(mine, theirs)
    with pytest.raises(ValueError, match="prox_logp"):
        async_policy_loss(prox, behav, adv, mask, correction="decoupled")


def test_seq_and_none_corrections() -> None:
    logp, behav, mask = _pair()
    adv = torch.tensor([1.0, 1.0])
    seq = async_policy_loss(logp, behav, adv, mask, correction="seq", eps_low=10.0, eps_high=10.0)
    assert seq[1]["is_weight/max"] == pytest.approx(6**0.5, rel=1e-5)
    assert close(
        seq[0], policy_loss(logp, behav, adv, mask, kind="gspo", eps_low=10.0, eps_high=10.0)[0]
    )
    none = async_policy_loss(logp, behav, adv, mask, correction="none")[0]
    assert close(none, policy_loss(logp, behav, adv, mask)[0])
