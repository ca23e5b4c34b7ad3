"""PPO: clipped value loss in closed form, GAE over turns with the truncation bootstrap,
and real updates with a value head and with a separate critic."""

from __future__ import annotations

import copy

import pytest
import torch

from repogym.agents.losses import value_loss
from repogym.agents.policy import Policy
from repogym.agents.ppo import PPOBatch, PPOConfig, PPOTrainer, turn_advantages
from tests.agents._episodes import collate_eps, episode, group_batch_episodes, tiny_policy

PPO_METRICS = {
    "loss/policy",
    "loss/value",
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
    return tiny_policy(qwen_dir, value_head=True)


def test_value_loss_closed_form() -> None:
    values = torch.tensor([1.0, 0.0, 3.0], requires_grad=True)
    old = torch.tensor([0.5, 0.5, 2.9])
    returns = torch.tensor([2.0, 0.0, 0.0])
    mask = torch.tensor([1, 1, 1])
    loss = value_loss(values, old, returns, mask, clip=0.2)
    # (1) clipped 0.7 -> 1.69 > 1.00; (2) clipped 0.3 -> 0.09 > 0; (3) inside the clip: 9.
    assert float(loss.detach()) == pytest.approx(0.5 * (1.69 + 0.09 + 9.0) / 3)
    loss.backward()
    # Where the clipped term wins, the value is clamped: no gradient. Else d/dv = (v - R) / n.
    torch.testing.assert_close(values.grad, torch.tensor([0.0, 0.0, 3.0 / 3]))
    plain = value_loss(values.detach(), old, returns, mask, clip=None)
    assert float(plain) == pytest.approx(0.5 * (1.0 + 0.0 + 9.0) / 3)
    masked = value_loss(values.detach(), old, returns, torch.tensor([1, 0, 0]), clip=None)
    assert float(masked) == pytest.approx(0.5)


def test_gae_over_turns_bootstraps_only_where_the_env_did_not_grade(base_policy: Policy) -> None:
    gamma, lam = 0.9, 0.8
    eps = [
        episode(base_policy, ["fix 1\n", "submit\n"], 1.0, terminated=True),
        episode(
            base_policy, ["fix 1\n", "fix 2\n"], 0.5, terminated=False, truncated=True, graded=False
        ),  # cut without grading (e.g. an outer time limit)
        episode(base_policy, ["submit\n"], 1.0, terminated=True),
    ]
    batch = collate_eps(base_policy, eps)
    state_values = torch.tensor([[0.2, 0.4], [0.1, 0.3], [0.5, 0.0]])
    final_values = torch.tensor([9.0, 0.8, 9.0])  # V(s_T); used only for the truncated one
    adv, ret = turn_advantages(batch, state_values, final_values, gamma, lam)
    # Terminated: d1 = 1 - 0.4 = 0.6; d0 = 0.9 * 0.4 - 0.2 = 0.16; A0 = 0.16 + 0.72 * 0.6.
    # Truncated: d1 = 0.5 + 0.9 * 0.8 - 0.3 = 0.92; d0 = 0.9 * 0.3 - 0.1 = 0.17;
    # A0 = 0.17 + 0.72 * 0.92. One turn: A0 = 1 - 0.5; the padded turn stays 0.
    expected = torch.tensor([[0.592, 0.6], [0.8324, 0.92], [0.5, 0.0]])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(ret[:, :1], (expected + state_values)[:, :1], atol=1e-5, rtol=0)
    # RepoEnv grades the final state at the step budget: the outcome is final, no bootstrap,
    # so with gamma = lam = 1 the return of every turn is the outcome itself (not 0.5 + V).
    eps[1].graded = True
    adv2, ret2 = turn_advantages(
        collate_eps(base_policy, eps), state_values, final_values, 1.0, 1.0
    )
    assert float(adv2[1, 1]) == pytest.approx(0.2)
    assert ret2[1].tolist() == pytest.approx([0.5, 0.5])


def test_ppo_passes_global_counts_and_supports_a_kl_term(base_policy: Policy) -> None:
    """Micro-batches of 3 accumulate the gradient of one batch for a seq_mean aggregation,
    and beta > 0 adds a KL term (0 at the start, then positive)."""
    grads = []
    for micro in (16, 3):
        config = PPOConfig(
            epochs=1, lr=1e-3, micro_batch=micro, agg="seq_mean_token_mean", beta=0.1
        )
        trainer = PPOTrainer(config, policy=copy.deepcopy(base_policy))
        batch = collate_eps(trainer.policy, group_batch_episodes(trainer.policy))
        prepared = trainer.prepare(batch)
        norm = trainer.norm(prepared, num_turns=prepared.turn_mask.sum())
        rows = [trainer.micro_step(mb, norm) for mb in prepared.split(micro)]
        assert sum(r["loss/kl"] for r in rows) == pytest.approx(0.0, abs=1e-6)
        grads.append(
            torch.cat([p.grad.flatten() for p in trainer.parameters() if p.grad is not None])
        )
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-4)
    trainer.update(collate_eps(trainer.policy, group_batch_episodes(trainer.policy)))
    m = trainer.update(collate_eps(trainer.policy, group_batch_episodes(trainer.policy)))
    assert m["loss/kl"] > 0


def test_turn_advantages_reach_each_action_token(base_policy: Policy) -> None:
    config = PPOConfig(norm_adv=False, lr=1e-3)
    trainer = PPOTrainer(config, policy=copy.deepcopy(base_policy))
    batch = collate_eps(trainer.policy, group_batch_episodes(trainer.policy))
    prepared = trainer.prepare(batch)
    values = prepared.old_values
    state_values = values.gather(1, batch.state_pos.clamp(min=0))
    final = values.gather(1, batch.final_pos[:, None]).squeeze(1)
    adv, _ = turn_advantages(batch, state_values, final, config.gamma, config.lam)
    for b in range(len(batch)):
        for t in batch.action_mask[b].nonzero().flatten().tolist():
            k = int(batch.turn_index[b, t])
            assert float(prepared.advantages[b, t]) == pytest.approx(float(adv[b, k]))
    # Micro-batches and padding passes carry every typed field; padding zeroes the loss masks.
    parts = prepared.split(3)
    assert all(isinstance(mb, PPOBatch) for mb in parts)
    torch.testing.assert_close(torch.cat([mb.turn_returns for mb in parts]), prepared.turn_returns)
    torch.testing.assert_close(torch.cat([mb.advantages for mb in parts]), prepared.advantages)
    pad = parts[0].zeroed()
    assert not pad.turn_mask.any() and not pad.action_mask.any() and not pad.obs_mask.any()
    torch.testing.assert_close(pad.advantages, parts[0].advantages)


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_one_update_changes_policy_and_critic(base_policy: Policy, critic: str) -> None:
    config = PPOConfig(critic=critic, epochs=2, lr=1e-3)
    trainer = PPOTrainer(config, policy=copy.deepcopy(base_policy))
    critic_module = trainer.critic if trainer.critic is not None else trainer.policy
    head_before = critic_module.value_head.weight.detach().clone()
    lm_before = [p.detach().clone() for p in trainer.policy.model.parameters()]
    metrics = trainer.update(collate_eps(trainer.policy, group_batch_episodes(trainer.policy)))
    assert not torch.equal(head_before, critic_module.value_head.weight)
    changed = [
        not torch.equal(a, b)
        for a, b in zip(lm_before, trainer.policy.model.parameters(), strict=True)
    ]
    assert sum(changed) >= len(changed) - 1
    assert PPO_METRICS <= set(metrics)
    assert metrics["loss/value"] > 0 and metrics["is_weight/max"] > 1.0
    if critic == "separate":
        assert trainer.policy.value_head is not None  # the policy's own head is unused
        assert torch.equal(trainer.policy.value_head.weight, base_policy.value_head.weight)
