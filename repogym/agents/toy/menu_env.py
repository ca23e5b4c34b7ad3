"""The CPU toy's menu as a Gymnasium env for Stable-Baselines3 and friends.

Each menu episode is one step: pick one of a task's menu entries
(:func:`repogym.agents.toy.menu.menu_entries`: gold, alternatives, decoys, no change); the
env plays one real episode of the wrapped RepoEnv/SuiteEnv with the entry's ``write`` calls,
submits, and returns that episode's graded reward. Grading is deterministic, so rewards are
cached per (task, entry): after the first visit a choice costs microseconds, which lets PPO run
thousands of steps quickly. Infrastructure errors are never cached.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import MutableMapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from repogym.agents.toy.menu import NOOP_ACTION, MenuEntry, menu_entries
from repogym.scenarios import Task

__all__ = ["MenuEnv", "build_menu", "hashed_bow"]

_WORD = re.compile(r"[a-z_][a-z0-9_]*|[0-9]+|[^\sa-z0-9_]")
_NOOP = MenuEntry("no change", None, (NOOP_ACTION,))


def build_menu(task: Task, n_slots: int, menu_seed: int) -> list[MenuEntry]:
    """The task's shuffled menu padded with "no change" to ``n_slots`` entries."""
    items = list(menu_entries(task, menu_seed))
    if len(items) > n_slots:
        raise ValueError(
            f"task {task.id!r} has {len(items)} menu entries but the menu has "
            f"{n_slots} slots. Fix: pass n_slots >= {len(items)}"
        )
    return items + [_NOOP] * (n_slots - len(items))


def hashed_bow(text: str, dim: int) -> np.ndarray:
    """A hashed bag of words: log(1 + count) per bucket (crc32, stable across runs), L2 = 1."""
    vec = np.zeros(dim, dtype=np.float32)
    for token in _WORD.findall(text.lower()):
        vec[zlib.crc32(token.encode()) % dim] += 1.0
    vec = np.log1p(vec)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm else vec


def _changed_lines(entry: MenuEntry) -> str:
    if entry.candidate is None:
        return ""
    return "\n".join(
        line[1:]
        for line in entry.candidate.read().splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


class MenuEnv(gym.Env[np.ndarray, np.int64]):
    """Pick one of a task's menu entries; reward from a real, graded episode (the CPU toy).

    ## Description
    On ``reset`` a task is drawn from the wrapped env's tasks (``self.np_random``; or
    ``options={"task": id}``). ``step(i)`` plays entry ``i`` as one episode of the wrapped env
    through its tools and ends the menu episode.

    ## Action Space
    ``Discrete(n_slots)``; ``n_slots`` defaults to the largest menu.

    ## Observation Space
    ``Box(0, 1, (statement_dim + n_slots * slot_dim,), float32)``: a hashed bag of words of
    the statement, then one of each slot's changed lines (zeros for "no change").

    ## Rewards
    The wrapped env's graded reward for the chosen entry, cached per (task, entry).

    ## Episode End
    Always terminated after one step. ``info``: task, choice, kind, reward, resolved, cached,
    infra_error (a sandbox/grader failure: scores 0, not cached; mask it where you can).

    ## Arguments
    ``env`` (a RepoEnv or SuiteEnv, possibly wrapped), ``n_slots``, ``menu_seed``,
    ``statement_dim``, ``slot_dim``, ``reward_cache``.

    ## Version History
    * v0: initial release.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        env: gym.Env,
        *,
        n_slots: int | None = None,
        menu_seed: int = 0,
        statement_dim: int = 256,
        slot_dim: int = 32,
        reward_cache: MutableMapping[tuple[str, str], tuple[float, bool]] | None = None,
    ) -> None:
        inner = env.unwrapped
        if not hasattr(inner, "task"):
            raise TypeError(
                f"MenuEnv wraps a RepoEnv or SuiteEnv, got {type(inner).__name__}. "
                "Fix: pass gym.make('repogym/<id>-v0') or repogym/Suite-v0"
            )
        self.env = env
        self.tasks: list[Task] = list(getattr(inner, "tasks", [inner.task]))
        self.n_slots = n_slots or max(len(menu_entries(t, menu_seed)) for t in self.tasks)
        self.menus = {t.id: build_menu(t, self.n_slots, menu_seed) for t in self.tasks}
        self.statement_dim, self.slot_dim = statement_dim, slot_dim
        self.reward_cache = reward_cache if reward_cache is not None else {}
        self.action_space = spaces.Discrete(self.n_slots)
        dim = statement_dim + self.n_slots * slot_dim
        self.observation_space = spaces.Box(0.0, 1.0, (dim,), np.float32)
        self._features = {t.id: self._featurize(t) for t in self.tasks}
        self._task: Task | None = None
        self.episodes_run = 0

    def _featurize(self, task: Task) -> np.ndarray:
        slots = [hashed_bow(_changed_lines(e), self.slot_dim) for e in self.menus[task.id]]
        return np.concatenate([hashed_bow(task.statement, self.statement_dim), *slots])

    def observation(self, task_id: str) -> np.ndarray:
        """The observation for ``task_id`` (a copy)."""
        return self._features[task_id].copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        by_id = {t.id: t for t in self.tasks}
        task_id = (options or {}).get("task")
        if task_id is None:
            self._task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        elif task_id in by_id:
            self._task = by_id[task_id]
        else:
            raise ValueError(f"unknown task {task_id!r}. Fix: pick from {sorted(by_id)}")
        return self.observation(self._task.id), {"task": self._task.id}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise gym.error.ResetNeeded(
                "step() before reset() or after the episode ended. Fix: call reset()"
            )
        if not self.action_space.contains(action):
            raise ValueError(
                f"action {action!r} is not in Discrete({self.n_slots}). Fix: pass "
                f"an int in [0, {self.n_slots})"
            )
        task, self._task = self._task, None
        entry = self.menus[task.id][int(action)]
        reward, resolved, cached, infra = self.evaluate(task, entry)
        info = {
            "task": task.id,
            "choice": entry.name,
            "kind": entry.kind,
            "reward": reward,
            "resolved": resolved,
            "cached": cached,
            "infra_error": infra,
        }
        return self.observation(task.id), reward, True, False, info

    def evaluate(self, task: Task, entry: MenuEntry) -> tuple[float, bool, bool, str | None]:
        """(reward, resolved, cached, infra_error) of ``entry``, from the cache or an episode."""
        key = (task.id, entry.name)
        if key in self.reward_cache:
            reward, resolved = self.reward_cache[key]
            return reward, resolved, True, None
        reward, resolved, infra = self.play(task, entry)
        if infra is None:
            self.reward_cache[key] = (reward, resolved)
        return reward, resolved, False, infra

    def play(self, task: Task, entry: MenuEntry) -> tuple[float, bool, str | None]:
        """Play ``entry`` as one real episode of the wrapped env; (reward, resolved, infra)."""
        self.episodes_run += 1
        self.env.reset(options={"task": task.id})
        submit = json.dumps({"tool": "submit", "args": {}})
        for action in (*entry.actions, submit):
            _, reward, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                return (
                    float(reward),
                    bool(info.get("resolved", False)),
                    info.get("infra_error") or None,
                )
        raise RuntimeError("the wrapped env did not end the episode on submit")

    def close(self) -> None:
        self.env.close()
