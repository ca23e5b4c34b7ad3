"""verl: repogym tasks as a multi-turn agent loop (needs ``repogym[verl]``).

Importing this module registers ``"repogym_agent"`` in verl's agent-loop registry
(``verl.experimental.agent_loop.register``), so a verl dataset row with
``agent_name: repogym_agent`` and ``extra_info: {"task": "<id>"}`` (see :func:`verl_rows`)
is played by :class:`RepoGymAgentLoop`:

* the prompt (the row's ``raw_prompt`` with the env's first observation appended to the
  last user message) is tokenised through verl's own Continuous Token builder
  (``AgentLoopBase.ct_build_initial_tokens``);
* each turn the policy server (``server_manager.generate``) emits token ids; they are
  decoded and given to ``RepoEnv.step`` as one tool call, and get ``response_mask`` 1;
* the env's observation is rendered as a chat-template user turn and appended with
  ``response_mask`` 0 (and log-prob 0.0), as verl's ``ToolAgentLoop`` does for tool output;
  the rendering is the reference trainers' (:class:`repogym.agents.chat.Dialogue`): the whole
  conversation when it extends the tokens so far, else (a template that rewrites earlier
  turns: Qwen3, gpt-oss) delta rendering; verl's ``data.apply_chat_template_kwargs`` apply;
* the env's blocking calls run in a thread pool, so concurrent loops step at the same time;
* the episode's reward (hidden tests; ``reward_mode`` as configured) is returned as
  ``reward_score``, which verl places on the last response token; an ``infra_error``
  episode is masked instead (``response_mask`` all 0, ``extra_fields["infra_error"]``).

Config (``actor_rollout_ref.rollout.multi_turn`` / the agent-loop yaml, see
``examples/verl/``): ``repogym.remote`` (a ``repogym serve`` URL), ``repogym.sandbox``,
``repogym.reward_mode``, ``repogym.max_steps``, ``repogym.env_threads`` (the pool's size,
default 64) — read from ``trainer_config.repogym``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from repogym.agents.chat import ChatFormat, Dialogue
from repogym.envs import make_suite_env

AGENT_NAME = "repogym_agent"


def verl_rows(split: str | None = None) -> list[dict[str, Any]]:
    """verl RLHFDataset rows (one per task): ``prompt``, ``agent_name``, ``data_source``,
    ``reward_model``, ``extra_info``."""
    from repogym.integrations.trl import task_rows

    return [
        {
            "prompt": r["prompt"],
            "agent_name": AGENT_NAME,
            "data_source": "repogym",
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"task": r["task"], "split": r["split"]},
        }
        for r in task_rows(split)
    ]


def _settings(config: Any) -> dict[str, Any]:
    section = config.get("repogym") if hasattr(config, "get") else None
    return dict(section or {})


#: Threads that run the envs' blocking calls (reset, step, close) off verl's event loop.
_ENV_THREADS: ThreadPoolExecutor | None = None


def _env_threads(size: int) -> ThreadPoolExecutor:
    """The process's pool for env calls (made by the first loop, with its ``size``)."""
    global _ENV_THREADS
    if _ENV_THREADS is None:
        _ENV_THREADS = ThreadPoolExecutor(max_workers=size, thread_name_prefix="repogym-env")
    return _ENV_THREADS


@register(AGENT_NAME)
class RepoGymAgentLoop(AgentLoopBase):
    """One repogym episode per ``run`` call, driven by verl's policy server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = _settings(self.config)
        self.response_length = int(self.rollout_config.response_length)
        multi_turn = self.rollout_config.get("multi_turn", {}) or {}
        self.max_turns = int(
            self.settings.get("max_steps") or multi_turn.get("max_assistant_turns") or 30
        )
        self.env_threads = _env_threads(int(self.settings.get("env_threads", 64)))
        # the reference trainers' rendering of observation turns (repogym.agents.chat)
        self.chat = ChatFormat(
            self.tokenizer,
            tools=None,
            max_obs_chars=sys.maxsize,
            observation_role="user",
            chat_template_kwargs=dict(self.apply_chat_template_kwargs or {}),
        )

    def _make_env(self) -> Any:
        remote = self.settings.get("remote")
        local = {} if remote else {"sandbox": self.settings.get("sandbox", "bwrap")}
        return make_suite_env(
            remote=remote,
            reward_mode=self.settings.get("reward_mode", "binary"),
            max_steps=self.max_turns,
            **local,
        )

    async def _in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call (the env's, the chat rendering) in the env threads, so other
        loops go on meanwhile."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.env_threads, partial(fn, *args, **kwargs))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        task = extra.get("task") or kwargs.get("task")
        if not task:
            raise ValueError(
                "the row names no task. Fix: put extra_info = {'task': '<id>'} in "
                "the dataset row (see repogym.integrations.verl.verl_rows)"
            )
        env = await self._in_thread(self._make_env)
        try:
            obs, _ = await self._in_thread(
                env.reset, seed=extra.get("seed"), options={"task": task}
            )
            messages = _first_messages(kwargs["raw_prompt"], obs)
            prompt_ids = await self.ct_build_initial_tokens(messages)
            dialogue = Dialogue(self.chat, messages, prompt_ids=prompt_ids)
            response_ids: list[int] = []
            mask: list[int] = []
            logprobs: list[float] = []
            reward, turns, info = 0.0, 0, {}
            done = False
            while not done and turns < self.max_turns and len(response_ids) < self.response_length:
                out = await self.server_manager.generate(
                    request_id=uuid4().hex,
                    prompt_ids=prompt_ids + response_ids,
                    sampling_params=sampling_params,
                )
                ids = list(out.token_ids)
                response_ids += ids
                mask += [1] * len(ids)
                logprobs += list(out.log_probs) if out.log_probs else [0.0] * len(ids)
                turns += 1
                dialogue.add_completion(ids)
                action = self.tokenizer.decode(ids, skip_special_tokens=True)
                obs, reward, terminated, truncated, info = await self._in_thread(env.step, action)
                done = bool(terminated or truncated)
                if not done:  # rendering re-tokenises the conversation: off the loop too
                    await self._in_thread(dialogue.observe, obs)
                    response_ids += dialogue.pending
                    mask += [0] * len(dialogue.pending)
                    logprobs += [0.0] * len(dialogue.pending)
            if not done:  # response budget spent: grade what is there, as at a step budget
                obs, reward, _, _, info = await self._in_thread(
                    env.step, json.dumps({"tool": "submit", "args": {}})
                )
        finally:
            await self._in_thread(env.close)
        return self._output(
            prompt_ids,
            response_ids,
            mask,
            logprobs,
            float(reward),
            turns,
            info,
            task=task,
            delta_rendered=dialogue.delta_rendered,
        )

    def _output(
        self,
        prompt_ids: list[int],
        response_ids: list[int],
        mask: list[int],
        logprobs: list[float],
        reward: float,
        turns: int,
        info: dict[str, Any],
        *,
        task: str,
        delta_rendered: bool,
    ) -> AgentLoopOutput:
        """verl's output of one episode. An ``infra_error`` episode is masked the way verl
        masks a sample: its ``response_mask`` is all 0, so none of its tokens enters a loss."""
        n = self.response_length
        infra = bool(info.get("infra_error"))
        if infra:
            mask = [0] * len(mask)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:n],
            response_mask=mask[:n],
            response_logprobs=logprobs[:n],
            reward_score=0.0 if infra else reward,
            num_turns=2 * turns + 1,
            metrics=AgentLoopMetrics(),
            extra_fields={
                "task": task,
                "resolved": bool(info.get("resolved")),
                "infra_error": infra,
                "delta_rendered": delta_rendered,
            },
        )


def _first_messages(raw_prompt: list[dict[str, Any]], obs: str) -> list[dict[str, Any]]:
    """The row's prompt with the env's first observation appended to its last user turn."""
    messages = [dict(m) for m in raw_prompt]
    if messages and messages[-1].get("role") == "user":
        messages[-1]["content"] = f"{messages[-1]['content']}\n\n{obs}"
    else:
        messages.append({"role": "user", "content": obs})
    return messages
