"""Credit assignment: the yes/no token critic (closed-form loss, values from the policy's own
LM head, GAE over them, training), Wilson intervals and the Beta posterior's mixed-group
probability in closed form."""

from __future__ import annotations

import copy
import math
import types

import pytest
import torch

from repogym.agents.async_rl import AsyncOptions, train_async
from repogym.agents.critics import TokenCritic
from repogym.agents.losses import (
    beta_mixed_prob,
    gae,
    token_critic_loss,
    wilson_interval,
    yes_no_value,
)
from repogym.agents.policy import Policy
from repogym.agents.ppo import PPOConfig, PPOTrainer
from repogym.agents.sampling import AdaptiveSampler, simulate_zero_std
from tests.agents._episodes import collate_eps, episode, tiny_policy


@pytest.fixture(scope="module")
def plain_policy(qwen_dir) -> Policy:
    return tiny_policy(qwen_dir, value_head=False)


def test_token_critic_loss_closed_form() -> None:
    yes = torch.tensor([[math.log(3.0), 0.0, 2.0]], requires_grad=True)
    no = torch.tensor([[0.0, 0.0, 2.0]], requires_grad=True)
    p = yes_no_value(yes, no)
    torch.testing.assert_close(p.detach(), torch.tensor([[0.75, 0.5, 0.5]]))
    targets = torch.tensor([[1.0, 0.0, 0.3]])
    mask = torch.tensor([[1, 1, 0]])
    loss = token_critic_loss(yes, no, targets, mask)
    assert float(loss.detach()) == pytest.approx((-math.log(0.75) - math.log(0.5)) / 2)
    loss.backward()
    # d BCE / d z = p - t, averaged over the two counted states; z = z_yes - z_no.
    torch.testing.assert_close(yes.grad, torch.tensor([[(0.75 - 1) / 2, 0.5 / 2, 0.0]]))
    torch.testing.assert_close(no.grad, -yes.grad)
    # A soft target t: the minimum of the BCE over p is at p = t, value H(t).
    z = torch.tensor([[math.log(0.3 / 0.7)]])
    soft = token_critic_loss(z, torch.zeros(1, 1), torch.tensor([[0.3]]), torch.ones(1, 1))
    assert float(soft) == pytest.approx(-(0.3 * math.log(0.3) + 0.7 * math.log(0.7)), rel=1e-5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        token_critic_loss(yes, no, torch.tensor([[2.0, 0.0, 0.0]]), mask)


def test_wilson_interval_and_beta_mixed_probability_closed_form() -> None:
    low, high = wilson_interval(3, 10)  # the lecture's 3 of 10 -> about 0.3
    centre = (0.3 + 1.96**2 / 20) / (1 + 1.96**2 / 10)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 10 + 1.96**2 / 400) / (1 + 1.96**2 / 10)
    assert (low, high) == pytest.approx((centre - half, centre + half))
    assert low < 0.3 < high and (low, high) == pytest.approx((0.1078, 0.6032), abs=1e-4)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 0)
    # Beta(1, 1) is uniform: E[p^G] = 1 / (G + 1), so P(mixed) = 1 - 2 / (G + 1).
    assert beta_mixed_prob(1, 1, 4) == pytest.approx(1 - 2 / 5)
    # Beta(2, 1): E[p^2] = 2*3 / (3*4) = 1/2, E[(1-p)^2] = 1*2 / (3*4) = 1/6.
    assert beta_mixed_prob(2, 1, 2) == pytest.approx(1 - 1 / 2 - 1 / 6)
    assert beta_mixed_prob(1000, 1e-3, 8) < 1e-3  # all but certain success: no signal


def _episodes(policy: Policy) -> list:
    return [
        episode(policy, ["fix 1\n", "submit\n"], 1.0, group=0),
        episode(policy, ["fix 2\n", "submit\n"], 0.0, group=0),
        episode(policy, ["submit\n"], 1.0, group=1),
        episode(
            policy,
            ["fix 2\n", "fix 2\n"],
            0.0,
            terminated=False,
            truncated=True,
            graded=False,
            group=1,
        ),
    ]


def test_token_critic_reads_the_lm_head_after_the_question(plain_policy: Policy) -> None:
    critic = TokenCritic(plain_policy)
    batch = collate_eps(plain_policy, _episodes(plain_policy))
    with torch.no_grad():
        lg = critic.state_logits(plain_policy, batch)
        for b in range(len(batch)):
            ends = [int(p) for p in batch.state_pos[b] if p >= 0] + [int(batch.final_pos[b])]
            for k, end in enumerate(ends):
                ids = batch.input_ids[b, : end + 1].tolist() + critic.question_ids
                out = plain_policy.lm(input_ids=torch.tensor([ids])).logits[0, -1]
                yes, no = (
                    (lg.yes[b, k], lg.no[b, k])
                    if k < len(ends) - 1
                    else (lg.final_yes[b], lg.final_no[b])
                )
                assert float(yes) == pytest.approx(float(out[critic.yes_id]), abs=1e-4)
                assert float(no) == pytest.approx(float(out[critic.no_id]), abs=1e-4)
                p = torch.softmax(out[[critic.yes_id, critic.no_id]], -1)[0]
                assert float(yes_no_value(yes, no)) == pytest.approx(float(p), abs=1e-5)


def test_token_critic_plugs_into_gae_and_learns_the_outcome(plain_policy: Policy) -> None:
    config = PPOConfig(
        critic="token", norm_adv=False, lr=3e-3, vf_coef=1.0, epochs=1, gamma=0.9, lam=0.8
    )
    trainer = PPOTrainer(config, policy=copy.deepcopy(plain_policy))
    assert trainer.policy.value_head is None  # no new parameters
    n_params = sum(p.numel() for p in trainer.parameters())
    assert n_params == sum(p.numel() for p in plain_policy.parameters())
    eps = _episodes(trainer.policy)
    batch = collate_eps(trainer.policy, eps)
    prepared = trainer.prepare(batch)
    with torch.no_grad():
        lg = trainer.token_critic.state_logits(trainer.policy, batch)
    values, final = yes_no_value(lg.yes, lg.no), yes_no_value(lg.final_yes, lg.final_no)
    for b, ep in enumerate(eps):  # GAE over the critic's p(yes), the bootstrap where cut
        k = len(ep.turns)
        rewards = torch.zeros(k)
        rewards[-1] = ep.reward
        dones = torch.zeros(k)
        dones[-1] = 0.0 if ep.bootstrap else 1.0
        adv, ret = gae(rewards, values[b, :k], dones, final[b] if ep.bootstrap else 0.0, 0.9, 0.8)
        mask = batch.turn_index[b] >= 0
        expected = adv[batch.turn_index[b][mask]]
        torch.testing.assert_close(prepared.advantages[b][mask], expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(prepared.turn_returns[b, :k], ret, atol=1e-5, rtol=0)
        assert prepared.critic_targets[b, :k].tolist() == [ep.reward] * k
    # Training on the outcome: the cross-entropy falls to about the best constant's,
    # H(3/7) = 0.683 (the tiny random model does not yet tell the states apart).
    losses = [trainer.update(collate_eps(trainer.policy, eps))["loss/value"] for _ in range(8)]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.03


def test_adaptive_sampler_posterior_with_forgetting_closed_form() -> None:
    s = AdaptiveSampler(["a", "b"], group_size=2, forget=0.5, explore=0.2)
    assert s.probabilities().tolist() == pytest.approx([0.5, 0.5])
    s.update({"a": [1.0, 1.0, 0.0]})  # a: Beta(1 + 2, 1 + 1); b: still the prior
    assert (s.alpha["a"], s.beta["a"], s.alpha["b"], s.beta["b"]) == (3.0, 2.0, 1.0, 1.0)
    s.update({})  # forgetting: a0 + 0.5 (a - a0)
    assert (s.alpha["a"], s.beta["a"]) == (2.0, 1.5)
    m = [beta_mixed_prob(2.0, 1.5, 2), beta_mixed_prob(1.0, 1.0, 2)]
    expected = [0.8 * x / sum(m) + 0.2 / 2 for x in m]
    assert s.probabilities().tolist() == pytest.approx(expected)
    assert s.draw(5, step=3, seed=1) == s.draw(5, step=3, seed=1)  # a pure function of state
    s2 = AdaptiveSampler(["a", "b"], group_size=2)
    s2.load_state(s.state())
    assert s2.alpha == s.alpha and s2.beta == s.beta
    with pytest.raises(ValueError, match="sampler_forget"):
        AdaptiveSampler(["a"], 2, forget=1.5)


MIX = {
    **{f"solved-{i}": 1.0 for i in range(4)},
    **{f"never-{i}": 0.0 for i in range(4)},
    "half": 0.5,
    "mid": 0.3,
    "hard": 0.1,
    "easy": 0.9,
}


def test_adaptive_sampling_lowers_the_zero_variance_share() -> None:
    """Scripted success rates: 4 always-solved, 4 never-solved and 4 mixed tasks, 4 groups of 8
    per step, 200 steps, seed 0. Uniform sampling wastes ~3/4 of the groups."""
    kw = {"steps": 200, "per_step": 4, "group_size": 8, "seed": 0}
    uniform = simulate_zero_std(MIX, sampler="uniform", **kw)
    adaptive = simulate_zero_std(MIX, sampler="adaptive", **kw)
    assert uniform["frac_zero_std_groups"] == pytest.approx(0.74, abs=0.04)
    assert adaptive["frac_zero_std_groups"] < uniform["frac_zero_std_groups"] - 0.2  # 0.49
    assert adaptive["draws"]["half"] > 2 * max(adaptive["draws"][f"solved-{i}"] for i in range(4))
    # The exploration share keeps every task in play.
    assert min(adaptive["draws"].values()) > 0


def test_the_sampler_state_is_checkpointed_and_async_refuses_it(plain_policy: Policy) -> None:
    config = PPOConfig(critic="token", sampler="adaptive", tasks=("a", "b"), tasks_per_step=3)
    trainer = PPOTrainer(config, policy=copy.deepcopy(plain_policy))
    assert len(trainer.step_tasks(1)) == 3 and set(trainer.step_tasks(1)) <= {"a", "b"}
    eps = [episode(trainer.policy, ["submit\n"], r, task="a") for r in (1.0, 1.0, 0.0)]
    metrics = trainer.update_sampler(eps)
    assert metrics["sampler/distinct_tasks"] == 1.0
    assert trainer.sampler.alpha["a"] == pytest.approx(1 + 2) and trainer.sampler.beta["a"] == 2
    again = PPOTrainer(config, policy=copy.deepcopy(plain_policy))
    again.load_state(trainer.state())
    assert again.sampler.state() == trainer.sampler.state()
    assert again.step_tasks(5) == trainer.step_tasks(5)
    with pytest.raises(ValueError, match="sampler=adaptive is not supported with asynchronous"):
        train_async(types.SimpleNamespace(config=config), AsyncOptions())
    with pytest.raises(ValueError, match="advantage=mc is not supported with asynchronous"):
        train_async(types.SimpleNamespace(config=PPOConfig(advantage="mc")), AsyncOptions())
    with pytest.raises(ValueError, match="sampler"):
        PPOConfig(sampler="thompson")
