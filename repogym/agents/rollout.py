"""Rollouts: an engine acting in real RepoEnv episodes, in groups of samples per task.

An :class:`EpisodeFormat` turns observations into prompt tokens and completions into
environment actions (:class:`repogym.agents.chat.ChatFormat` for real models; the CPU toy has
its menu language). :func:`run_episodes` runs episodes in lockstep: each turn, every live
episode's context (its exact tokens so far) gets one completion from the engine, batched;
the environments (``gym.make("repogym/<id>-v<version>")``, bwrap by default) step in threads
(one turn's mechanics are in :mod:`repogym.agents.turns`).

Context budget: a completion gets at most ``max_new_tokens`` and never more than the room
left in ``max_context``; when less than ``min_turn_tokens`` is left, the episode is submitted
as it stands and the notice is recorded as its last observation (``info["context_full"]``).

:func:`collect` samples ``group_size`` episodes per task; dynamic sampling (DAPO) resamples
groups whose rewards all agree. Episodes whose sandbox or grader failed carry ``infra_error``
and are masked out of every loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import gymnasium as gym

from repogym.agents.engines import Engine
from repogym.agents.episode import Episode
from repogym.agents.sampling import episode_seed
from repogym.agents.turns import SUBMIT_ACTION, DialogueState, LiveEpisode, play_turn
from repogym.scenarios.registry import registered_tasks

__all__ = [
    "GRADE_CACHE",
    "SUBMIT_ACTION",
    "EnvPool",
    "EpisodeFormat",
    "Rollout",
    "RolloutConfig",
    "collect",
    "run_episodes",
]

GRADE_CACHE: dict = {}
"""The process-wide grading cache pools use by default: one real grading per (task,
version, reward mode, diff) per process."""


class EpisodeFormat(Protocol):
    """Observations to tokens, completions to actions (chat format, or the toy's menu)."""

    stops: Any

    def start(self, observation: str, info: dict[str, Any]) -> DialogueState:
        """The dialogue of a new episode (its first prompt pending)."""
        ...


@dataclass
class RolloutConfig:
    """How episodes are run and grouped.

    Attributes:
        group_size: Samples per task (G).
        max_steps: Environment step budget (RepoEnv grades the final state when it is hit);
            None keeps each task's ``max_steps``.
        max_new_tokens: Tokens per completion (a real edit needs hundreds).
        max_context: Token budget of a whole episode (capped by the model's context).
        min_turn_tokens: Below this much room the episode is submitted as it stands.
        greedy: Take the most likely tokens (evaluation) instead of sampling.
        dynamic_sampling: Resample groups whose rewards all agree (DAPO), up to
            ``max_resample`` times; groups still without variance are dropped.
        max_resample: Extra rounds of dynamic sampling.
        sandbox: Sandbox backend of the environments.
        reward_mode: ``binary``, ``partial`` or ``f2p``.
        cache_grades: Reuse a grading result per (task, diff) across episodes.
        workers: Threads stepping environments at once.
        overlong_mask: Keep episodes that ran out of tokens (the context budget, or a last
            completion cut at ``max_new_tokens``) out of the loss (DAPO's overlong
            filtering); they still count in their group's baseline.
    """

    group_size: int = 4
    max_steps: int | None = 8
    max_new_tokens: int = 512
    max_context: int = 8192
    min_turn_tokens: int = 16
    greedy: bool = False
    dynamic_sampling: bool = False
    max_resample: int = 2
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    cache_grades: bool = True
    workers: int = 4
    overlong_mask: bool = False


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
            self._envs[key] = gym.make(env_id(task), **self._kwargs())
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


def env_id(task: str) -> str:
    """The Gymnasium id of a registered task.

    Raises:
        ValueError: For an unknown task (the message lists the registered ones).
    """
    tasks = registered_tasks()
    if task not in tasks:
        raise ValueError(
            f"unknown task {task!r}; registered tasks: {sorted(tasks)}. Fix: pass "
            "one of them, or a folder of tasks with --tasks DIR"
        )
    return tasks[task].env_id


def run_episodes(
    engine: Engine,
    fmt: EpisodeFormat,
    pool: EnvPool,
    tasks: Sequence[str],
    config: RolloutConfig,
    *,
    seed: int = 0,
    max_context: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    stats: dict[str, float] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[Episode]:
    """Run one episode per entry of ``tasks``, in lockstep with batched generation.

    Args:
        engine: Where completions come from.
        fmt: Observations to tokens, completions to actions.
        pool: Environments.
        tasks: Task id of each episode (repeat an id for several samples).
        config: Rollout settings.
        seed: Seed of each environment's first reset.
        max_context: The model's context length (the budget is the smaller of it and
            ``config.max_context``).
        on_episode: Called with each finished episode (progress).
        stats: Accumulates ``gen_s`` (seconds in the engine) and ``gen_tokens``.
        seeds: Each episode's sampling seed (None: the engine's global generator).

    Returns:
        The finished episodes, in the order of ``tasks``.
    """
    budget = min(config.max_context, max_context or config.max_context)
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
            LiveEpisode(Episode(task=task, prompt=obs), env, fmt.start(obs, info))
            for (task, _), (env, obs, info) in zip(keys, started, strict=True)
        ]
        for x, s in zip(live, seeds or [None] * len(live), strict=True):
            x.seed = s
        stats = {} if stats is None else stats
        while not all(x.done for x in live):
            play_turn(
                [x for x in live if not x.done],
                engine,
                budget=budget,
                max_new_tokens=config.max_new_tokens,
                min_turn_tokens=config.min_turn_tokens,
                greedy=config.greedy,
                threads=threads,
                on_episode=on_episode,
                stats=stats,
            )
    return [x.episode for x in live]


@dataclass
class Rollout:
    """The episodes of one collection round and its statistics.

    Attributes:
        episodes: Episodes that go into the batch, ``group`` set per task group.
        groups_sampled: Groups sampled, resamples included.
        zero_std_groups: Sampled groups whose valid rewards all agreed.
        dropped_groups: Groups left out by dynamic sampling.
        all_episodes: Every episode sampled (for reward and resolve-rate metrics).
        group_zero: ``(task, zero variance)`` of every sampled group (per-task metrics).
        stats: ``gen_s`` (seconds in the engine) and ``gen_tokens`` (tokens generated).
    """

    episodes: list[Episode]
    groups_sampled: int = 0
    zero_std_groups: int = 0
    dropped_groups: int = 0
    all_episodes: list[Episode] = field(default_factory=list)
    group_zero: list[tuple[str, bool]] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """``frac_zero_std_groups`` (and ``zero_std/<task>``: each task's share of its groups),
        ``reward/mean``, ``resolve_rate``, ``infra_error_frac``, ..."""
        eps = self.all_episodes or self.episodes
        valid = [e for e in eps if e.valid]
        n_valid = max(len(valid), 1)
        per_task: dict[str, list[bool]] = {}
        for task, zero in self.group_zero:
            per_task.setdefault(task, []).append(zero)
        return {
            **{f"zero_std/{t}": sum(z) / len(z) for t, z in sorted(per_task.items())},
            "frac_zero_std_groups": self.zero_std_groups / max(self.groups_sampled, 1),
            "reward/mean": sum(e.reward for e in valid) / n_valid,
            "resolve_rate": sum(e.resolved for e in valid) / n_valid,
            "infra_error_frac": (len(eps) - len(valid)) / max(len(eps), 1),
            "context_full_frac": sum(bool(e.info.get("context_full")) for e in eps)
            / max(len(eps), 1),
            "overlong_frac": sum(e.overlong for e in eps) / max(len(eps), 1),
            "chat/delta_rendered_frac": sum(bool(e.info.get("delta_rendered")) for e in eps)
            / max(len(eps), 1),
            "throughput/gen_tokens_per_s": self.stats.get("gen_tokens", 0)
            / max(self.stats.get("gen_s", 0.0), 1e-9),
        }

    def counts(self) -> dict[str, float]:
        """How many items each mean of :meth:`metrics` is over (valid episodes, episodes,
        groups): the weights of a data-parallel reduction."""
        eps = self.all_episodes or self.episodes
        valid = float(sum(e.valid for e in eps))
        per_episode = (
            "infra_error_frac",
            "context_full_frac",
            "overlong_frac",
            "chat/delta_rendered_frac",
        )
        return {
            "frac_zero_std_groups": float(self.groups_sampled),
            "reward/mean": valid,
            "resolve_rate": valid,
            **{k: float(len(eps)) for k in per_episode},
        }


def zero_std(group: Sequence[Episode]) -> bool:
    """True when the valid episodes of a group all have one reward (or fewer than two)."""
    return len({e.reward for e in group if e.valid}) <= 1


def collect(
    engine: Engine,
    fmt: EpisodeFormat,
    pool: EnvPool,
    tasks: Sequence[str],
    config: RolloutConfig,
    *,
    seed: int = 0,
    max_context: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    group_ids: Sequence[int] | None = None,
) -> Rollout:
    """Sample ``group_size`` episodes per task, with optional dynamic sampling.

    Args:
        engine: Where completions come from.
        fmt: The episode format.
        pool: Environments.
        tasks: One group per entry.
        config: Rollout settings.
        seed: The collection's seed (environments and each episode's sampling stream).
        max_context: The model's context length.
        on_episode: Called with each finished episode.
        group_ids: Each group's index in the whole step (default ``0..``): with them an
            episode samples the same tokens whichever process runs its group.

    Returns:
        The :class:`Rollout`; with dynamic sampling, groups with no reward variance after
        ``max_resample`` extra rounds are dropped from ``episodes``.
    """
    g = config.group_size
    result = Rollout(episodes=[])
    pending = list(zip(group_ids or range(len(tasks)), tasks, strict=True))
    rounds = 1 + (config.max_resample if config.dynamic_sampling else 0)
    kept: list[list[Episode]] = []
    for round_ in range(rounds):
        flat = [t for _, t in pending for _ in range(g)]
        seeds = [episode_seed(seed, round_, gid, j) for gid, _ in pending for j in range(g)]
        episodes = run_episodes(
            engine,
            fmt,
            pool,
            flat,
            config,
            seed=seed + 7 * round_,
            max_context=max_context,
            on_episode=on_episode,
            stats=result.stats,
            seeds=seeds,
        )
        if config.overlong_mask:
            for ep in episodes:
                ep.masked = ep.overlong
        result.all_episodes += episodes
        retry = []
        for i, item in enumerate(pending):
            group = episodes[i * g : (i + 1) * g]
            result.groups_sampled += 1
            flat_zero = zero_std(group)
            result.zero_std_groups += flat_zero
            result.group_zero.append((item[1], flat_zero))
            if flat_zero and config.dynamic_sampling:
                if round_ == rounds - 1:
                    result.dropped_groups += 1
                else:
                    retry.append(item)
                continue
            kept.append(group)
        pending = retry
        if not pending:
            break
    for index, group in enumerate(kept):
        for ep in group:
            ep.group = index
            result.episodes.append(ep)
    return result
