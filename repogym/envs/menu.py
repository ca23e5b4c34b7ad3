"""A fixed menu of candidate patches over RepoEnv/SuiteEnv, for Stable-Baselines3 and friends.

Install with the ``sb3`` extra (``pip install repogym[sb3]``) to train SB3 on it; the
wrapper itself needs only Gymnasium and NumPy.

Each menu episode is one step: pick a candidate (the task's gold patch, an alternative, a
decoy, or noop); the wrapper plays one real episode of the wrapped env with it (write the
patch into the sandbox with the ``write`` tool, ``git apply`` it with ``bash``, ``submit``)
and returns that episode's graded reward. Grading is deterministic, so rewards are cached
per (task, choice): after the first visit a choice costs microseconds, not a sandbox
episode (~0.2-0.5 s), which lets PPO run thousands of steps quickly. Infrastructure errors
are never cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import zlib
from collections.abc import MutableMapping
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from repogym.scenarios.task import Task

ChoiceKind = Literal["gold", "alternative", "decoy", "noop"]
PATCH_PATH = "/tmp/repogym-menu.patch"
_WORD = re.compile(r"[a-z_][a-z0-9_]*|[0-9]+|[^\sa-z0-9_]")


@dataclasses.dataclass(frozen=True)
class Choice:
    """One menu entry.

    Attributes:
        kind: gold, alternative, decoy or noop.
        name: Unique within the task (``gold``, ``alternative/<file>``, ``decoy/<file>``,
            ``noop``); the reward cache key.
        patch: The unified diff to apply ("" for noop).
    """

    kind: ChoiceKind
    name: str
    patch: str = ""


def candidates(task: Task) -> list[Choice]:
    """The task's gold, alternatives and decoys as patches, plus noop (unshuffled)."""
    out = [Choice("gold", "gold", task.solution_patch.read_text())]
    out += [Choice("alternative", f"alternative/{p.name}", p.read_text())
            for p in task.alternatives]
    out += [Choice("decoy", f"decoy/{p.name}", p.read_text()) for p in task.decoys]
    return out + [Choice("noop", "noop")]


def build_menu(task: Task, n_slots: int, menu_seed: int) -> list[Choice]:
    """``n_slots`` choices (padded with noop) in an order drawn from (menu_seed, task id)."""
    items = candidates(task)
    if len(items) > n_slots:
        raise ValueError(f"task {task.id!r} has {len(items)} candidates but the menu has "
                         f"{n_slots} slots. Fix: pass n_slots >= {len(items)}")
    items += [Choice("noop", "noop")] * (n_slots - len(items))
    digest = int.from_bytes(hashlib.sha256(task.id.encode()).digest()[:8], "little")
    order = np.random.default_rng([menu_seed, digest]).permutation(n_slots)
    return [items[i] for i in order]


def hashed_bow(text: str, dim: int) -> np.ndarray:
    """A hashed bag of words: log(1 + count) per bucket (crc32, stable across runs), L2 = 1."""
    vec = np.zeros(dim, dtype=np.float32)
    for token in _WORD.findall(text.lower()):
        vec[zlib.crc32(token.encode()) % dim] += 1.0
    vec = np.log1p(vec)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm else vec


def _changed_lines(patch: str) -> str:
    return "\n".join(line[1:] for line in patch.splitlines()
                     if line[:1] in "+-" and not line.startswith(("+++", "---")))


def _call(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "args": args})


class MenuEnv(gym.Env[np.ndarray, np.int64]):
    """Pick one of a task's candidate patches; reward from a real, graded episode.

    ## Description
    On ``reset`` a task is drawn from the wrapped env's tasks (``self.np_random``; or
    ``options={"task": id}``). Its menu is the gold patch, the alternatives, the decoys and
    noop, padded with noop to ``n_slots`` and shuffled per task from ``menu_seed`` (so "always
    pick slot 0" cannot win). ``step(i)`` plays choice ``i`` as one episode of the wrapped
    env through its tools and ends the menu episode.

    ## Action Space
    ``Discrete(n_slots)``; ``n_slots`` defaults to the largest candidate count + 1 (noop).

    ## Observation Space
    ``Box(0, 1, (statement_dim + n_slots * slot_dim,), float32)``: a hashed bag of words of
    the statement, then one of each slot's changed lines (zeros for noop).

    ## Rewards
    The wrapped env's graded reward for the chosen patch (binary by default). Cached per
    (task, choice) in ``reward_cache`` (pass the same dict to several MenuEnvs to share it).

    ## Episode End
    Always terminated after one step. ``info``: task, choice, kind, reward, resolved,
    cached, infra_error (set when the sandbox or grader failed: such a step scores 0, is
    not cached, and should be masked by trainers that can).

    ## Arguments
    ``env`` (a RepoEnv or SuiteEnv, possibly wrapped, e.g. by ``gym.make`` or
    ``TrajectoryLogger``), ``n_slots``, ``menu_seed``, ``statement_dim``, ``slot_dim``,
    ``reward_cache``.

    ## Version History
    * v0: initial release.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, env: gym.Env, *, n_slots: int | None = None, menu_seed: int = 0,
                 statement_dim: int = 256, slot_dim: int = 32,
                 reward_cache: MutableMapping[tuple[str, str], tuple[float, bool]] | None = None,
                 ) -> None:
        inner = env.unwrapped
        if not hasattr(inner, "task"):
            raise TypeError(f"MenuEnv wraps a RepoEnv or SuiteEnv, got {type(inner).__name__}. "
                            "Fix: pass gym.make('repogym/<id>-v0') or repogym/Suite-v0")
        self.env = env
        self.tasks: list[Task] = list(getattr(inner, "tasks", [inner.task]))
        self.n_slots = n_slots or max(len(candidates(t)) for t in self.tasks)
        self.menu_seed = menu_seed
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
        slots = [hashed_bow(_changed_lines(c.patch), self.slot_dim) for c in self.menus[task.id]]
        return np.concatenate([hashed_bow(task.statement, self.statement_dim), *slots])

    def observation(self, task_id: str) -> np.ndarray:
        """The observation for ``task_id`` (a copy)."""
        return self._features[task_id].copy()

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
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
            raise gym.error.ResetNeeded("step() before reset() or after the episode ended. "
                                        "Fix: call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in Discrete({self.n_slots}). Fix: pass "
                             f"an int in [0, {self.n_slots})")
        task, self._task = self._task, None
        choice = self.menus[task.id][int(action)]
        reward, resolved, cached, infra = self.evaluate(task, choice)
        info = {"task": task.id, "choice": choice.name, "kind": choice.kind, "reward": reward,
                "resolved": resolved, "cached": cached, "infra_error": infra}
        return self.observation(task.id), reward, True, False, info

    def evaluate(self, task: Task, choice: Choice) -> tuple[float, bool, bool, str | None]:
        """(reward, resolved, cached, infra_error) of ``choice``, from the cache or an episode."""
        key = (task.id, choice.name)
        if key in self.reward_cache:
            reward, resolved = self.reward_cache[key]
            return reward, resolved, True, None
        reward, resolved, infra = self.play(task, choice)
        if infra is None:
            self.reward_cache[key] = (reward, resolved)
        return reward, resolved, False, infra

    def play(self, task: Task, choice: Choice) -> tuple[float, bool, str | None]:
        """Play ``choice`` as one real episode of the wrapped env; (reward, resolved, infra)."""
        self.episodes_run += 1
        self.env.reset(options={"task": task.id})
        actions = [_call("submit")]
        if choice.patch:
            actions = [_call("write", path=PATCH_PATH, content=choice.patch),
                       _call("bash", command=f"git apply --whitespace=nowarn {PATCH_PATH}"),
                       *actions]
        for action in actions:
            _, reward, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                break
        else:  # pragma: no cover - submit always ends the episode
            raise RuntimeError("the wrapped env did not end the episode on submit")
        return float(reward), bool(info.get("resolved", False)), info.get("infra_error")

    def close(self) -> None:
        self.env.close()


__all__ = ["Choice", "MenuEnv", "build_menu", "candidates", "hashed_bow"]
