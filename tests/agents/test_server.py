"""The OpenAI-compatible server engine against a stand-in that samples as vLLM does (logits
over the temperature, then top-k/top-p) and returns processed or raw logprobs: exact tokens,
a raw-logprob server caught at T != 1, weight sync through SGLang's and vLLM's own APIs (or
a restart), one weight folder kept, LoRA merged without a copy, and ``--rollout-server``
with the off-policy correction."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch

from repogym.agents.chat import ChatFormat
from repogym.agents.engines import Request, processed_logprobs
from repogym.agents.episode import collate
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import load_policy
from repogym.agents.rollout import RolloutConfig
from repogym.agents.server_engine import ServerEngine, ServerLogprobError, export_weights
from repogym.cli import main
from tests.agents._episodes import group_batch_episodes
from tests.agents._server import StandInServer


@pytest.fixture
def server(qwen_dir: Path):
    s = StandInServer(qwen_dir)
    yield s
    s.close()


def _logits(policy, prompt: list[int], completion: list[int]) -> torch.Tensor:
    with torch.no_grad():
        out = policy.model(input_ids=torch.tensor([prompt + completion])).logits
    return out[0, len(prompt) - 1 : -1].float()


def test_exact_tokens_and_the_sampled_distributions_logprobs(server, qwen_dir) -> None:
    learner = load_policy(qwen_dir, device="cpu")
    fmt = ChatFormat(learner.tokenizer)
    engine = ServerEngine(server.url, fmt.stops, temperature=0.7, top_k=20, weight_sync="none")
    assert (engine.model, engine.payload(Request(0, [1], 4, seed=5), False)["top_k"]) == (
        "stand-in",
        20,
    )
    prompt = fmt.start("Fix the bug").pending
    for g in engine.generate([Request(i, prompt, 12, seed=i) for i in range(3)]):
        assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
        want = processed_logprobs(_logits(learner, prompt, g.token_ids) / 0.7, top_k=20)
        picked = want.gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(g.logprobs), picked, atol=1e-4, rtol=0)


def _server_trainer(url: str, out: Path, model: Path, temperature: float) -> GRPOTrainer:
    config = GRPOConfig(
        tasks=("retry-zero",),
        steps=1,
        out=str(out),
        device="cpu",
        model=str(model),
        rollout_server=url,
        temperature=temperature,
        rollout=RolloutConfig(group_size=2, max_steps=1, max_new_tokens=8),
    )
    return GRPOTrainer(config)


def test_a_raw_logprob_server_is_caught_at_a_temperature(qwen_dir, tmp_path) -> None:
    raw = StandInServer(qwen_dir, logprobs_mode="raw_logprobs")
    try:
        trainer = _server_trainer(raw.url, tmp_path, qwen_dir, temperature=0.7)
        with pytest.raises(ServerLogprobError, match="--logprobs-mode processed_logprobs"):
            trainer.train(log=False)
        trainer.close()
        trainer = _server_trainer(raw.url, tmp_path, qwen_dir, temperature=1.0)
        (metrics,) = trainer.train(log=False)  # at T = 1 raw and processed agree
        trainer.close()
        assert metrics["server/logp_abs_diff"] < 1e-3
    finally:
        raw.close()


def test_sglang_sync_loads_the_weights_and_keeps_one_folder(server, qwen_dir, tmp_path) -> None:
    learner = load_policy(qwen_dir, device="cpu")
    fmt = ChatFormat(learner.tokenizer)
    engine = ServerEngine(server.url, fmt.stops, sync_dir=tmp_path / "weights")
    assert engine.weight_sync == "sglang"  # from the server's owned_by
    trainer = GRPOTrainer(
        GRPOConfig(lr=1e-2, device="cpu", epochs=1), policy=learner, engine=engine
    )
    prompt = fmt.start("Fix the bug").pending
    for step in (1, 2):
        trainer.update(collate(group_batch_episodes(learner), learner.tokenizer.pad_token_id))
        (gen,) = engine.generate([Request(0, prompt, 8, seed=1)])
        stale = torch.log_softmax(_logits(learner, prompt, gen.token_ids), -1)
        assert (
            stale.gather(-1, torch.tensor(gen.token_ids)[:, None])[:, 0]
            - torch.tensor(gen.logprobs)
        ).abs().max() > 1e-3  # the server is behind
        engine.sync_weights(learner, step)
    assert server.updates == [str((tmp_path / "weights" / f"step-{s}").resolve()) for s in (1, 2)]
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["step-2"]
    (gen,) = engine.generate([Request(0, prompt, 8, seed=1)])
    fresh = torch.log_softmax(_logits(learner, prompt, gen.token_ids), -1)
    torch.testing.assert_close(
        fresh.gather(-1, torch.tensor(gen.token_ids)[:, None])[:, 0],
        torch.tensor(gen.logprobs),
        atol=1e-4,
        rtol=0,
    )


def test_vllm_sync_overwrites_the_served_folder_and_reloads(qwen_dir, tmp_path) -> None:
    served = Path(shutil.copytree(qwen_dir, tmp_path / "served"))
    vllm = StandInServer(served, kind="vllm")
    try:
        learner = load_policy(qwen_dir, device="cpu")
        stops = ChatFormat(learner.tokenizer).stops
        with pytest.raises(ValueError, match="needs served_dir"):
            ServerEngine(vllm.url, stops)
        engine = ServerEngine(vllm.url, stops, served_dir=served, sync_dir=tmp_path / "w")
        with torch.no_grad():
            for p in learner.model.parameters():
                p.add_(0.01)
        engine.sync_weights(learner, 1)
        assert vllm.calls[-2:] == ["/collective_rpc", "/reset_prefix_cache"]
        got, want = vllm.policy.model.state_dict(), learner.model.state_dict()
        assert all(torch.equal(got[k], want[k]) for k in want)
        assert not (tmp_path / "w").exists()  # nothing written beside the served folder
    finally:
        vllm.close()


def test_restart_sync_runs_the_command_and_waits_for_the_server(server, qwen_dir, tmp_path) -> None:
    learner = load_policy(qwen_dir, device="cpu")
    marker = tmp_path / "restarted"
    engine = ServerEngine(
        server.url,
        ChatFormat(learner.tokenizer).stops,
        weight_sync="restart",
        restart_command=f"echo {{path}} > {marker}",
        sync_dir=tmp_path / "w",
    )
    engine.sync_weights(learner, 3)
    assert marker.read_text().strip() == str((tmp_path / "w" / "step-3").resolve())


def test_lora_weights_are_merged_without_copying_the_model(qwen_dir) -> None:
    pytest.importorskip("peft")
    policy = load_policy(
        qwen_dir,
        device="cpu",
        lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    )
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    want = copy.deepcopy(policy.model).merge_and_unload().state_dict()
    got = export_weights(policy)
    assert sorted(got) == sorted(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=1e-5)


def test_train_with_a_rollout_server_corrects_off_policy(server, qwen_dir, tmp_path) -> None:
    argv = [
        "train",
        "--algo",
        "grpo",
        "--model",
        str(qwen_dir),
        "--steps",
        "2",
        "--out",
        str(tmp_path),
        "--task",
        "retry-zero",
        "--rollout-server",
        server.url,
        "--set",
        "temperature=0.7",
        "--set",
        "rollout.group_size=2",
        "--set",
        "rollout.max_new_tokens=8",
        "--set",
        "rollout.max_steps=1",
    ]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["server/logp_abs_diff"] < 1e-3  # processed logprobs, checked on step 1
    assert all("is_weight/mean" in r for r in rows)  # the decoupled correction to mu
    assert len(list((tmp_path / "rollouts").glob("*.jsonl"))) == 4
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["step-2"]


def test_a_dead_server_is_explained(qwen_dir) -> None:
    with pytest.raises(RuntimeError, match="Fix: start the server"):
        ServerEngine("http://127.0.0.1:9", ChatFormat(load_policy(qwen_dir).tokenizer).stops)
