"""Echo as an extra term: the observation mask, the loss in closed form, lambda = 0 is GRPO bit
for bit, the observation loss falls when trained, and micro-batches sum to the batch loss."""

from __future__ import annotations

import copy

import pytest
import torch

from repogym.agents.echo import EchoConfig, echo_term, echo_trainer
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.losses import echo_loss
from tests.agents._episodes import collate_eps, episode, group_batch_episodes, tiny_policy


@pytest.fixture(scope="module")
def policy(qwen_dir):
    return tiny_policy(qwen_dir)


def test_obs_mask_selects_exactly_the_observation_tokens(policy) -> None:
    ep = episode(policy, ["fix 1\n", "submit\n"], 1.0, obs="1 passed in 0.01s\n")
    broken = episode(policy, ["fix 2\n"], 0.0, infra_error="sandbox died")
    batch = collate_eps(policy, [ep, broken])
    ids, obs = batch.input_ids[0], batch.obs_mask[0].bool()
    assert policy.tokenizer.decode(ids[obs].tolist()) == "1 passed in 0.01s\n" * 2
    assert not (obs & batch.prompt_mask[0].bool()).any()
    assert not (obs & batch.action_mask[0].bool()).any()
    assert batch.obs_mask[1].sum() == 0  # infrastructure errors never enter a loss


def test_echo_loss_closed_form() -> None:
    logp = torch.tensor([[0.0, -1.0, -2.0, -3.0], [0.0, -0.5, -4.0, -1.0]])
    mask = torch.tensor([[0, 1, 0, 1], [0, 0, 1, 0]])
    assert float(echo_loss(logp, mask)) == pytest.approx((1 + 3 + 4) / 3)
    parts = [echo_loss(logp[i : i + 1], mask[i : i + 1], 3) for i in range(2)]
    assert float(sum(parts)) == pytest.approx((1 + 3 + 4) / 3)


def _pair(policy, echo_lambda: float):
    kw = {"lr": 1e-3, "micro_batch": 3, "device": "cpu"}
    base = GRPOTrainer(GRPOConfig(**kw), policy=copy.deepcopy(policy))
    echo = echo_trainer(EchoConfig(echo_lambda=echo_lambda, **kw), policy=copy.deepcopy(policy))
    return base, echo


def test_lambda_zero_reproduces_grpo_exactly(policy) -> None:
    base, echo = _pair(policy, 0.0)
    batch = collate_eps(policy, group_batch_episodes(policy))
    m_base, m_echo = base.update(batch.select(slice(None))), echo.update(batch.select(slice(None)))
    assert m_echo["loss/policy"] == m_base["loss/policy"] and m_echo["loss/echo"] > 0
    for a, b in zip(base.policy.parameters(), echo.policy.parameters(), strict=True):
        assert torch.equal(a, b)


def test_lambda_positive_lowers_the_observation_loss(policy) -> None:
    _, echo = _pair(policy, 1.0)
    batch = collate_eps(policy, group_batch_episodes(policy))
    losses = [echo.update(batch.select(slice(None)))["loss/echo"] for _ in range(6)]
    assert losses[-1] < 0.8 * losses[0], losses


def test_echo_term_sums_over_micro_batches_to_the_batch_loss(policy) -> None:
    _, echo = _pair(policy, 1.0)
    batch = collate_eps(policy, group_batch_episodes(policy))
    term, norm = echo_term(1.0), echo.norm(batch)
    with torch.no_grad():
        whole = float(echo_loss(echo.score(batch).logp, batch.obs_mask))
        parts = sum(float(term.fn(echo.score(mb), mb, norm)) for mb in batch.split(3))
    assert parts == pytest.approx(whole, rel=1e-5)
