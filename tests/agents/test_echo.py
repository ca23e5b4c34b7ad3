"""Echo: the observation mask, the loss in closed form, lambda = 0 is GRPO bit for bit, the
observation loss falls when trained, and ``--algo echo`` in real environments."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from repogym.agents.echo import EchoConfig, EchoTrainer, echo_loss, with_echo_norm
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.episode import Episode, Turn
from tests.agents._episodes import group_batch_episodes, tiny_policy


def test_obs_mask_selects_exactly_the_observation_tokens() -> None:
    policy = tiny_policy()
    observations = ["Wrote 10 characters to a.py.\n", "1 passed in 0.01s\n"]
    ep = Episode("t", "task t\n", [])
    for action, obs in zip(["fix 1\n", "submit\n"], observations, strict=True):
        ids = policy.encode(action)
        ep.turns.append(Turn(ids, [0.0] * len(ids), obs))
    broken = Episode("t", "task t\n", [Turn(policy.encode("fix 2\n"), [0.0] * 3, "boom\n")],
                     infra_error="sandbox died")  # fmt: skip
    broken.turns[0].action_logprobs = [0.0] * len(broken.turns[0].action_ids)
    batch = collate_eps(policy, [ep, broken])
    ids, obs = batch.input_ids[0], batch.obs_mask[0].bool()
    assert policy.tokenizer.decode(ids[obs].tolist()) == "".join(observations)
    assert not (obs & batch.prompt_mask[0].bool()).any()
    assert not (obs & batch.action_mask[0].bool()).any()
    assert policy.tokenizer.decode(ids[batch.prompt_mask[0].bool()].tolist()) == "task t\n"
    # Two separate observation spans, each right after its action.
    spans = torch.diff(obs.long()).eq(1).sum()
    assert int(spans) == 2
    assert batch.obs_mask[1].sum() == 0  # infrastructure errors never enter a loss


def test_echo_loss_closed_form() -> None:
    logp = torch.tensor([[0.0, -1.0, -2.0, -3.0], [0.0, -0.5, -4.0, -1.0]])
    mask = torch.tensor([[0, 1, 0, 1], [0, 0, 1, 0]])
    assert float(echo_loss(logp, mask)) == pytest.approx((1 + 3 + 4) / 3)
    # Micro-batches with the global count add up to the batch loss.
    parts = [echo_loss(logp[i : i + 1], mask[i : i + 1], 3) for i in range(2)]
    assert float(sum(parts)) == pytest.approx((1 + 3 + 4) / 3)
    assert float(echo_loss(logp, torch.zeros_like(mask))) == 0.0


def _pair(echo_lambda: float, tmp_path) -> tuple[GRPOTrainer, EchoTrainer]:
    kw = {"tasks": ("t0", "t1"), "out": str(tmp_path), "lr": 1e-3, "micro_batch": 3,
          "device": "cpu"}  # fmt: skip
    base = GRPOTrainer(GRPOConfig(**kw), policy=tiny_policy())
    echo = EchoTrainer(EchoConfig(echo_lambda=echo_lambda, **kw), policy=tiny_policy(),
                       )  # fmt: skip
    return base, echo


def test_lambda_zero_reproduces_grpo_exactly(tmp_path) -> None:
    base, echo = _pair(0.0, tmp_path)
    for a, b in zip(base.policy.parameters(), echo.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    batch = collate_eps(base.policy, group_batch_episodes(base.policy))
    m_base = base.update(batch.select(slice(None)))
    m_echo = echo.update(batch.select(slice(None)))
    assert m_echo["loss/policy"] == m_base["loss/policy"]
    assert m_echo["loss/echo"] > 0  # logged, not added
    changed = False
    for a, b, p0 in zip(base.policy.parameters(), echo.policy.parameters(),
                        tiny_policy().parameters(), strict=True):  # fmt: skip
        assert torch.equal(a, b)
        changed |= not torch.equal(a, p0)
    assert changed


def test_lambda_positive_changes_the_update_and_the_observation_loss_falls(tmp_path) -> None:
    base, echo = _pair(1.0, tmp_path)
    batch = collate_eps(base.policy, group_batch_episodes(base.policy))
    base.update(batch.select(slice(None)))
    losses = [echo.update(batch.select(slice(None)))["loss/echo"] for _ in range(6)]
    assert losses[-1] < 0.8 * losses[0], losses
    first = next(iter(base.policy.parameters()))
    assert not torch.equal(first, next(iter(echo.policy.parameters())))


def test_echo_term_sums_over_micro_batches_to_the_batch_loss(tmp_path) -> None:
    _, echo = _pair(1.0, tmp_path)
    batch = with_echo_norm(collate_eps(echo.policy, group_batch_episodes(echo.policy)))
    with torch.no_grad():
        whole = echo.policy.score(batch.input_ids, batch.attention_mask).logp
        expected = float(echo_loss(whole, batch.obs_mask))
        total = 0.0
        for mb in batch.split(3):
            logp = echo.policy.score(mb.input_ids, mb.attention_mask).logp
            total += float(echo_loss(logp, mb.obs_mask, mb.extras["echo_num_tokens"][0]))
    assert total == pytest.approx(expected, rel=1e-5)


def test_cli_echo_with_shaping_real_env(tmp_path) -> None:
    out = tmp_path / "echo"
    shaping = json.dumps({"env": 1.0, "resolved": 1.0, "overlong": 0.5})
    cmd = [sys.executable, "-m", "repogym.harness.cli", "train", "--algo", "echo", "--model",
           "tiny", "--steps", "2", "--out", str(out), "--task", "retry-zero",
           "--set", "warm_start_steps=0", "--set", "rollout.group_size=2",
           "--set", "rollout.max_steps=2", "--set", "rollout.reward_mode=partial",
           "--set", f"shaping={shaping}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for key in ("loss/policy", "loss/kl", "loss/echo", "is_weight/max", "reward/mean",
                "reward/component/env", "reward/component/env/share",
                "reward/component/overlong/share", "reward/proxy_gap"):  # fmt: skip
        assert key in rows[-1], key
    shares = [v for k, v in rows[-1].items() if k.endswith("/share")]
    assert sum(shares) == pytest.approx(1.0) or sum(shares) == 0.0


def test_grpo_echo_lambda_field_equals_echo_trainer(tmp_path) -> None:
    kw = {"tasks": ("t0", "t1"), "out": str(tmp_path), "lr": 1e-3, "micro_batch": 3,
          "device": "cpu", "echo_lambda": 0.5}  # fmt: skip
    grpo = GRPOTrainer(GRPOConfig(**kw), policy=tiny_policy())
    echo = EchoTrainer(EchoConfig(**kw), policy=tiny_policy())
    batch = collate_eps(grpo.policy, group_batch_episodes(grpo.policy))
    m_grpo, m_echo = grpo.update(batch.select(slice(None))), echo.update(batch.select(slice(None)))
    assert m_grpo["loss/echo"] == m_echo["loss/echo"] > 0
    for a, b in zip(grpo.policy.parameters(), echo.policy.parameters(), strict=True):
        assert torch.equal(a, b)
