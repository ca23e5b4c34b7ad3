"""Asynchronous actor/learner: correction maths in closed form, staleness, workers, the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from repogym.agents.async_rl import (
    AsyncConfig,
    AsyncTrainer,
    RolloutResult,
    SimulatedWorkerFactory,
    async_policy_loss,
    behaviour_weights,
    filter_stale,
    sequence_ratio,
    token_is_weights,
    weight_metrics,
)
from repogym.agents.common import sft_update
from repogym.agents.episode import Episode, Turn, load_policy

LN = math.log


def _pair() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two sequences of three tokens; the last token of row 1 is masked out.

    Token ratios pi/mu: row 0: 2, 0.5, 3; row 1: 4, 1.5, (masked).
    """
    behav = torch.log(torch.tensor([[0.25, 0.4, 0.1], [0.1, 0.2, 0.3]]))
    ratios = torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]])
    logp = behav + ratios.log()
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    return logp, behav, mask


def test_token_weights_and_truncation_at_c() -> None:
    logp, behav, _ = _pair()
    w = token_is_weights(logp, behav)
    assert torch.allclose(w, torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]]))
    capped = token_is_weights(logp, behav, cap=2.5)
    assert torch.allclose(capped, torch.tensor([[2.0, 0.5, 2.5], [2.5, 1.5, 2.5]]))


def test_sequence_ratio_is_length_normalised_and_product_is_not() -> None:
    logp, behav, mask = _pair()
    seq = sequence_ratio(logp, behav, mask)
    assert torch.allclose(seq, torch.tensor([(2 * 0.5 * 3) ** (1 / 3), (4 * 1.5) ** 0.5]))
    prod = sequence_ratio(logp, behav, mask, normalise=False)
    assert torch.allclose(prod, torch.tensor([3.0, 6.0]))


def test_weight_metrics_effective_sample_size() -> None:
    assert weight_metrics(torch.ones(4))["is_weight/ess"] == pytest.approx(1.0)
    m = weight_metrics(torch.tensor([4.0, 0.0, 0.0, 0.0]), cap=2.0)
    assert m["is_weight/ess"] == pytest.approx(0.25)
    assert m["is_weight/max"] == 4.0 and m["is_weight/mean"] == 1.0
    assert m["is_weight/truncated_frac"] == 0.25
    # Kish: (1 + 3)^2 / (2 * (1 + 9)) = 0.8
    assert weight_metrics(torch.tensor([1.0, 3.0]))["is_weight/ess"] == pytest.approx(0.8)


def test_tis_gradient_is_truncated_weight_times_advantage() -> None:
    logp, behav, mask = _pair()
    logp = logp.clone().requires_grad_(True)
    adv = torch.tensor([1.0, -2.0])
    loss, metrics = async_policy_loss(logp, behav, adv, mask, correction="tis", cap=2.5)
    loss.backward()
    w = torch.tensor([[2.0, 0.5, 2.5], [2.5, 1.5, 0.0]])
    expected = -w * adv[:, None] * mask / mask.sum()  # token_mean over 5 tokens
    assert torch.allclose(logp.grad, expected)
    assert metrics["is_weight/max"] == pytest.approx(4.0)  # reported untruncated
    assert metrics["is_weight/truncated_frac"] == pytest.approx(2 / 5)


def test_decoupled_gradient_uses_behaviour_weight_and_proximal_clip() -> None:
    _, behav, mask = _pair()
    prox = behav + torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]]).log()
    adv = torch.tensor([1.0, -2.0])
    # At pi = pi_prox every ratio to the proximal policy is 1: no clipping, and the gradient
    # is -w A / N with w = pi_prox / mu (untruncated when cap=None).
    logp = prox.clone().requires_grad_(True)
    loss, m = async_policy_loss(logp, behav, adv, mask, correction="decoupled", cap=None,
                                prox_logp=prox)  # fmt: skip
    loss.backward()
    w = torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 0.0]])
    assert torch.allclose(logp.grad, -w * adv[:, None] * mask / 5)
    assert m["clip/high_frac"] == 0.0 and m["is_weight/max"] == pytest.approx(4.0)
    # The clip acts on pi / pi_prox: a token pushed past 1 + eps with A > 0 has no gradient,
    # whatever its behaviour weight; the others keep -w A / N (here w capped at C = 3).
    shift = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    logp = (prox + shift).clone().requires_grad_(True)
    loss, m = async_policy_loss(logp, behav, adv, mask, correction="decoupled", cap=3.0,
                                prox_logp=prox)  # fmt: skip
    loss.backward()
    ratio = shift.exp()
    w = torch.tensor([[0.0, 0.5, 3.0], [3.0, 1.5, 0.0]])
    assert torch.allclose(logp.grad, -w * ratio * adv[:, None] * mask / 5)
    assert m["clip/high_frac"] == pytest.approx(1 / 5)


def test_seq_correction_is_gspo_ratio_to_behaviour() -> None:
    logp, behav, mask = _pair()
    logp = logp.clone().requires_grad_(True)
    adv = torch.tensor([1.0, 1.0])
    _, m = async_policy_loss(logp, behav, adv, mask, correction="seq", eps_low=10.0,
                             eps_high=10.0)  # fmt: skip
    assert m["is_weight/max"] == pytest.approx(6**0.5, rel=1e-5)
    assert m["is_weight/mean"] == pytest.approx((3 ** (1 / 3) + 6**0.5) / 2, rel=1e-5)


def test_behaviour_weights_for_trainer_hook() -> None:
    _, behav, mask = _pair()
    prox = behav + torch.tensor([[2.0, 0.5, 3.0], [4.0, 1.5, 9.0]]).log()
    tis = behaviour_weights(prox, behav, mask, "tis", cap=2.5)
    assert torch.allclose(tis, torch.tensor([[2.0, 0.5, 2.5], [2.5, 1.5, 0.0]]))
    seq = behaviour_weights(prox, behav, mask, "seq", cap=2.0)
    assert torch.allclose(seq, torch.tensor([[3 ** (1 / 3)] * 3, [2.0, 2.0, 0.0]]))
    with pytest.raises(ValueError, match="unsafe"):
        behaviour_weights(prox, behav, mask, "product")
    with pytest.raises(ValueError, match="prox_logp"):
        async_policy_loss(prox, behav, torch.ones(2), mask, correction="decoupled")


def test_filter_stale_drops_and_counts() -> None:
    def res(version: int, n: int) -> RolloutResult:
        return RolloutResult([Episode(task="t", prompt="p")] * n, version, 0)

    kept, dropped, ages = filter_stale([res(5, 2), res(2, 3), res(3, 1)], 5, 2)
    assert [r.version for r in kept] == [5, 3]
    assert dropped == 3 and ages == [0, 0, 2]


def test_product_of_token_ratios_explodes_on_long_stale_sequences() -> None:
    """The lecture's failure: the learner moved on (a few SFT steps on two of the sampled
    trajectories); the behaviour policy's long sequences now carry product weights in the
    hundreds or more, while truncated, normalised and decoupled weights stay bounded."""
    torch.manual_seed(0)
    behaviour = load_policy("tiny", device="cpu", seed=0).eval()
    gens = behaviour.generate([behaviour.encode("task t\n")] * 6, max_new_tokens=48)
    eps = [Episode("t", "task t\n", [Turn(g.token_ids, g.logprobs, "")]) for g in gens]
    batch = collate_eps(behaviour, eps)
    learner = behaviour.frozen_copy().requires_grad_(True).train()
    optimizer = torch.optim.AdamW(learner.parameters(), lr=1e-3)
    for _ in range(3):
        sft_update(learner, optimizer, batch.select(slice(0, 2)))
    with torch.no_grad():
        logp = learner.score(batch.input_ids, batch.attention_mask).logp
    adv = torch.ones(len(eps))
    grads, stats = {}, {}
    for correction in ("product", "tis", "seq", "decoupled"):
        x = logp.clone().requires_grad_(True)
        loss, stats[correction] = async_policy_loss(
            x, batch.old_logp, adv, batch.action_mask, correction=correction, cap=2.0,
            prox_logp=logp,
        )  # fmt: skip
        loss.backward()
        grads[correction] = float(x.grad.abs().max())
    assert stats["product"]["is_weight/max"] > 100
    assert stats["product"]["is_weight/ess"] < 0.5
    assert stats["seq"]["is_weight/max"] < 10
    n_tokens = batch.num_action_tokens
    for bounded in ("tis", "decoupled"):  # weights in the loss are capped at C = 2
        assert grads[bounded] <= 2.0 / n_tokens + 1e-6
    assert grads["product"] > 100 * grads["tis"]


def _sim_trainer(tmp_path, **kw) -> tuple[AsyncTrainer, SimulatedWorkerFactory]:
    factory = SimulatedWorkerFactory(median_s=0.02, sigma=0.5, group_size=4)
    config = AsyncConfig(tasks=("sim"), steps=3, out=str(tmp_path / "run"), lr=1e-3,
                         groups_per_step=2, device="cpu", **kw)  # fmt: skip
    policy = factory.build_policy()
    return AsyncTrainer(config, policy=policy, , factory=factory), factory


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_async_loop_bounds_staleness_and_updates(tmp_path, backend: str) -> None:
    workers = 2 if backend == "thread" else 1
    trainer, _ = _sim_trainer(tmp_path, num_workers=workers, max_staleness=1, backend=backend,
                              correction="tis")  # fmt: skip
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    history = trainer.train()
    trainer.close()
    assert len(history) == 3
    for m in history:
        assert m["staleness/max"] <= 1
        for key in ("staleness/mean", "staleness/dropped", "is_weight/max", "is_weight/mean",
                    "is_weight/ess", "loss/policy", "async/learner_idle_frac"):  # fmt: skip
            assert key in m
    assert history[0]["staleness/max"] == 0  # version 0 is the only version at step 1
    after = list(trainer.policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    rows = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and "staleness/mean" in rows[-1]


def test_async_loop_with_ray_actors(tmp_path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'repogym[ray]')")
    trainer, _ = _sim_trainer(tmp_path, num_workers=1, max_staleness=2, ray="local",
                              correction="decoupled")  # fmt: skip
    history = trainer.train(steps=2)
    trainer.close()
    assert [m["async/policy_version"] for m in history] == [1.0, 2.0]
    assert all(m["staleness/max"] <= 2 for m in history)


def test_cli_async_real_env(tmp_path) -> None:
    out = tmp_path / "async"
    cmd = [sys.executable, "-m", "repogym.harness.cli", "train", "--algo", "async", "--model",
           "tiny", "--steps", "2", "--out", str(out), "--task", "retry-zero",
           "--set", "warm_start_steps=0", "--set", "rollout.group_size=2",
           "--set", "rollout.max_steps=2", "--set", "correction=tis"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for key in ("loss/policy", "loss/kl", "is_weight/max", "is_weight/mean", "staleness/mean",
                "staleness/max", "staleness/dropped", "reward/mean"):  # fmt: skip
        assert key in rows[-1], key


def test_behaviour_weight_hook_scales_grpo_and_ppo_policy_terms(tmp_path) -> None:
    """The ``async_`` correction enters GRPO/PPO as a per-token weight on the advantages: at
    ratio 1 (first epoch) a weight of 2 doubles the policy loss."""
    from repogym.agents.grpo import GRPOConfig, GRPOTrainer
    from repogym.agents.ppo import PPOConfig, PPOTrainer
    from tests.agents._episodes import group_batch_episodes, tiny_policy

    for cfg_cls, trainer_cls, value_head in ((GRPOConfig, GRPOTrainer, False),
                                            (PPOConfig, PPOTrainer, True)):  # fmt: skip
        losses = []
        for weight in (None, 2.0):
            policy = tiny_policy(value_head=value_head)
            config = cfg_cls(tasks=("t"), out=str(tmp_path), epochs=1, device="cpu")
            trainer = trainer_cls(config, policy=policy)
            batch = collate_eps(policy, group_batch_episodes(policy))
            if weight is not None:
                batch.extras["behaviour_weight"] = torch.full(batch.input_ids.shape, weight)
            losses.append(trainer.update(batch)["loss/policy"])
        assert losses[1] == pytest.approx(2 * losses[0], rel=1e-5), cfg_cls.__name__


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_async_option_of_grpo_and_ppo(tmp_path, algo: str) -> None:
    from repogym.agents.grpo import GRPOConfig, GRPOTrainer
    from repogym.agents.ppo import PPOConfig, PPOTrainer

    factory = SimulatedWorkerFactory(median_s=0.02, sigma=0.5, group_size=4)
    policy = factory.build_policy()
    options = {"num_workers": 2, "max_staleness": 2, "correction": "seq", "groups_per_step": 2}
    if algo == "grpo":
        config = GRPOConfig(tasks=("sim"), out=str(tmp_path), lr=1e-3, device="cpu",
                            async_=options)  # fmt: skip
        trainer = GRPOTrainer(config, policy=policy)
    else:
        policy.value_head = torch.nn.Linear(policy.model.config.hidden_size, 1)
        config = PPOConfig(tasks=("sim"), out=str(tmp_path), lr=1e-3, device="cpu",
                           async_=options)  # fmt: skip
        trainer = PPOTrainer(config, policy=policy)
    before = [p.detach().clone() for p in policy.model.parameters()]
    history = trainer.train(2, factory=factory, log=False)
    trainer.close()
    assert [m["async/policy_version"] for m in history] == [1.0, 2.0]
    for key in ("staleness/mean", "staleness/max", "is_weight/max", "is_weight/ess",
                "loss/policy"):  # fmt: skip
        assert key in history[-1]
    after = list(policy.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
