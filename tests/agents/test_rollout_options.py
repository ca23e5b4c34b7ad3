"""Rollouts that hold up at scale: top-p/top-k with their behaviour logprobs, per-episode
sampling streams, the task sampler, overlong masking, delta rendering inside a real step, and
in-training evaluation (real environments, the tiny ChatML checkpoint)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from repogym.agents.chat import ChatFormat
from repogym.agents.engines import HFEngine, Request, processed_logprobs
from repogym.agents.episode import collate
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import load_policy
from repogym.agents.rollout import RolloutConfig
from repogym.agents.sampling import step_tasks
from repogym.cli import main
from tests.agents._episodes import episode, tiny_policy
from tests.agents.test_chat import _rewriting


def test_processed_logprobs_truncate_and_renormalise() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    # top_p 0.7: the nucleus is {0.5, 0.3} (0.5 alone does not reach 0.7).
    p = processed_logprobs(logits, top_p=0.7).exp()[0]
    torch.testing.assert_close(p, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    k = processed_logprobs(logits, top_k=3).exp()[0]
    torch.testing.assert_close(k, torch.tensor([0.5, 0.3, 0.15, 0.0]) / 0.95)
    assert processed_logprobs(logits, top_p=0.1).exp()[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    torch.testing.assert_close(processed_logprobs(logits), torch.log_softmax(logits, -1))


def test_engine_logprobs_are_the_truncated_distributions(qwen_dir: Path) -> None:
    policy = load_policy(qwen_dir, device="cpu", temperature=0.7)
    stops = ChatFormat(policy.tokenizer).stops
    prompt = policy.encode("hello world\n")
    engine = HFEngine(policy, stops, top_k=5, top_p=0.9)
    (gen,) = engine.generate([Request(0, prompt, 6, seed=1)])
    ids = torch.tensor([prompt + gen.token_ids])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / 0.7
    want = processed_logprobs(logits, 0.9, 5).gather(-1, torch.tensor(gen.token_ids)[:, None])
    torch.testing.assert_close(torch.tensor(gen.logprobs), want[:, 0], atol=1e-4, rtol=0)
    ranks = (logits > logits.gather(-1, torch.tensor(gen.token_ids)[:, None])).sum(-1)
    assert int(ranks.max()) < 5  # every token among the 5 most likely


def test_a_seeded_episode_samples_the_same_tokens_in_any_batch(qwen_dir: Path) -> None:
    policy = load_policy(qwen_dir, device="cpu")
    engine = HFEngine(policy, ChatFormat(policy.tokenizer).stops)
    a, b = policy.encode("first prompt\n"), policy.encode("a second, longer prompt\n")
    alone = engine.generate([Request("x", b, 12, seed=7)])
    engine.release()
    torch.manual_seed(123)  # the global generator does not matter
    batched = engine.generate([Request("y", a, 12, seed=3), Request("x", b, 12, seed=7)])
    assert batched[1].token_ids == alone[0].token_ids
    assert batched[1].logprobs == pytest.approx(alone[0].logprobs, abs=1e-5)


def test_task_sampler_covers_each_task_once_per_pass() -> None:
    tasks = [f"t{i}" for i in range(5)]
    assert step_tasks(tasks, None, 3, 0) == tasks
    steps = [step_tasks(tasks, 2, s, seed=1) for s in range(1, 6)]  # 10 draws = 2 passes
    flat = [t for s in steps for t in s]
    assert Counter(flat[:5]) == Counter(tasks) and Counter(flat[5:]) == Counter(tasks)
    assert steps == [step_tasks(tasks, 2, s, seed=1) for s in range(1, 6)]  # a pure function
    assert flat != [t for s in range(1, 6) for t in step_tasks(tasks, 2, s, seed=2)]


def test_overlong_episodes_stay_out_of_the_loss_but_in_the_baseline(qwen_dir: Path) -> None:
    policy = tiny_policy(qwen_dir)
    eps = [episode(policy, ["fix 1\n"], r) for r in (1.0, 0.0, 0.0, 1.0)]
    eps[0].turns[-1].finish_reason = "length"
    eps[1].info["context_full"] = True
    for ep in eps:
        ep.masked = ep.overlong
    batch = collate(eps, policy.tokenizer.pad_token_id)
    assert batch.action_mask.sum(-1).tolist()[:2] == [0, 0] and batch.action_mask[2:].sum() > 0
    assert batch.valid.all()  # still in the group statistics
    from repogym.agents.grpo import batch_advantages

    torch.testing.assert_close(
        batch_advantages(batch, "grpo"),
        torch.tensor([1.0, -1.0, -1.0, 1.0]) * 0.8660,
        atol=1e-4,
        rtol=0,
    )


def test_a_step_with_a_history_rewriting_template_completes(qwen_dir: Path, tmp_path: Path) -> None:
    policy = load_policy(qwen_dir, device="cpu")
    policy.tokenizer = _rewriting(AutoTokenizer.from_pretrained(qwen_dir, local_files_only=True))
    config = GRPOConfig(
        tasks=("retry-zero",),
        steps=1,
        out=str(tmp_path),
        device="cpu",
        lr=1e-3,
        top_p=0.9,
        top_k=50,
        rollout=RolloutConfig(group_size=2, max_steps=2, max_new_tokens=6),
    )
    trainer = GRPOTrainer(config, policy=policy)
    assert trainer.correction is not None and trainer.correction.name == "decoupled"
    try:
        (metrics,) = trainer.train(log=False)
    finally:
        trainer.close()
    assert metrics["chat/delta_rendered_frac"] == 1.0
    # Top-p/top-k sampling: the loss is corrected by min(pi_old/mu, C), mu the truncated one.
    assert "loss/policy" in metrics and metrics["is_weight/max"] > 0


def test_cli_tasks_per_step_overlong_mask_and_eval(qwen_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [
        "train",
        "--algo",
        "grpo",
        "--model",
        str(qwen_dir),
        "--steps",
        "2",
        "--out",
        str(out),
        "--task",
        "retry-zero",
        "--task",
        "empty-mean",
        "--tasks-per-step",
        "1",
        "--eval-every",
        "2",
        "--set",
        'eval_tasks=["range-inclusive"]',
        "--set",
        "rollout.overlong_mask=true",
        "--set",
        "rollout.group_size=2",
        "--set",
        "rollout.max_new_tokens=6",
        "--set",
        "rollout.max_steps=1",
    ]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert "eval/resolve_rate" not in rows[0] and rows[1]["eval/episodes"] == 1.0
    assert rows[1]["eval/reward_mean"] == 0.0  # a random model resolves nothing
    for r in rows:  # 6 tokens never finish a turn: every episode is overlong, none in the loss
        assert r["overlong_frac"] == 1.0 and "loss/policy" not in r
        assert math.isfinite(r["reward/mean"])
    tasks = {
        json.loads(p.read_text().splitlines()[0])["task"]
        for p in (out / "rollouts").glob("*.jsonl")
    }
    assert tasks == {"retry-zero", "empty-mean"}
    for step in (1, 2):  # one task a step
        names = {p.name.split("-", 3)[3] for p in (out / "rollouts").glob(f"step-{step:05d}-*")}
        assert len(names) == 1
    assert [
        json.loads(p.read_text().splitlines()[0])["task"] for p in (out / "eval").glob("*.jsonl")
    ] == ["range-inclusive"]
