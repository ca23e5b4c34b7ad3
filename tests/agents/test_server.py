"""The OpenAI-compatible server engine against a local stand-in server: token ids and
behaviour logprobs by prompt ids, weights synced after each update, ``--rollout-server``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from repogym.agents.chat import ChatFormat
from repogym.agents.engines import Request, ServerEngine
from repogym.agents.episode import Episode, Turn, collate
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import load_policy
from repogym.harness.cli import main
from tests.agents._episodes import group_batch_episodes
from tests.agents._server import StandInServer


@pytest.fixture
def server(qwen_dir: Path):
    s = StandInServer(qwen_dir)
    yield s
    s.close()


def _scored(policy, fmt, prompt_ids, gen):
    ep = Episode(task="t", turns=[Turn(prompt_ids, gen.token_ids, gen.logprobs)])
    batch = collate([ep], policy.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = policy.score(batch.input_ids, batch.attention_mask, batch.action_mask).logp
    return logp[batch.action_mask.bool()], batch.old_logp[batch.action_mask.bool()]


def test_server_engine_returns_exact_tokens_and_behaviour_logprobs(server, qwen_dir) -> None:
    learner = load_policy(qwen_dir, device="cpu")
    fmt = ChatFormat(learner.tokenizer)
    engine = ServerEngine(server.url, fmt.stops, sync_dir="unused")
    assert engine.model == "stand-in"
    prompt = fmt.start("Fix the bug").pending
    torch.manual_seed(0)
    gens = engine.generate([Request(i, prompt, 12) for i in range(3)])
    for g in gens:
        assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
        new, old = _scored(learner, fmt, prompt, g)
        torch.testing.assert_close(new, old, atol=1e-4, rtol=0)


def test_weights_are_synced_to_the_server_after_an_update(server, qwen_dir, tmp_path) -> None:
    learner = load_policy(qwen_dir, device="cpu")
    fmt = ChatFormat(learner.tokenizer)
    engine = ServerEngine(server.url, fmt.stops, sync_dir=tmp_path / "weights")
    trainer = GRPOTrainer(GRPOConfig(lr=1e-2, device="cpu", epochs=1), policy=learner,
                          engine=engine)  # fmt: skip
    trainer.update(collate(group_batch_episodes(learner), learner.tokenizer.pad_token_id))
    prompt = fmt.start("Fix the bug").pending
    (before,) = engine.generate([Request(0, prompt, 8)])
    new, old = _scored(learner, fmt, prompt, before)
    assert (new - old).abs().max() > 1e-3  # the server still has the old weights
    engine.sync_weights(learner, 1)
    assert server.updates == [str((tmp_path / "weights" / "step-1").resolve())]
    (after,) = engine.generate([Request(0, prompt, 8)])
    new, old = _scored(learner, fmt, prompt, after)
    torch.testing.assert_close(new, old, atol=1e-4, rtol=0)


def test_train_with_rollout_server(server, qwen_dir, tmp_path) -> None:
    argv = ["train", "--algo", "grpo", "--model", str(qwen_dir), "--steps", "1", "--out",
            str(tmp_path), "--task", "retry-zero", "--rollout-server", server.url,
            "--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=8",
            "--set", "rollout.max_steps=1"]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and len(list((tmp_path / "rollouts").glob("*.jsonl"))) == 2


def test_a_dead_server_is_explained(qwen_dir) -> None:
    with pytest.raises(RuntimeError, match="Fix: start the server"):
        ServerEngine("http://127.0.0.1:9", ChatFormat(load_policy(qwen_dir).tokenizer).stops)
