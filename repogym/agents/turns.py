"""One turn of episodes run in lockstep: a batch of completions, then the environments' steps.

:func:`repogym.agents.rollout.run_episodes` keeps a :class:`LiveEpisode` per episode in
flight and calls :func:`play_turn` until every one is done. Each turn, every live episode's
context (its exact tokens so far) gets one completion from the engine, batched; each
completion becomes a :class:`repogym.agents.episode.Turn` and its actions step the episode's
environment (in threads). When less than ``min_turn_tokens`` of the context budget is left,
the episode is submitted as it stands and the notice is recorded as its last observation
(``info["context_full"]``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import gymnasium as gym

from repogym.agents.engines import Engine, Generation, Request
from repogym.agents.episode import Episode, Turn
from repogym.envs.info import StepInfo

__all__ = ["SUBMIT_ACTION", "DialogueState", "LiveEpisode", "play_turn"]

SUBMIT_ACTION = json.dumps({"tool": "submit", "args": {}})


class DialogueState(Protocol):
    """One episode's token state in a format (see :class:`repogym.agents.chat.Dialogue`)."""

    pending: list[int]
    pending_mask: list[int]

    def add_completion(self, completion_ids: list[int]) -> list[str]:
        """Record a completion; returns the environment actions it stands for."""
        ...

    def observe(self, observation: str, *, final: bool = False) -> None:
        """Append an observation; ``pending`` becomes its tokens."""
        ...


@dataclass
class LiveEpisode:
    """An episode in flight."""

    episode: Episode
    env: gym.Env
    dialogue: DialogueState
    done: bool = False
    seed: int | None = None


def play_turn(
    active: list[LiveEpisode],
    engine: Engine,
    *,
    budget: int,
    max_new_tokens: int,
    min_turn_tokens: int,
    greedy: bool,
    threads: ThreadPoolExecutor,
    on_episode: Callable[[Episode], None] | None,
    stats: dict[str, float],
) -> None:
    """One completion for every active episode, then its environment steps.

    Args:
        active: The episodes not done yet.
        engine: Where completions come from.
        budget: Token budget of a whole episode.
        max_new_tokens: Tokens per completion (at most the room left in ``budget``).
        min_turn_tokens: Below this much room the episode is submitted as it stands.
        greedy: Take the most likely tokens instead of sampling.
        threads: Steps the environments.
        on_episode: Called with each episode this turn finishes.
        stats: Accumulates ``gen_s`` (seconds in the engine) and ``gen_tokens``.
    """
    contexts = [x.episode.context_ids() + x.dialogue.pending for x in active]
    rooms = [budget - len(c) for c in contexts]
    full = [x for x, room in zip(active, rooms, strict=True) if room < min_turn_tokens]
    list(threads.map(lambda x: _context_full(x, budget), full))
    todo = [(i, x) for i, x in enumerate(active) if not x.done]
    requests = [Request(id(x), contexts[i], min(max_new_tokens, rooms[i]), x.seed) for i, x in todo]
    start = time.monotonic()
    gens = engine.generate(requests, greedy=greedy) if requests else []
    stats["gen_s"] = stats.get("gen_s", 0.0) + time.monotonic() - start
    stats["gen_tokens"] = stats.get("gen_tokens", 0) + sum(len(g.token_ids) for g in gens)
    jobs = [(x, gen) for (_, x), gen in zip(todo, gens, strict=True)]
    list(threads.map(lambda job: _act(*job, budget), jobs))
    for x in active:
        if x.done and on_episode is not None:
            on_episode(x.episode)


def _act(live: LiveEpisode, gen: Generation, budget: int) -> None:
    """Record the completion as a turn and step the environment through its actions."""
    dlg, ep = live.dialogue, live.episode
    turn = Turn(
        dlg.pending, gen.token_ids, gen.logprobs, dlg.pending_mask, finish_reason=gen.finish_reason
    )
    actions = dlg.add_completion(gen.token_ids)
    ep.turns.append(turn)
    turn.action = "\n".join(actions)
    observations = []
    for action in actions or [""]:
        obs, reward, terminated, truncated, info = live.env.step(action)
        observations.append(obs)
        if terminated or truncated:
            _finish(live, float(reward), terminated, truncated, info)
            break
    turn.observation = "".join(observations)
    dlg.observe(turn.observation, final=live.done)
    if getattr(dlg, "delta_rendered", False):
        ep.info["delta_rendered"] = True
    if live.done:
        room = max(budget - len(ep.context_ids()), 0)
        ep.final_ids, ep.final_obs_mask = dlg.pending[:room], dlg.pending_mask[:room]


def _context_full(live: LiveEpisode, budget: int) -> None:
    """Submit the episode as it stands: its context budget is spent."""
    ep = live.episode
    used = len(ep.context_ids()) + len(live.dialogue.pending)
    notice = (
        f"[context budget reached: {used} of {budget} tokens; the episode was submitted "
        "as it stands]\n"
    )
    obs, reward, terminated, truncated, info = live.env.step(SUBMIT_ACTION)
    _finish(live, float(reward), terminated, truncated, info)
    ep.info.update(context_full=True, context_notice=notice + obs)
    room = max(budget - len(ep.context_ids()), 0)
    ep.final_ids = live.dialogue.pending[:room]
    ep.final_obs_mask = live.dialogue.pending_mask[:room]
    if ep.turns:
        ep.turns[-1].observation += notice


def _finish(
    live: LiveEpisode, reward: float, terminated: bool, truncated: bool, info: StepInfo
) -> None:
    """Copy the last step's outcome into the episode."""
    ep = live.episode
    ep.reward, ep.terminated, ep.truncated = reward, terminated, truncated
    ep.infra_error = info.get("infra_error") or None
    ep.graded = terminated or info.get("truncated_reason") == "max_steps"
    ep.resolved = bool(info.get("resolved"))
    reason = info.get("truncated_reason") or None
    ep.info.update(
        hack_flags=list(info.get("hack_flags", [])),
        diff=info.get("diff", ""),
        tests=info.get("tests"),
        truncated_by=reason if truncated else None,
    )
    live.done = True
