"""Agents that need no model: oracle, noop, random, replay and predictions."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.harness.baselines.base import AgentError, tool_call
from repogym.scenarios.jsonl import read_jsonl
from repogym.scenarios.swebench import task_id_for

SUBMIT = tool_call("submit")
PATCH_PATH = "/tmp/repogym.patch"


class NoopAgent:
    """Submits at once: the unchanged repository must earn no reward on a valid task."""

    def reset(self, task_info: dict[str, Any]) -> None:
        """Nothing to prepare."""

    def act(self, observation: str) -> str:
        """Always ``submit``."""
        return SUBMIT


class PatchAgent:
    """Base of the agents that apply one patch through the env's own tools, then submit.

    Steps: write the patch to ``/tmp`` in the sandbox (outside the repository, so it is not
    part of the diff), apply it, submit. An empty patch is submitted at once. When applying
    fails, ``stop_reason`` says so (``patch_failed: ...``) and the unchanged repository is
    graded, as SWE-bench grades a patch that does not apply.
    """

    #: The shell command that applies the patch at PATCH_PATH (subclasses may relax it).
    apply_command = f"git apply --whitespace=nowarn {PATCH_PATH} && git status --short"

    def __init__(self) -> None:
        self._plan: list[str] = []
        self._last: str | None = None
        self.stop_reason: str | None = None

    def start(self, patch: str) -> None:
        """Plan the episode for ``patch``."""
        self.stop_reason, self._last = None, None
        self._plan = [SUBMIT]
        if patch.strip():
            self._plan[:0] = [tool_call("write", path=PATCH_PATH, content=patch), self._apply]

    @property
    def _apply(self) -> str:
        return tool_call("bash", command=self.apply_command)

    def act(self, observation: str) -> str:
        """The next planned action (submit once the plan is used up)."""
        if self._last == self._apply:  # ``observation`` is what applying the patch printed
            code = _EXIT_CODE.search(observation)
            if code is None or int(code.group(1)) != 0:
                detail = observation.strip().splitlines()[0] if observation.strip() else ""
                self.stop_reason = f"patch_failed: {detail[:200]}"
        self._last = self._plan.pop(0) if self._plan else SUBMIT
        return self._last


_EXIT_CODE = re.compile(r"\[exit code: (-?\d+)\]\s*$")


class OracleAgent(PatchAgent):
    """Applies the task's gold patch through the env's own tools, then submits.

    The runner hands it the solution.patch out of band (``set_gold_patch``), never through an
    observation. An oracle that does not resolve a task points at a broken task, not at the
    agent.
    """

    wants_gold_patch = True

    def __init__(self) -> None:
        super().__init__()
        self._gold: str | None = None

    def set_gold_patch(self, patch: str) -> None:
        """Receive the gold fix for the next ``reset``."""
        self._gold = patch

    def reset(self, task_info: dict[str, Any]) -> None:
        """Plan write → apply → submit for this task's gold patch."""
        if self._gold is None:
            raise AgentError(
                "the oracle got no gold patch. Fix: run it through repogym's runner, "
                "which calls set_gold_patch() before reset()"
            )
        self.start(self._gold)
        self._gold = None


class PredictionsAgent(PatchAgent):
    """Applies each task's patch from a SWE-bench-style predictions file, then submits.

    ``repogym grade`` runs it. A prediction is a JSON object with ``instance_id`` (the task
    id, or the SWE-bench instance id the task was imported from) and ``model_patch`` (a
    unified diff; empty or null for no change); ``model_name_or_path`` is optional. The file
    is JSON Lines or one JSON list. A patch that ``git apply`` rejects is tried with
    ``patch --fuzz=5``, as SWE-bench's harness does.

    Args:
        file: The predictions file (required).
    """

    apply_command = (
        f"git apply --whitespace=nowarn {PATCH_PATH} || patch --batch --fuzz=5 -p1 -i {PATCH_PATH}"
    )

    def __init__(self, file: str | None = None) -> None:
        super().__init__()
        if not file:
            raise AgentError(
                "predictions needs a file. Fix: --agent-arg file=PREDICTIONS.jsonl "
                '(lines of {"instance_id": ..., "model_patch": ...})'
            )
        self.file = Path(file)
        self.patches = {p.task_id: p.patch for p in read_predictions(self.file)}

    def reset(self, task_info: dict[str, Any]) -> None:
        """Plan the episode for this task's predicted patch."""
        task = str(task_info.get("id"))
        if task not in self.patches:
            raise AgentError(
                f"{self.file} has no prediction for task {task!r}. Fix: grade only "
                "the tasks it covers (`repogym grade` does)"
            )
        self.start(self.patches[task])


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One line of a predictions file.

    Attributes:
        instance_id: As written in the file.
        task_id: The repogym task id it names (SWE-bench ids are mapped as on import).
        patch: The model's patch ("" for none).
        model: ``model_name_or_path`` (None when absent).
    """

    instance_id: str
    task_id: str
    patch: str
    model: str | None


def _prediction_records(path: Path) -> list[tuple[str, Any]]:
    """(where, record) of each prediction: a JSON list, a JSON object keyed by instance id
    (SWE-agent's preds.json, as swebench reads it) or JSON Lines."""
    if not path.is_file():
        raise AgentError(f"predictions file {path} does not exist. Fix: pass an existing file")
    text = path.read_text()
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise AgentError(f"{path}: not JSON ({e}). Fix: write a JSON list or JSON Lines") from e
        return [(f"{path}[{i}]", rec) for i, rec in enumerate(data)]
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "instance_id" not in whole:  # keyed by instance id
        return [
            (f"{path}[{key!r}]", {"instance_id": key, **rec} if isinstance(rec, dict) else rec)
            for key, rec in whole.items()
        ]
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append((f"{path}:{n}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise AgentError(
                    f"{path}:{n}: not JSON ({e}). Fix: one JSON object per line"
                ) from e
    return records


def _prediction(where: str, rec: Any) -> Prediction:
    if not isinstance(rec, dict) or not isinstance(rec.get("instance_id"), str):
        raise AgentError(
            f'{where}: expected an object with a string "instance_id". Fix: '
            'write {"instance_id": "<task id>", "model_patch": "<diff>"}'
        )
    if "model_patch" not in rec:
        raise AgentError(
            f'{where}: {rec["instance_id"]!r} has no "model_patch". Fix: add it '
            "(an empty string or null for no change)"
        )
    patch = rec["model_patch"]
    if patch is not None and not isinstance(patch, str):
        raise AgentError(
            f"{where}: model_patch of {rec['instance_id']!r} is "
            f"{type(patch).__name__}, not a string. Fix: write the diff as a string"
        )
    model = rec.get("model_name_or_path")
    return Prediction(
        rec["instance_id"],
        task_id_for(rec["instance_id"]),
        patch or "",
        str(model) if model is not None else None,
    )


def read_predictions(path: Path) -> list[Prediction]:
    """The predictions in a JSONL (or JSON list) file, one per task.

    Raises:
        AgentError: a missing file, a malformed line, or two predictions for one task (the
            message names the file and line and the fix).
    """
    out: dict[str, Prediction] = {}
    for where, rec in _prediction_records(path):
        pred = _prediction(where, rec)
        if pred.task_id in out:
            raise AgentError(
                f"{where}: a second prediction for {pred.instance_id!r}. Fix: keep "
                "one prediction per instance"
            )
        out[pred.task_id] = pred
    if not out:
        raise AgentError(
            f"{path}: no predictions. Fix: one JSON object per line with "
            "instance_id and model_patch"
        )
    return list(out.values())


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
            tool_call(
                "write",
                path=f"scratch_{self._rng.randint(0, 99)}.txt",
                content=f"note {self._rng.random():.6f}\n",
            ),
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
            raise AgentError(
                "replay needs a file. Fix: --agent-arg file=PATH (a trajectory "
                "JSONL, a folder of them, or a {task: [actions]} JSON/JSONL)"
            )
        self.file, self.strict = Path(file), strict
        self.scripts = load_scripts(self.file)
        self._queue: list[str] = []

    def reset(self, task_info: dict[str, Any]) -> None:
        """Queue the task's actions."""
        task = task_info.get("id")
        if task not in self.scripts and self.strict:
            raise AgentError(
                f"{self.file} has no actions for task {task!r}. Fix: add them or drop strict=true"
            )
        self._queue = list(self.scripts.get(task, []))

    def act(self, observation: str) -> str:
        """The next recorded action, then submit."""
        return self._queue.pop(0) if self._queue else SUBMIT


def _as_action(action: Any, where: str) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, dict):
        return json.dumps(action)
    raise AgentError(
        f"{where}: an action must be a string or an object, got "
        f"{type(action).__name__}. Fix: write {tool_call('bash', command='ls')}"
    )


def _from_trajectory(path: Path, records: list[dict]) -> tuple[str, list[str]]:
    task = records[0].get("task")
    steps = sorted((r for r in records if r.get("type") == "step"), key=lambda r: r["t"])
    return task, [_as_action(r["action"], str(path)) for r in steps]


def _read_jsonl(path: Path) -> list[dict]:
    return read_jsonl(path, error=AgentError)


def _scripts_from_records(path: Path, records: list[dict]) -> dict[str, list[str]]:
    if records and records[0].get("type") == "header":
        task, actions = _from_trajectory(path, records)
        return {task: actions}
    scripts: dict[str, list[str]] = {}
    for n, rec in enumerate(records, 1):
        if "task" not in rec or not isinstance(rec.get("actions"), list):
            raise AgentError(
                f'{path}:{n}: expected {{"task": id, "actions": [...]}}. Fix: '
                "use that form, or pass a TrajectoryLogger file"
            )
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
        return {
            task: [_as_action(a, str(path)) for a in _list(acts, path)]
            for task, acts in data.items()
        }
    return _scripts_from_records(path, _read_jsonl(path))


def _list(value: Any, path: Path) -> Iterable[Any]:
    if not isinstance(value, list):
        raise AgentError(f"{path}: each task maps to a list of actions. Fix: use [..]")
    return value
