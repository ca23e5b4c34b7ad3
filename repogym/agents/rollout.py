"""Rollouts: an LM policy acting in real RepoEnv episodes, in groups of samples per task.

An :class:`AgentInterface` sits between the policy's text and the environment: it writes the
policy's first context from the reset observation, turns the policy's action text into one or
more tool-call actions, and shortens observations. :class:`TextInterface` passes actions
through (the policy writes tool calls itself); :mod:`repogym.agents.menu` is the compact
action language of the CPU demo.

:func:`collect` runs ``group_size`` episodes per task with the policy batched across every
episode in flight, in environments from ``gym.make("repogym/<id>-v<version>")`` (the bwrap
sandbox by default). Dynamic sampling (DAPO) resamples groups whose rewards all agree, up to
a limit, and reports ``frac_zero_std_groups``; episodes whose sandbox or grader failed carry
``infra_error`` and are masked out of every loss by :func:`repogym.agents.policy.collate`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import gymnasium as gym

from repogym.agents.policy import Episode, Generation, Turn, context_ids

__all__ = [
    "SUBMIT_ACTION",
    "Actor",
    "AgentInterface",
    "EnvPool",
    "Rollout",
    "RolloutConfig",
    "ScriptedActor",
    "TextInterface",
    "collect",
    "run_episodes",
]

SUBMIT_ACTION = json.dumps({"tool": "submit", "args": {}})

GRADE_CACHE: dict = {}
"""The process-wide grading cache that pools use by default (``cache_grades=True``): one
real grading per (task, version, reward mode, diff) per process."""


class Actor(Protocol):
    """What a rollout needs from a policy (:class:`repogym.agents.policy.Policy` is one)."""

    tokenizer: Any

    @property
    def max_len(self) -> int:
        """Longest context the actor takes."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        ...

    def generate(
        self, contexts: Sequence[Sequence[int]], *, max_new_tokens: int = 32, greedy: bool = False
    ) -> list[Generation]:
        """One continuation per context, with behaviour logprobs."""
        ...


class AgentInterface(Protocol):
    """Translation between the policy's text and the environment's actions/observations."""

    stop: tuple[str, ...]

    def prompt(self, observation: str, info: dict[str, Any]) -> str:
        """The policy's first context, from the reset observation and info."""
        ...

    def actions(self, text: str, task: str) -> list[str]:
        """The environment actions (at least one) for the policy's action text."""
        ...

    def observation(self, observation: str) -> str:
        """The observation as the policy sees it."""
        ...

    def corpus(self) -> list[str]:
        """Strings a freshly built tokenizer should encode compactly."""
        ...


@dataclass
class TextInterface:
    """The policy writes tool calls itself; long texts are clipped (head and tail kept).

    Attributes:
        max_prompt_chars: Clip the reset observation to this many characters.
        max_obs_chars: Clip each observation to this many characters.
        stop: Generation stops after any of these strings (by default at the end of the
            eos token only: tool calls span lines).
    """

    max_prompt_chars: int = 4000
    max_obs_chars: int = 2000
    stop: tuple[str, ...] = ()

    def prompt(self, observation: str, info: dict[str, Any]) -> str:
        return _clip(observation, self.max_prompt_chars).rstrip("\n") + "\n"

    def actions(self, text: str, task: str) -> list[str]:
        return [text]

    def observation(self, observation: str) -> str:
        return _clip(observation, self.max_obs_chars).rstrip("\n") + "\n"

    def corpus(self) -> list[str]:
        return [SUBMIT_ACTION, '{"tool": "bash", "args": {"command": "']


def _clip(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit // 2 - 10, 1)
    return f"{text[:half]}\n[...]\n{text[-half:]}"


@dataclass
class ScriptedActor:
    """An actor that replays scripted action texts (for warm-start data and tests).

    Each call to :meth:`generate` returns, for context ``i``, the encoding of
    ``script(i, context)`` with logprob 0 per token.

    Attributes:
        tokenizer: Tokenizer used to encode the scripted texts.
        script: Maps (index in the batch, context ids) to the action text.
        max_len: Longest context.
    """

    tokenizer: Any
    script: Any
    max_len: int = 1 << 30

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(
        self, contexts: Sequence[Sequence[int]], *, max_new_tokens: int = 32, greedy: bool = False
    ) -> list[Generation]:
        out = []
        for i, ctx in enumerate(contexts):
            text = self.script(i, list(ctx))
            ids = self.encode(text)
            out.append(Generation(ids, [0.0] * len(ids), text))
        return out


@dataclass
class RolloutConfig:
    """How episodes are run and grouped.

    Attributes:
        group_size: Samples per task (G).
        max_steps: Environment step budget (TimeLimit truncation; the final state is
            graded); None keeps each task's ``max_steps``.
        max_new_tokens: Tokens per action.
        greedy: Take the most likely tokens (evaluation) instead of sampling.
        dynamic_sampling: Resample groups whose rewards all agree (DAPO), up to
            ``max_resample`` times; groups still without variance are dropped.
        max_resample: Extra rounds of dynamic sampling.
        sandbox: Sandbox backend of the environments.
        reward_mode: ``binary``, ``partial`` or ``f2p``.
        cache_grades: Reuse a grading result per (task, diff) across episodes (the first
            grading of each diff is real; see ``RepoEnv(grade_cache=...)``).
        workers: Threads stepping environments at once (each step is a sandboxed process).
    """

    group_size: int = 4
    max_steps: int | None = 4
    max_new_tokens: int = 16
    greedy: bool = False
    dynamic_sampling: bool = False
    max_resample: int = 2
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    cache_grades: bool = True
    workers: int = 4


class EnvPool:
    """Environments made with ``gym.make``, one per (task, slot), reused across episodes.

    Args:
        config: Sandbox backend, reward mode, step budget and grade caching.
        grade_cache: Grading cache (default: the process-wide :data:`GRADE_CACHE`).
        env_kwargs: Extra keyword arguments for ``gym.make``.
    """

    def __init__(
        self,
        config: RolloutConfig,
        grade_cache: dict | None = None,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.grade_cache = grade_cache if grade_cache is not None else GRADE_CACHE
        self.env_kwargs = dict(env_kwargs or {})
        self._envs: dict[tuple[str, int], gym.Env] = {}
        self._seeded: set[tuple[str, int]] = set()

    def get(self, task: str, slot: int) -> gym.Env:
        """The environment of ``task`` for the ``slot``-th concurrent episode."""
        key = (task, slot)
        if key not in self._envs:
            self._envs[key] = gym.make(_env_id(task), **self._kwargs())
        return self._envs[key]

    def _kwargs(self) -> dict[str, Any]:
        cfg = self.config
        kwargs: dict[str, Any] = {"sandbox": cfg.sandbox, "reward_mode": cfg.reward_mode}
        if cfg.max_steps is not None:
            kwargs["max_steps"] = cfg.max_steps
        if cfg.cache_grades:
            kwargs["grade_cache"] = self.grade_cache
        return {**kwargs, **self.env_kwargs}

    def reset(self, task: str, slot: int, seed: int) -> tuple[gym.Env, str, dict[str, Any]]:
        """Reset the slot's environment (seeded on its first reset only)."""
        env = self.get(task, slot)
        first = (task, slot) not in self._seeded
        self._seeded.add((task, slot))
        obs, info = env.reset(seed=seed if first else None)
        return env, obs, info

    def close(self) -> None:
        """Close every environment (idempotent)."""
        envs, self._envs = self._envs, {}
        for env in envs.values():
            env.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _env_id(task: str) -> str:
    """The Gymnasium id of a registered task."""
    from repogym.scenarios.registry import registered_tasks

    tasks = registered_tasks()
    if task not in tasks:
        raise ValueError(
            f"unknown task {task!r}; registered tasks: {sorted(tasks)}. Fix: pass one of them, "
            "or register your task folder with repogym.register_task(path)"
        )
    return tasks[task].env_id


@dataclass
class _Live:
    """An episode in flight."""

    episode: Episode
    env: gym.Env
    done: bool = False


def run_episodes(
    actor: Actor,
    interface: AgentInterface,
    pool: EnvPool,
    tasks: Sequence[str],
    config: RolloutConfig,
    *,
    seed: int = 0,
) -> list[Episode]:
    """Run one episode per entry of ``tasks``, all in lockstep with batched generation.

    Each turn, every live episode's context is extended by one sampled action; the
    interface expands it into environment actions, which are stepped until the episode ends.
    If a context would outgrow the model, the episode is submitted as it stands
    (``info["context_full"]``).

    Args:
        actor: The policy (or a scripted actor).
        interface: Text <-> environment translation.
        pool: Environments.
        tasks: Task id of each episode (repeat an id for several samples).
        config: Rollout settings.
        seed: Seed of each environment's first reset.

    Returns:
        The finished episodes, in the order of ``tasks``.
    """
    slots: dict[str, int] = {}
    keys = []
    for task in tasks:
        slots[task] = slots.get(task, -1) + 1
        keys.append((task, slots[task]))
    for key in keys:
        pool.get(*key)  # make environments in this thread (gym.make is not thread-safe)
    with ThreadPoolExecutor(max(1, config.workers)) as threads:
        started = list(threads.map(lambda k: pool.reset(k[0], k[1], seed + k[1]), keys))
        live = [
            _Live(Episode(task=task, prompt=interface.prompt(obs, info)), env)
            for (task, _), (env, obs, info) in zip(keys, started, strict=True)
        ]
        _loop(actor, interface, live, config, threads)
    return [x.episode for x in live]


def _loop(
    actor: Actor,
    interface: AgentInterface,
    live: list[_Live],
    config: RolloutConfig,
    threads: ThreadPoolExecutor,
) -> None:
    """Generate for every live episode, then step the environments in parallel threads."""
    while not all(x.done for x in live):
        active = [x for x in live if not x.done]
        contexts = [context_ids(actor, x.episode.prompt, x.episode.turns) for x in active]
        room = actor.max_len - config.max_new_tokens
        full = [x for x, ctx in zip(active, contexts, strict=True) if len(ctx) > room]
        for x in full:
            x.episode.info["context_full"] = True
        list(threads.map(lambda x: _step_all(x, [SUBMIT_ACTION], interface, None), full))
        todo = [(x, c) for x, c in zip(active, contexts, strict=True) if not x.done]
        if not todo:
            continue
        gens = actor.generate(
            [c for _, c in todo], max_new_tokens=config.max_new_tokens, greedy=config.greedy
        )
        jobs = [
            (x, interface.actions(gen.text, x.episode.task), gen)
            for (x, _), gen in zip(todo, gens, strict=True)
        ]
        list(threads.map(lambda j: _step_all(j[0], j[1], interface, j[2]), jobs))


def _step_all(
    live: _Live, actions: list[str], interface: AgentInterface, gen: Generation | None
) -> None:
    """Step the environment through ``actions`` and record the turn and the outcome."""
    observations = []
    for action in actions or [""]:
        obs, reward, terminated, truncated, info = live.env.step(action)
        observations.append(interface.observation(obs))
        if terminated or truncated:
            _finish(live, float(reward), terminated, truncated, info)
            break
    ep = live.episode
    if gen is not None:
        ep.turns.append(Turn(gen.token_ids, gen.logprobs, "".join(observations)))
    elif ep.turns:
        ep.turns[-1].observation += "".join(observations)


def _finish(live: _Live, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
    """Copy the last step's outcome into the episode."""
    ep = live.episode
    ep.reward, ep.terminated, ep.truncated = reward, terminated, truncated
    ep.infra_error = info.get("infra_error") or None
    ep.resolved = bool(info.get("resolved"))
    ep.info.update(
        hack_flags=list(info.get("hack_flags", [])),
        diff=info.get("diff", ""),
        truncated_by=info.get("truncated") if truncated else None,
    )
    live.done = True


@dataclass
class Rollout:
    """The episodes of one collection round and its statistics.

    Attributes:
        episodes: Episodes that go into the batch, ``group`` set per task group.
        groups_sampled: Groups sampled, resamples included.
        zero_std_groups: Sampled groups whose valid rewards all agreed.
        dropped_groups: Groups left out by dynamic sampling.
        all_episodes: Every episode sampled (for reward and resolve-rate metrics).
    """

    episodes: list[Episode]
    groups_sampled: int = 0
    zero_std_groups: int = 0
    dropped_groups: int = 0
    all_episodes: list[Episode] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """``frac_zero_std_groups``, ``reward/mean``, ``resolve_rate``, ``infra_error_frac``."""
        eps = self.all_episodes or self.episodes
        valid = [e for e in eps if e.valid]
        n_valid = max(len(valid), 1)
        return {
            "frac_zero_std_groups": self.zero_std_groups / max(self.groups_sampled, 1),
            "reward/mean": sum(e.reward for e in valid) / n_valid,
            "resolve_rate": sum(e.resolved for e in valid) / n_valid,
            "infra_error_frac": (len(eps) - len(valid)) / max(len(eps), 1),
        }


def zero_std(group: Sequence[Episode]) -> bool:
    """True when the valid episodes of a group all have one reward (or fewer than two)."""
    rewards = {e.reward for e in group if e.valid}
    return len(rewards) <= 1


def collect(
    actor: Actor,
    interface: AgentInterface,
    pool: EnvPool,
    tasks: Sequence[str],
    config: RolloutConfig,
    *,
    seed: int = 0,
) -> Rollout:
    """Sample ``group_size`` episodes per task, with optional dynamic sampling.

    Args:
        actor: The policy.
        interface: Text <-> environment translation.
        pool: Environments.
        tasks: One group per task id.
        config: Rollout settings (group size, dynamic sampling).
        seed: Seed of the environments' first resets.

    Returns:
        The :class:`Rollout`; with dynamic sampling, groups with no reward variance after
        ``max_resample`` extra rounds are dropped from ``episodes``.
    """
    g = config.group_size
    result = Rollout(episodes=[])
    pending = list(tasks)
    rounds = 1 + (config.max_resample if config.dynamic_sampling else 0)
    kept: dict[int, list[Episode]] = {}
    for round_ in range(rounds):
        flat = [t for t in pending for _ in range(g)]
        episodes = run_episodes(actor, interface, pool, flat, config, seed=seed)
        result.all_episodes += episodes
        retry = []
        for i, task in enumerate(pending):
            group = episodes[i * g : (i + 1) * g]
            result.groups_sampled += 1
            flat_zero = zero_std(group)
            result.zero_std_groups += flat_zero
            last_round = round_ == rounds - 1
            if flat_zero and config.dynamic_sampling:
                if last_round:
                    result.dropped_groups += 1
                else:
                    retry.append(task)
                continue
            kept[len(kept)] = group
        pending = retry
        if not pending:
            break
    for index, group in kept.items():
        for ep in group:
            ep.group = index
            result.episodes.append(ep)
    return result
