"""GRPO-family trainer: variant recipes, group advantages with infra masking, real updates."""

from __future__ import annotations

import copy

import pytest
import torch

from repogym.agents.grpo import VARIANTS, GRPOConfig, GRPOTrainer, batch_advantages
from repogym.agents.policy import Policy
from tests.agents._episodes import collate_eps, episode, group_batch_episodes, tiny_policy

GRPO_METRICS = {
    "loss/policy",
    "loss/kl",
    "loss/entropy",
    "clip/low_frac",
    "clip/high_frac",
    "is_weight/max",
    "is_weight/mean",
    "approx_kl",
    "entropy",
    "throughput/tokens_per_s",
}


@pytest.fixture(scope="module")
def base_policy(qwen_dir) -> Policy:
    return tiny_policy(qwen_dir)


def trainer_for(policy: Policy, **kwargs: object) -> GRPOTrainer:
    config = GRPOConfig(**{"lr": 1e-3, "micro_batch": 16, **kwargs})
    return GRPOTrainer(config, policy=copy.deepcopy(policy))


def test_variants_set_the_papers_recipes() -> None:
    dapo = GRPOConfig(variant="dapo")
    assert (dapo.loss_kind, dapo.eps_low, dapo.eps_high, dapo.agg) == (
        "ppo",
        0.2,
        0.28,
        "token_mean",
    )
    assert dapo.dynamic_sampling and dapo.rollout.dynamic_sampling
    gspo = GRPOConfig(variant="gspo")
    assert (gspo.loss_kind, gspo.eps_low, gspo.eps_high) == ("gspo", 3e-4, 4e-4)
    dr = GRPOConfig(variant="dr_grpo")
    assert (dr.adv_mode, dr.agg) == ("dr_grpo", "seq_mean_token_sum_norm")
    cispo = GRPOConfig(variant="cispo")
    assert (cispo.loss_kind, cispo.eps_low, cispo.eps_high) == ("cispo", 1.0, 4.0)
    assert GRPOConfig(variant="grpo", eps_high=0.3).eps_high == 0.3  # an override wins
    assert set(VARIANTS) == {"grpo", "gspo", "dapo", "cispo", "dr_grpo"}
    with pytest.raises(ValueError, match="unknown variant 'ppo2'"):
        GRPOConfig(variant="ppo2")  # type: ignore[arg-type]


def test_group_advantages_leave_infra_errors_out(base_policy: Policy) -> None:
    batch = collate_eps(base_policy, group_batch_episodes(base_policy))
    adv = batch_advantages(batch, "grpo")
    # Group 0: rewards 1, 0, 0, 1 -> +-(0.5 / std) with the unbiased std 0.5774.
    torch.testing.assert_close(
        adv[:4], torch.tensor([1.0, -1.0, -1.0, 1.0]) * 0.8660, atol=1e-4, rtol=0
    )
    # Group 1: the infra-error episode (last) is out: rewards 0, 1, 0 -> baseline 1/3.
    std = torch.tensor([0.0, 1.0, 0.0]).std()
    expected = (torch.tensor([0.0, 1.0, 0.0]) - 1 / 3) / std
    torch.testing.assert_close(adv[4:7], expected, atol=1e-4, rtol=0)
    assert float(adv[7]) == 0.0
    two = collate_eps(base_policy, [episode(base_policy, ["fix 1\n"], r) for r in (1, 0)])
    torch.testing.assert_close(
        batch_advantages(two, "grpo"), torch.tensor([0.7071, -0.7071]), atol=1e-4, rtol=0
    )


@pytest.mark.parametrize("variant", ["grpo", "gspo", "dapo", "cispo", "dr_grpo"])
def test_one_update_changes_the_parameters(base_policy: Policy, variant: str) -> None:
    trainer = trainer_for(base_policy, variant=variant, epochs=2)
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    batch = collate_eps(trainer.policy, group_batch_episodes(trainer.policy))
    metrics = trainer.update(batch)
    changed = [
        not torch.equal(b, p) for b, p in zip(before, trainer.policy.parameters(), strict=True)
    ]
    assert sum(changed) >= len(changed) - 1  # every weight moves (a zero-grad bias may not)
    assert GRPO_METRICS <= set(metrics)
    # The second epoch sees the updated policy, so the importance ratios are no longer 1.
    assert metrics["is_weight/max"] > 1.0 and metrics["approx_kl"] > 0.0


def test_infra_error_episodes_do_not_touch_the_gradient(base_policy: Policy) -> None:
    """Changing the failed episode's tokens and reward changes nothing in the update."""
    grads = []
    for action, reward in [("fix 1\n", 1.0), ("submit\n", 0.0)]:
        eps = group_batch_episodes(base_policy)
        eps[-1] = episode(
            base_policy, [action], reward, task="t1", group=1, infra_error="sandbox died"
        )
        trainer = trainer_for(base_policy, variant="grpo", epochs=1)
        batch = collate_eps(trainer.policy, eps)
        prepared = trainer.prepare(batch)
        trainer.micro_step(prepared, trainer.norm(prepared, norm_len=32.0))
        grads.append(
            torch.cat([p.grad.flatten() for p in trainer.policy.parameters() if p.grad is not None])
        )
    torch.testing.assert_close(grads[0], grads[1])


def accumulated_grad(trainer: GRPOTrainer, micro: int) -> torch.Tensor:
    """The gradient of one optimiser step, accumulated over micro-batches of ``micro``."""
    batch = collate_eps(trainer.policy, group_batch_episodes(trainer.policy))
    prepared = trainer.prepare(batch)
    norm = trainer.norm(prepared, norm_len=32.0)
    for mb in prepared.split(micro):
        trainer.micro_step(mb, norm)
    return torch.cat([p.grad.flatten() for p in trainer.policy.parameters() if p.grad is not None])


@pytest.mark.parametrize("variant", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_micro_batches_accumulate_the_gradient_of_one_batch(
    base_policy: Policy, variant: str
) -> None:
    whole = accumulated_grad(trainer_for(base_policy, variant=variant), 8)
    parts = accumulated_grad(trainer_for(base_policy, variant=variant), 3)
    torch.testing.assert_close(parts, whole, atol=1e-6, rtol=1e-4)


def test_kl_to_the_reference_starts_at_zero_and_grows(base_policy: Policy) -> None:
    trainer = trainer_for(base_policy, variant="grpo", beta=0.1, kl_kind="k3", epochs=1)
    assert trainer.ref is not None
    batch = collate_eps(trainer.policy, group_batch_episodes(trainer.policy))
    first = trainer.update(batch)
    assert first["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    second = trainer.update(collate_eps(trainer.policy, group_batch_episodes(trainer.policy)))
    assert second["loss/kl"] > 1e-6
    assert all(not p.requires_grad for p in trainer.ref.policy.parameters())


@pytest.mark.parametrize("kind", ["k2", "low_var_kl"])
def test_kl_as_loss_and_k1_in_reward(base_policy: Policy, kind: str) -> None:
    loss_t = trainer_for(base_policy, variant="grpo", beta=0.5, kl_kind=kind, epochs=1)
    reward_t = trainer_for(base_policy, variant="grpo", beta=0.5, kl_mode="reward", epochs=1)
    for t in (loss_t, reward_t):  # move the policy away from the reference first
        t.update(collate_eps(t.policy, group_batch_episodes(t.policy)))
    batch = collate_eps(reward_t.policy, group_batch_episodes(reward_t.policy))
    prepared = reward_t.prepare(batch)
    # k1 in the reward: each episode's reward minus beta * sum of its tokens' k1, then the
    # group baseline; the KL loss term is reported but carries no weight.
    logp_ref = reward_t.ref_logp(batch)
    k1 = ((batch.old_logp - logp_ref) * batch.action_mask).sum(-1)
    torch.testing.assert_close(prepared.kl_penalty, -0.5 * k1)
    expected = batch_advantages(batch, "grpo", batch.rewards - 0.5 * k1)
    torch.testing.assert_close(prepared.advantages, expected)
    m = loss_t.update(collate_eps(loss_t.policy, group_batch_episodes(loss_t.policy)))
    assert m["loss/kl"] > 0
    with pytest.raises(ValueError, match="zero expected gradient"):
        GRPOConfig(beta=0.1, kl_kind="k1")
