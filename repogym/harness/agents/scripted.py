"""Reference agents that need no model: oracle, noop, random and replay."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.harness.agents.base import AgentError, tool_call

SUBMIT = tool_call("submit")
GOLD_PATH = "/tmp/repogym-gold.patch"


class NoopAgent:
    """Submits at once: the unchanged repository must earn no reward on a valid task."""

    def reset(self, task_info: dict[str, Any]) -> None:
        """Nothing to prepare."""

    def act(self, observation: str) -> str:
        """Always ``submit``."""
        return SUBMIT


class OracleAgent:
    """Applies the task's gold patch through the env's own tools, then submits.

    The runner hands it the solution.patch out of band (``set_gold_patch``), never through an
    observation. Steps: write the patch to ``/tmp`` in the sandbox, ``git apply`` it, submit.
    An oracle that does not resolve a task points at a broken task, not at the agent.
    """

    wants_gold_patch = True

    def __init__(self) -> None:
        self._gold: str | None = None
        self._plan: list[str] = []

    def set_gold_patch(self, patch: str) -> None:
        """Receive the gold fix for the next ``reset``."""
        self._gold = patch

    def reset(self, task_info: dict[str, Any]) -> None:
        """Plan write → apply → submit for this task's gold patch."""
        if self._gold is None:
            raise AgentError("the oracle got no gold patch. Fix: run it through repogym's runner, "
                             "which calls set_gold_patch() before reset()")
        self._plan = [
            tool_call("write", path=GOLD_PATH, content=self._gold),
            tool_call("bash", command=f"git apply --whitespace=nowarn {GOLD_PATH} && "
                                      "git status --short"),
            SUBMIT,
        ]
        self._gold = None

    def act(self, observation: str) -> str:
        """The next planned action (submit once the plan is used up)."""
        return self._plan.pop(0) if self._plan else SUBMIT


_LISTING = re.compile(r"^  (\S[^\n]*?)/?$", re.MULTILINE)


class RandomAgent:
    """Random tool calls drawn from a seed; submits with probability ``p_submit`` per step.

    The draws depend only on ``seed``, the task id and the sample index, so a run is
    reproducible. Actions: look around (ls, git status, pytest, grep, cat), read a listed
    file, write a scratch file, a doomed edit and, now and then, malformed text.

    Args:
        seed: Base seed.
        p_submit: Chance of submitting at each step.
        max_actions: Submit at the latest after this many actions.
    """

    def __init__(self, seed: int = 0, p_submit: float = 0.2, max_actions: int = 8) -> None:
        if not 0.0 <= p_submit <= 1.0:
            raise AgentError(f"p_submit={p_submit} is not a probability. Fix: use 0..1")
        self.seed, self.p_submit, self.max_actions = seed, p_submit, max_actions
        self._rng = random.Random(seed)
        self._files: list[str] = []
        self._n = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        """Seed the draws from (seed, task id, sample)."""
        self._rng = random.Random(f"{self.seed}:{task_info.get('id')}:{task_info.get('sample')}")
        self._files, self._n = [], 0

    def act(self, observation: str) -> str:
        """A random tool call."""
        if self._n == 0:
            self._files = [f for f in _LISTING.findall(observation) if "." in f]
        self._n += 1
        if self._n > self.max_actions or self._rng.random() < self.p_submit:
            return SUBMIT
        target = self._rng.choice(self._files) if self._files else "README.md"
        choices = [
            tool_call("bash", command="ls -la"),
            tool_call("bash", command="git status --short"),
            tool_call("bash", command="python -m pytest -q -x 2>&1 | tail -5"),
            tool_call("bash", command="grep -rn 'def ' . | head -20"),
            tool_call("bash", command=f"cat {target}"),
            tool_call("read", path=target, start=1, end=self._rng.randint(5, 40)),
            tool_call("write", path=f"scratch_{self._rng.randint(0, 99)}.txt",
                      content=f"note {self._rng.random():.6f}\n"),
            tool_call("edit", path=target, old="<no such text>", new="x"),
            "I am not sure what to do next.",
        ]
        return self._rng.choice(choices)


class ReplayAgent:
    """Replays recorded or scripted actions per task, then submits.

    ``file`` may be:

    - a trajectory JSONL written by TrajectoryLogger (``log_dir=``), or a folder of them: the
      actions of each file's steps, keyed by the header's task;
    - a JSONL of ``{"task": id, "actions": [...]}`` lines;
    - a JSON object ``{task_id: [actions...]}``.

    An action is a raw string or a ``{"tool", "args"}`` object. A task with no actions is
    submitted at once (or raises with ``strict=true``).

    Args:
        file: The script or trajectories (required).
        strict: Raise for tasks the file does not cover.
    """

    def __init__(self, file: str | None = None, strict: bool = False) -> None:
        if not file:
            raise AgentError("replay needs a file. Fix: --agent-arg file=PATH (a trajectory "
                             "JSONL, a folder of them, or a {task: [actions]} JSON/JSONL)")
        self.file, self.strict = Path(file), strict
        self.scripts = load_scripts(self.file)
        self._queue: list[str] = []

    def reset(self, task_info: dict[str, Any]) -> None:
        """Queue the task's actions."""
        task = task_info.get("id")
        if task not in self.scripts and self.strict:
            raise AgentError(f"{self.file} has no actions for task {task!r}. Fix: add them or "
                             "drop strict=true")
        self._queue = list(self.scripts.get(task, []))

    def act(self, observation: str) -> str:
        """The next recorded action, then submit."""
        return self._queue.pop(0) if self._queue else SUBMIT


def _as_action(action: Any, where: str) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, dict):
        return json.dumps(action)
    raise AgentError(f"{where}: an action must be a string or an object, got "
                     f"{type(action).__name__}. Fix: write {tool_call('bash', command='ls')}")


def _from_trajectory(path: Path, records: list[dict]) -> tuple[str, list[str]]:
    task = records[0].get("task")
    steps = sorted((r for r in records if r.get("type") == "step"), key=lambda r: r["t"])
    return task, [_as_action(r["action"], str(path)) for r in steps]


def _read_jsonl(path: Path) -> list[dict]:
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise AgentError(f"{path}:{n}: not JSON ({e}). Fix: one JSON object per "
                                 "line") from e
    return records


def _scripts_from_records(path: Path, records: list[dict]) -> dict[str, list[str]]:
    if records and records[0].get("type") == "header":
        task, actions = _from_trajectory(path, records)
        return {task: actions}
    scripts: dict[str, list[str]] = {}
    for n, rec in enumerate(records, 1):
        if "task" not in rec or not isinstance(rec.get("actions"), list):
            raise AgentError(f"{path}:{n}: expected {{\"task\": id, \"actions\": [...]}}. Fix: "
                             "use that form, or pass a TrajectoryLogger file")
        scripts[rec["task"]] = [_as_action(a, f"{path}:{n}") for a in rec["actions"]]
    return scripts


def load_scripts(path: Path) -> dict[str, list[str]]:
    """Task id -> actions from any of the formats :class:`ReplayAgent` accepts.

    Raises:
        AgentError: missing file or unknown format (the message says which forms work).
    """
    if path.is_dir():
        scripts: dict[str, list[str]] = {}
        for f in sorted(path.glob("*.jsonl")):
            scripts.update(_scripts_from_records(f, _read_jsonl(f)))
        return scripts
    if not path.is_file():
        raise AgentError(f"replay file {path} does not exist. Fix: pass an existing file")
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise AgentError(f"{path}: expected {{task_id: [actions]}}. Fix: use that form")
        return {task: [_as_action(a, str(path)) for a in _list(acts, path)]
                for task, acts in data.items()}
    return _scripts_from_records(path, _read_jsonl(path))


def _list(value: Any, path: Path) -> Iterable[Any]:
    if not isinstance(value, list):
        raise AgentError(f"{path}: each task maps to a list of actions. Fix: use [..]")
    return value
