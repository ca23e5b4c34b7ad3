"""Monte-Carlo values from any history: fork the environment, roll out K continuations.

The lecture's value function, estimated directly: "if 3 of 10 rollouts succeed, the
estimated value is about 0.3". From a state at a turn boundary (an environment, the
dialogue's token state and the episode so far), :func:`mc_value` forks the environment
``K`` times (``env.unwrapped.fork()``: independent environments in the same state), copies
the dialogue, and plays the ``K`` continuations to their end with the given engine, in
lockstep (batched generation, environment steps in threads), like any rollout. It returns
the mean reward, the success count and its Wilson interval
(:func:`repogym.agents.losses.wilson_interval`).

:func:`mc_turn_values` gives a recorded episode a value at every turn (VinePPO's advantage,
``repogym train --algo ppo --set advantage=mc``): it re-enters the episode's states by
replaying its recorded completions on a fresh environment (the completions' tokens, not
re-sampled) and calls :func:`mc_value` at each turn boundary. The replay assumes the
environment answers the same actions with the same observations (RepoEnv's tools do);
``replay_mismatches`` counts the turns where it did not.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from repogym.agents.engines import Engine, Generation, Request
from repogym.agents.episode import Episode
from repogym.agents.losses import wilson_interval
from repogym.agents.rollout import EnvPool, EpisodeFormat, RolloutConfig
from repogym.agents.sampling import episode_seed
from repogym.agents.turns import DialogueState, LiveEpisode, play_turn

__all__ = ["MCConfig", "MCValue", "TurnValues", "fork_env", "mc_turn_values", "mc_value"]

REPLAY_SLOT = 1_000_000
"""The environment pool slot :func:`mc_turn_values` replays episodes in (apart from the
rollouts' own slots)."""


@dataclass
class MCConfig:
    """How Monte-Carlo values are estimated.

    Attributes:
        rollouts: Continuations per state (K).
        seed: Seeds each continuation's sampling stream.
        z: The Wilson interval's normal quantile (1.96: 95%).
        workers: Threads stepping the forked environments.
    """

    rollouts: int = 8
    seed: int = 0
    z: float = 1.96
    workers: int = 8


@dataclass
class MCValue:
    """A Monte-Carlo value estimate.

    Attributes:
        value: The mean reward of the continuations.
        successes: Continuations that resolved the task.
        n: Continuations that count (infrastructure errors are left out).
        low: The Wilson interval's lower end for the success fraction.
        high: Its upper end.
        rewards: Each counted continuation's reward.
    """

    value: float
    successes: int
    n: int
    low: float
    high: float
    rewards: list[float] = field(default_factory=list)


@dataclass
class TurnValues:
    """:func:`mc_turn_values`'s answer for one episode.

    Attributes:
        turns: The value of the state before each turn's completion.
        final: The value after the last turn when the episode was cut without grading
            (None when its end was graded: the outcome is final).
        rollouts: Continuations sampled.
        replay_mismatches: Replayed turns whose observation differed from the recorded one.
    """

    turns: list[MCValue]
    final: MCValue | None = None
    rollouts: int = 0
    replay_mismatches: int = 0


def fork_env(env: gym.Env) -> gym.Env:
    """An independent environment in the same state (``env.unwrapped.fork()``).

    Raises:
        TypeError: If the environment cannot fork.
    """
    fork = getattr(env.unwrapped, "fork", None)
    if not callable(fork):
        raise TypeError(
            f"{type(env.unwrapped).__name__} cannot fork; Monte-Carlo values need "
            "an environment with fork() (RepoEnv). Fix: use a RepoEnv task"
        )
    return fork()


def clone_dialogue(dialogue: DialogueState) -> DialogueState:
    """A copy of a dialogue's token state whose lists grow independently of the original's."""
    out = copy.copy(dialogue)
    for key, value in vars(dialogue).items():
        if isinstance(value, list | dict | set):
            setattr(out, key, copy.copy(value))
    return out


def mc_value(
    engine: Engine,
    env: gym.Env,
    dialogue: DialogueState,
    episode: Episode,
    config: RolloutConfig,
    mc: MCConfig,
    *,
    max_context: int | None = None,
    key: int = 0,
    fork: Callable[[gym.Env], gym.Env] = fork_env,
) -> MCValue:
    """The value of a state: ``mc.rollouts`` continuations from it, played to their end.

    Args:
        engine: The policy that continues (its completions are sampled).
        env: The environment at a turn boundary (it is forked, never stepped).
        dialogue: The dialogue's token state there (copied; ``pending`` is the next prompt).
        episode: The episode so far (copied).
        config: Token budgets and step settings of the rollout.
        mc: Continuations, seed, interval.
        max_context: The model's context length.
        key: Tells apart the states of one call's seeds (e.g. turn and episode).
        fork: Makes an independent copy of ``env`` (default :func:`fork_env`).

    Returns:
        The :class:`MCValue` over the continuations that had no infrastructure error.
    """
    budget = min(config.max_context, max_context or config.max_context)
    live = []
    try:
        for j in range(mc.rollouts):
            live.append(
                LiveEpisode(
                    copy.deepcopy(episode),
                    fork(env),
                    clone_dialogue(dialogue),
                    seed=episode_seed(mc.seed, 0, key, j),
                )
            )
        with ThreadPoolExecutor(max(1, min(mc.workers, mc.rollouts))) as threads:
            while not all(x.done for x in live):
                play_turn(
                    [x for x in live if not x.done],
                    engine,
                    budget=budget,
                    max_new_tokens=config.max_new_tokens,
                    min_turn_tokens=config.min_turn_tokens,
                    greedy=config.greedy,
                    threads=threads,
                    on_episode=None,
                    stats={},
                )
    finally:
        for x in live:
            x.env.close()
    done = [x.episode for x in live if x.episode.valid]
    return summarise([e.reward for e in done], [e.resolved for e in done], mc.z)


def summarise(rewards: Sequence[float], resolved: Sequence[bool], z: float = 1.96) -> MCValue:
    """An :class:`MCValue` of continuations' rewards and outcomes (value 0 when none)."""
    n = len(rewards)
    wins = sum(bool(r) for r in resolved)
    low, high = wilson_interval(wins, n, z) if n else (0.0, 1.0)
    return MCValue(sum(rewards) / n if n else 0.0, wins, n, low, high, list(rewards))


@dataclass
class _Replay:
    """An engine that answers with an episode's recorded completions, turn by turn."""

    episode: Episode
    turn: int = 0

    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        recorded = self.episode.turns[self.turn]
        self.turn += 1
        return [
            Generation(
                list(recorded.completion_ids), list(recorded.logprobs), recorded.finish_reason
            )
        ]

    def sync_weights(self, policy: Any, step: int) -> None:
        return None

    def release(self) -> None:
        return None


def mc_turn_values(
    engine: Engine,
    fmt: EpisodeFormat,
    pool: EnvPool,
    episode: Episode,
    config: RolloutConfig,
    mc: MCConfig,
    *,
    max_context: int | None = None,
    index: int = 0,
    seed: int = 0,
) -> TurnValues:
    """Monte-Carlo values of a recorded episode's states, one per turn (see the module).

    Args:
        engine: The policy that continues from each state.
        fmt: The episode format the episode was recorded in.
        pool: Environments (the replay uses slot :data:`REPLAY_SLOT` of the episode's task).
        episode: The recorded episode.
        config: Rollout settings (token budgets).
        mc: Continuations per state, seed, interval.
        max_context: The model's context length.
        index: The episode's index in its batch (seeds its continuations).
        seed: Seed of the replay environment's first reset.
    """
    budget = min(config.max_context, max_context or config.max_context)
    out = TurnValues([])
    if not episode.turns:
        return out
    env, obs, info = pool.reset(episode.task, REPLAY_SLOT, seed)
    live = LiveEpisode(Episode(task=episode.task, prompt=obs), env, fmt.start(obs, info))
    replay = _Replay(episode)
    with ThreadPoolExecutor(1) as threads:
        for k, recorded in enumerate(episode.turns):
            if live.done:
                break
            out.turns.append(
                mc_value(
                    engine,
                    env,
                    live.dialogue,
                    live.episode,
                    config,
                    mc,
                    max_context=max_context,
                    key=index * 4096 + k,
                )
            )
            play_turn(
                [live],
                replay,
                budget=budget,
                max_new_tokens=config.max_new_tokens,
                min_turn_tokens=config.min_turn_tokens,
                greedy=True,
                threads=threads,
                on_episode=None,
                stats={},
            )
            got = live.episode.turns[-1] if len(live.episode.turns) > k else None
            out.replay_mismatches += got is None or got.observation != recorded.observation
        if episode.bootstrap and not live.done:
            out.final = mc_value(
                engine,
                env,
                live.dialogue,
                live.episode,
                config,
                mc,
                max_context=max_context,
                key=index * 4096 + 4095,
            )
    out.rollouts = sum(v.n for v in out.turns) + (out.final.n if out.final else 0)
    return out
