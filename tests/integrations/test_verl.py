"""The verl agent-loop adapter with the installed verl package (its AgentLoopBase, registry,
AgentLoopOutput and Continuous Token builder); the policy server is scripted."""

from __future__ import annotations

import asyncio
import re
import shlex
import time
from pathlib import Path

import gymnasium as gym
import pytest
import torch
import trl

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
from tests.integrations._sandbox import BreakSandbox


class ScriptedServer:
    """verl's server_manager.generate, replaying fixed actions as token ids."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.prompts = tokenizer, list(actions), []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.actions.pop(0), add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def _loop(tokenizer, server, response_length=4096, data_config=None):
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": response_length,
                    "multi_turn": {"max_assistant_turns": 10},
                }
            },
            "repogym": {"sandbox": "bwrap", "max_steps": 10},
        }
    )
    return RepoGymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(OmegaConf.create(data_config or {})),
    )


def _play(actions, response_length=4096):
    tokenizer = build_tokenizer()
    server = ScriptedServer(tokenizer, actions)
    row = next(r for r in verl_rows("train") if r["extra_info"]["task"] == "retry-zero")

    async def main():  # verl builds agent loops inside its worker's event loop
        loop = _loop(tokenizer, server, response_length)
        return await loop.run(
            {"temperature": 1.0}, raw_prompt=row["prompt"], extra_info=row["extra_info"]
        )

    return tokenizer, server, asyncio.run(main())


def test_registered_in_verls_agent_loop_registry():
    assert _agent_loop_registry[AGENT_NAME] == {
        "_target_": "repogym.integrations.verl.RepoGymAgentLoop"
    }


def test_oracle_episode_reward_and_masks():
    actions = apply_patch_actions(registered_tasks()["retry-zero"].solution_patch.read_text()) + [
        call("submit")
    ]
    tokenizer, server, out = _play(actions)
    assert isinstance(out, AgentLoopOutput)
    assert out.reward_score == 1.0 and out.extra_fields["resolved"] is True
    assert out.num_turns == 2 * len(actions) + 1
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    # masked-in tokens are exactly the policy's actions, in order; the rest is env output
    policy = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m == 1]
    expect = [t for a in actions for t in tokenizer.encode(a, add_special_tokens=False)]
    assert policy == expect
    env_text = tokenizer.decode(
        [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m == 0]
    )
    assert env_text and "<|im_start|>user" in env_text and "<|im_start|>assistant" in env_text
    masked_logprobs = list(zip(out.response_logprobs, out.response_mask, strict=True))
    assert all(lp == -0.5 for lp, m in masked_logprobs if m)
    assert all(lp == 0.0 for lp, m in masked_logprobs if not m)
    # each turn's server prompt is the prompt plus everything so far (multi-turn context)
    assert "# Task: retry-zero" in tokenizer.decode(out.prompt_ids)
    assert all(p[: len(out.prompt_ids)] == out.prompt_ids for p in server.prompts)
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


# -- chat templates that rewrite earlier turns (TRL's copies of the real templates) ----------
TEMPLATES = Path(trl.__file__).parent / "chat_templates"
GPT_OSS_TOKENS = [
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|return|>",
    "<|call|>",
    "<|constrain|>",
]
#: template file, apply_chat_template_kwargs, how the model writes one action, its end of turn
CASES = {
    "qwen3": ("qwen3", {}, "<think>\nI look first.\n</think>\n\n{}<|im_end|>", "<|im_end|>"),
    "qwen3-no-thinking": ("qwen3", {"enable_thinking": False}, "{}<|im_end|>", "<|im_end|>"),
    "qwen3.5-think": ("qwen3_5_think", {}, "I look first.\n</think>\n\n{}<|im_end|>", "<|im_end|>"),
    "gpt-oss": (
        "gptoss",
        {},
        (
            "<|channel|>analysis<|message|>I look first.<|end|><|start|>"
            "assistant<|channel|>final<|message|>{}<|return|>"
        ),
        "<|return|>",
    ),
}


class Recorder(gym.Wrapper):
    """Records the first observation, then each step's observation and wall-clock interval
    (steps may run in threads)."""

    def __init__(self, env, log):
        super().__init__(env)
        self.log = log

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.log.append((id(self), 0.0, 0.0, obs))
        return obs, info

    def step(self, action):
        start = time.monotonic()
        out = self.env.step(action)
        self.log.append((id(self), start, time.monotonic(), out[0]))
        return out


def _wrapped_loop(tokenizer, server, wrap, data_config=None):
    loop = _loop(tokenizer, server, data_config=data_config)
    make = loop._make_env
    loop._make_env = lambda: wrap(make())
    return loop


def _row():
    return next(r for r in verl_rows("train") if r["extra_info"]["task"] == "retry-zero")


def _template_tokenizer(name):
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens(
        {"additional_special_tokens": GPT_OSS_TOKENS}, replace_extra_special_tokens=False
    )
    tokenizer.chat_template = (TEMPLATES / f"{name}.jinja").read_text()
    return tokenizer


def _delta(tokenizer, kwargs, obs, completion, eot):
    """The delta rendering contract: what the template writes after an assistant turn for
    the observation as a user turn and the next generation prompt, from a minimal
    conversation; its end of turn left out when the completion already ends with it."""
    probe = "ASSISTANT-PROBE"
    text = tokenizer.apply_chat_template(
        [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": probe},
            {"role": "user", "content": obs},
        ],
        tokenize=False,
        add_generation_prompt=True,
        **kwargs,
    )
    after = text[text.index(probe) + len(probe) :]
    if completion.endswith(eot) and after.startswith(eot):
        after = after[len(eot) :]
    return after


@pytest.mark.parametrize("case", sorted(CASES))
def test_templates_that_rewrite_history_record_exact_delta_rendered_tokens(case):
    name, kwargs, write, eot = CASES[case]
    tokenizer = _template_tokenizer(name)
    actions = [call("bash", command="ls"), call("read", path="retry.py"), call("submit")]
    completions = [write.format(a) for a in actions]
    server = ScriptedServer(tokenizer, completions)
    log = []
    row = _row()

    async def main():
        loop = _wrapped_loop(
            tokenizer,
            server,
            lambda env: Recorder(env, log),
            {"apply_chat_template_kwargs": kwargs},
        )
        return await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])

    out = asyncio.run(main())
    observations = [obs for *_, obs in log]
    assert len(observations) == 4 and "Hidden tests passed" in observations[-1]
    # the prompt is the template's rendering (verl's builder, with the kwargs)
    first = [dict(m) for m in row["prompt"]]
    first[-1]["content"] += f"\n\n{log[0][3]}"
    assert out.prompt_ids == tokenizer.encode(
        tokenizer.apply_chat_template(first, tokenize=False, add_generation_prompt=True, **kwargs),
        add_special_tokens=False,
    )
    observations = observations[1:]
    expect_ids, expect_mask = [], []
    for i, completion in enumerate(completions):
        ids = tokenizer.encode(completion, add_special_tokens=False)
        expect_ids += ids
        expect_mask += [1] * len(ids)
        if i < len(completions) - 1:
            delta = tokenizer.encode(
                _delta(tokenizer, kwargs, observations[i], completion, eot),
                add_special_tokens=False,
            )
            expect_ids += delta
            expect_mask += [0] * len(delta)
    assert out.response_ids == expect_ids
    assert out.response_mask == expect_mask
    assert out.extra_fields["delta_rendered"] is True
    assert out.num_turns == 7 and out.reward_score == 0.0


def test_concurrent_loops_step_their_envs_at_the_same_time():
    """Env calls run in threads: four loops under asyncio.gather have env steps in flight at
    the same time (with env calls on the event loop, no two steps could overlap)."""
    tokenizer = build_tokenizer()
    log = []
    row = _row()

    async def one():
        server = ScriptedServer(tokenizer, [call("bash", command="sleep 1"), call("submit")])
        loop = _wrapped_loop(tokenizer, server, lambda env: Recorder(env, log))
        return await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])

    async def main():
        return await asyncio.gather(*(one() for _ in range(4)))

    outs = asyncio.run(main())
    assert [o.reward_score for o in outs] == [0.0] * 4
    steps = [(who, a, b) for who, a, b, _ in log if b > 0]
    assert len(steps) == 8 and len({who for who, *_ in steps}) == 4
    overlapping = {
        frozenset((w1, w2))
        for w1, a1, b1 in steps
        for w2, a2, b2 in steps
        if w1 != w2 and a1 < b2 and a2 < b1
    }
    assert overlapping, steps


def test_infra_error_episode_is_masked_not_scored():
    """A sandbox failure masks the sample the way verl masks one: response_mask all 0, so
    verl's loss aggregation gives it no weight whatever its tokens' losses are."""
    from verl.trainer.ppo.core_algos import agg_loss

    tokenizer = build_tokenizer()
    row = _row()

    async def play(wrap):
        server = ScriptedServer(tokenizer, [call("bash", command="ls"), call("submit")])
        loop = _wrapped_loop(tokenizer, server, wrap)
        return await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])

    broken = asyncio.run(play(BreakSandbox))
    fine = asyncio.run(play(lambda env: env))
    assert broken.extra_fields["infra_error"] is True and fine.extra_fields["infra_error"] is False
    assert broken.response_ids and set(broken.response_mask) == {0}
    assert 1 in fine.response_mask and broken.reward_score == 0.0
    # verl's own token-mean aggregation over a batch of both: the broken sample has no weight
    batch = [o.as_dict() for o in (fine, broken)]
    width = max(len(b["response_mask"]) for b in batch)
    masks = torch.zeros(2, width)
    for i, b in enumerate(batch):
        masks[i, : len(b["response_mask"])] = b["response_mask"]
    losses = torch.rand(2, width)
    poisoned = losses.clone()
    poisoned[1] = 1e6
    assert torch.equal(
        agg_loss(losses, masks, "token-mean"), agg_loss(poisoned, masks, "token-mean")
    )


def _example_overrides():
    """The Hydra overrides examples/verl/run_grpo.sh passes to verl.trainer.main_ppo (shell
    defaults such as ``${MODEL:-...}`` take their default; ``"$@"`` adds nothing)."""
    script = (Path(__file__).parents[2] / "examples" / "verl" / "run_grpo.sh").read_text()
    command = script[script.index("python -m verl.trainer.main_ppo") :].replace("\\\n", " ")
    words = shlex.split(command, comments=True)[3:]
    return [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", w) for w in words if w != "$@"]


def test_run_grpo_example_composes_with_verls_config_and_fits_the_shipped_rows():
    """The example's overrides on verl's own ppo_trainer config pass verl's validate_config
    (as main_ppo calls it), and its train batch leaves verl's drop_last train dataloader
    non-empty on the rows make_dataset.py writes."""
    import verl
    from hydra import compose, initialize_config_dir
    from torch.utils.data import DataLoader
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose("ppo_trainer", overrides=_example_overrides())
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    rows = verl_rows("train")
    batch = config.data.train_batch_size
    assert len(DataLoader(range(len(rows)), batch_size=batch, drop_last=True)) >= 1, (
        f"data.train_batch_size={batch} > {len(rows)} train rows: verl's 'Train dataloader is "
        "empty!'"
    )
    assert config.actor_rollout_ref.rollout.agent.agent_loop_config_path.endswith(
        "repogym_agent_loop.yaml"
    )
    assert (
        config.repogym.max_steps == config.actor_rollout_ref.rollout.multi_turn.max_assistant_turns
    )
