"""The asynchronous wrapper: staleness bounded by backpressure (nothing dropped), settings
checked up front, workers as threads, processes and Ray actors around GRPO and PPO, and
``--algo async`` in real environments with rollouts, config and resume."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from repogym.agents.async_rl import AsyncOptions, initial_tickets, train_async
from repogym.agents.async_sim import SimulatedWorkerFactory
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import load_policy
from repogym.agents.ppo import PPOConfig, PPOTrainer


@pytest.mark.parametrize(("sync_every", "max_staleness"), [(1, 2), (2, 1), (1, 0)])
def test_backpressure_holds_staleness_without_dropping(
    qwen_dir, tmp_path, sync_every, max_staleness
) -> None:
    # Heavy-tailed group durations (one in ~10 takes 3x the median) and more workers than the
    # learner needs: unchecked, the workers would run ahead and their groups go stale.
    factory = SimulatedWorkerFactory(model=str(qwen_dir), median_s=0.01, sigma=1.0, seed=3)
    trainer = GRPOTrainer(
        GRPOConfig(tasks=("sim",), steps=8, out=str(tmp_path), device="cpu", epochs=1),
        policy=load_policy(qwen_dir, device="cpu"),
    )
    opts = AsyncOptions(
        num_workers=3,
        sync_every=sync_every,
        max_staleness=max_staleness,
        correction="tis",
        groups_per_step=1,
    )
    history = train_async(trainer, opts, factory=factory, log=False)
    trainer.close()
    assert history[-1]["staleness/dropped_total"] == 0
    assert max(m["staleness/max"] for m in history) <= max_staleness
    # At most (max_staleness + 2 - sync_every) groups per step may run ahead.
    assert all(m["async/in_flight"] <= initial_tickets(opts, 1) for m in history)


def test_settings_that_would_hang_are_refused() -> None:
    with pytest.raises(ValueError, match="wait forever. Fix: set sync_every <= max_staleness"):
        AsyncOptions(sync_every=4, max_staleness=2)
    with pytest.raises(ValueError, match="unsafe"):
        AsyncOptions(correction="product")
    AsyncOptions(sync_every=3, max_staleness=2)


@pytest.mark.parametrize(
    ("algo", "backend", "correction"),
    [
        ("grpo", "thread", "decoupled"),
        ("grpo", "process", "tis"),
        ("ppo", "thread", "seq"),
    ],
)
def test_wrapper_around_grpo_and_ppo(qwen_dir, tmp_path, algo, backend, correction) -> None:
    factory = SimulatedWorkerFactory(model=str(qwen_dir), median_s=0.02, sigma=0.5)
    policy = load_policy(qwen_dir, device="cpu", value_head=algo == "ppo")
    cls, trainer_cls = (GRPOConfig, GRPOTrainer) if algo == "grpo" else (PPOConfig, PPOTrainer)
    trainer = trainer_cls(
        cls(tasks=("sim",), steps=3, out=str(tmp_path), lr=1e-3, device="cpu"), policy=policy
    )
    before = [p.detach().clone() for p in policy.model.parameters()]
    opts = AsyncOptions(
        num_workers=2 if backend == "thread" else 1,
        backend=backend,
        max_staleness=1,
        correction=correction,
        groups_per_step=2,
    )
    history = train_async(trainer, opts, factory=factory)
    trainer.close()
    assert [m["async/policy_version"] for m in history] == [1.0, 2.0, 3.0]
    assert history[0]["staleness/max"] == 0 and all(m["staleness/max"] <= 1 for m in history)
    for key in ("staleness/mean", "is_weight/max", "is_weight/mean", "loss/policy"):
        assert key in history[-1]
    assert any(
        not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True)
    )
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]


def test_ray_actors(qwen_dir, tmp_path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'repogym[ray]')")
    factory = SimulatedWorkerFactory(model=str(qwen_dir), median_s=0.02, sigma=0.5)
    trainer = GRPOTrainer(
        GRPOConfig(tasks=("sim",), steps=2, out=str(tmp_path), device="cpu"),
        policy=load_policy(qwen_dir, device="cpu"),
    )
    history = train_async(
        trainer, AsyncOptions(num_workers=1, ray="local"), factory=factory, log=False
    )
    assert [m["async/policy_version"] for m in history] == [1.0, 2.0]


def test_cli_async_real_env_writes_rollouts_and_resumes(qwen_dir, tmp_path) -> None:
    out = tmp_path / "async"
    cmd = [
        sys.executable,
        "-m",
        "repogym.cli",
        "train",
        "--algo",
        "async",
        "--model",
        str(qwen_dir),
        "--out",
        str(out),
        "--task",
        "retry-zero",
        "--set",
        "rollout.group_size=2",
        "--set",
        "rollout.max_steps=1",
        "--set",
        "rollout.max_new_tokens=8",
        "--set",
        "correction=tis",
    ]
    for extra in (["--steps", "8"], ["--steps", "9", "--resume"]):
        proc = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 10))
    for key in ("loss/policy", "is_weight/max", "staleness/mean", "reward/mean"):
        assert key in rows[-1], key
    assert rows[-1]["async/policy_version"] == 9 and rows[-1]["staleness/dropped_total"] == 0
    assert json.loads((out / "config.json").read_text())["max_staleness"] == 2
    files = sorted((out / "rollouts").glob("step-*.jsonl"))
    assert len(files) == 9 * 2
    header = json.loads(files[-1].read_text().splitlines()[0])
    assert header["train_step"] == 9 and header["policy_version"] in (6, 7, 8)
