"""The verl agent-loop adapter with the installed verl package (its AgentLoopBase, registry,
AgentLoopOutput and Continuous Token builder); the policy server is scripted."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop")

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    DictConfigWrap,
    _agent_loop_registry,
)
from verl.workers.rollout.replica import TokenOutput

from repogym.agents.toy.tiny import build_tokenizer
from repogym.integrations.verl import AGENT_NAME, RepoGymAgentLoop, verl_rows
from repogym.scenarios.registry import registered_tasks
from tests.conftest import apply_patch_actions, call


class ScriptedServer:
    """verl's server_manager.generate, replaying fixed actions as token ids."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.prompts = tokenizer, list(actions), []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.actions.pop(0), add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def _loop(tokenizer, server, response_length=4096):
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096,
                                          "response_length": response_length,
                                          "multi_turn": {"max_assistant_turns": 10}}},
        "repogym": {"sandbox": "bwrap", "max_steps": 10}})
    return RepoGymAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server,
                            tokenizer=tokenizer, processor=None, dataset_cls=None,
                            data_config=DictConfigWrap(OmegaConf.create({})))


def _play(actions, response_length=4096):
    tokenizer = build_tokenizer()
    server = ScriptedServer(tokenizer, actions)
    row = next(r for r in verl_rows("train") if r["extra_info"]["task"] == "retry-zero")

    async def main():  # verl builds agent loops inside its worker's event loop
        loop = _loop(tokenizer, server, response_length)
        return await loop.run({"temperature": 1.0}, raw_prompt=row["prompt"],
                              extra_info=row["extra_info"])

    return tokenizer, server, asyncio.run(main())


def test_registered_in_verls_agent_loop_registry():
    assert _agent_loop_registry[AGENT_NAME] == {
        "_target_": "repogym.integrations.verl.RepoGymAgentLoop"}


def test_oracle_episode_reward_and_masks():
    actions = apply_patch_actions(registered_tasks()["retry-zero"].solution_patch.read_text()) \
        + [call("submit")]
    tokenizer, server, out = _play(actions)
    assert isinstance(out, AgentLoopOutput)
    assert out.reward_score == 1.0 and out.extra_fields["resolved"] is True
    assert out.num_turns == 2 * len(actions) + 1
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    # masked-in tokens are exactly the policy's actions, in order; the rest is env output
    policy = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    expect = [t for a in actions for t in tokenizer.encode(a, add_special_tokens=False)]
    assert policy == expect
    env_text = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask)
                                 if m == 0])
    assert env_text and "<|im_start|>user" in env_text and "<|im_start|>assistant" in env_text
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, out.response_mask) if m)
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, out.response_mask) if not m)
    # each turn's server prompt is the prompt plus everything so far (multi-turn context)
    assert "# Task: retry-zero" in tokenizer.decode(out.prompt_ids)
    assert all(p[:len(out.prompt_ids)] == out.prompt_ids for p in server.prompts)
    # verl's own post-processing: the reward sits on the last response token (rm_scores),
    # and the tensors it trains on carry the same mask and the rollout log-probs
    batch = out.as_dict()
    assert batch["rm_scores"][-1].item() == 1.0 and batch["rm_scores"][:-1].abs().sum() == 0
    assert batch["response_mask"].tolist() == out.response_mask
    assert batch["rollout_log_probs"].shape == batch["responses"].shape


def test_noop_episode_scores_zero():
    _, _, out = _play([call("submit")])
    assert out.reward_score == 0.0 and out.response_mask and set(out.response_mask) == {1}


def test_row_without_task_names_the_fix():
    tokenizer = build_tokenizer()

    async def main():
        loop = _loop(tokenizer, ScriptedServer(tokenizer, []))
        await loop.run({}, raw_prompt=[{"role": "user", "content": "hi"}])

    with pytest.raises(ValueError, match="extra_info"):
        asyncio.run(main())
