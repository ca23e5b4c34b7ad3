"""The CPU toy's menu: each task's own patches as a short list of choices, one shuffle.

A toy that shows the learning machinery end to end on a CPU (real environments, sandboxes and
hidden-test grading); it is not a coding agent. :func:`menu_entries` lists a task's candidate
patches (``Task.candidates()``: gold, alternatives, decoys) and "no change", shuffled per task
from a seed, each expanded into ``write`` tool calls computed on the host (the patch is applied
to a host copy of ``repo/`` with ``git apply``; only file contents enter the sandbox, never the
patch). Two users share it:

- :class:`MenuFormat`, the LM toy's episode format: the policy sees ``task <id>`` and writes
  ``fix <k>`` or ``submit``; ``fix <k>`` becomes the entry's writes;
- :class:`repogym.agents.toy.menu_env.MenuEnv`, a ``Discrete`` env for Stable-Baselines3.

The reward still comes from the environment's grader, which does not know what was picked.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.agents.chat import Stops
from repogym.agents.engines import Request, ScriptedEngine
from repogym.agents.episode import Episode
from repogym.agents.rollout import SUBMIT_ACTION, EnvPool, RolloutConfig, run_episodes
from repogym.scenarios import Candidate, Task
from repogym.scenarios.patches import split_diff

__all__ = ["NOOP", "MenuEntry", "MenuFormat", "menu_entries", "scripted_episodes"]

NOOP = "no change"
NOOP_ACTION = json.dumps({"tool": "bash", "args": {"command": "true"}})


@dataclass(frozen=True)
class MenuEntry:
    """One choice: a task's patch (or no change) and the tool calls it expands to.

    Attributes:
        label: What the LM toy writes, ``fix <k>`` (1-based position in the shuffled menu).
        candidate: The task's patch; None for "no change".
        actions: The environment actions (``write`` calls; a no-op for "no change").
    """

    label: str
    candidate: Candidate | None
    actions: tuple[str, ...]

    @property
    def name(self) -> str:
        """``gold``, ``alternatives/x.patch``, ``decoys/y.patch`` or ``no change``."""
        if self.candidate is None:
            return NOOP
        return "gold" if self.candidate.kind == "gold" else self.candidate.name

    @property
    def kind(self) -> str:
        """``gold``, ``alternative``, ``decoy`` or ``noop``."""
        return "noop" if self.candidate is None else self.candidate.kind


_CACHE: dict[tuple[str, str, int, bool], tuple[MenuEntry, ...]] = {}


def menu_entries(task: Task, seed: int = 0, noop: bool = True) -> tuple[MenuEntry, ...]:
    """The task's patches (and no change) as menu entries, shuffled from ``(seed, task id)``.

    Patches that do not apply to ``repo/`` or delete files are skipped with a warning.
    """
    key = (task.id, str(task.path), seed, noop)
    if key not in _CACHE:
        _CACHE[key] = _entries(task, seed, noop)
    return _CACHE[key]


def _entries(task: Task, seed: int, noop: bool) -> tuple[MenuEntry, ...]:
    choices: list[Candidate | None] = list(task.candidates()) + ([None] if noop else [])
    usable = []
    for cand in choices:
        actions = (NOOP_ACTION,) if cand is None else _write_actions(task, cand.path)
        if actions:
            usable.append((cand, actions))
    random.Random(f"{seed}:{task.id}").shuffle(usable)
    return tuple(MenuEntry(f"fix {i + 1}", c, a) for i, (c, a) in enumerate(usable))


def _write_actions(task: Task, patch: Path) -> tuple[str, ...]:
    """``write`` tool calls that turn ``repo/`` into ``repo/`` + ``patch`` (host side)."""
    files = split_diff(patch.read_text(encoding="utf-8"))
    tmp = Path(tempfile.mkdtemp(prefix="repogym-menu-"))
    try:
        work = tmp / "repo"
        shutil.copytree(task.repo_dir, work)
        res = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(patch.resolve())],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        missing = [f.new for f in files if not (work / f.new).is_file()]
        if res.returncode != 0 or missing:
            warnings.warn(
                f"menu: skipping {patch} of task {task.id}: "
                f"{res.stderr.strip() or f'it deletes {missing}'}",
                stacklevel=3,
            )
            return ()
        return tuple(
            json.dumps(
                {
                    "tool": "write",
                    "args": {"path": f.new, "content": (work / f.new).read_text("utf-8")},
                }
            )
            for f in files
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _MenuDialogue:
    """One episode in the menu language: ``task <id>\\n``, then ``fix <k>\\n`` / ``submit\\n``
    and the first line of each observation."""

    def __init__(self, fmt: MenuFormat, task: str, hint: str) -> None:
        self.fmt = fmt
        self.task = task
        self.pending = fmt.encode(f"task {task}\n{hint}")
        self.pending_mask = [0] * len(self.pending)

    def add_completion(self, completion_ids: list[int]) -> list[str]:
        text = self.fmt.tokenizer.decode(completion_ids, skip_special_tokens=True).strip()
        self.pending, self.pending_mask = [], []
        if text == "submit":
            return [SUBMIT_ACTION]
        for entry in self.fmt.entries(self.task):
            if text == entry.label:
                return list(entry.actions)
        return [text]

    def observe(self, observation: str, *, final: bool = False) -> None:
        first = observation.strip().splitlines()[0][:60] if observation.strip() else ""
        self.pending = self.fmt.encode(first + "\n")
        self.pending_mask = [1] * len(self.pending)


@dataclass
class MenuFormat:
    """The LM toy's episode format (an ``EpisodeFormat``) over some tasks.

    Args:
        tasks: Tasks whose menus the policy picks from.
        tokenizer: The tiny model's tokenizer.
        seed: Shuffles each task's menu.
    """

    tasks: tuple[Task, ...]
    tokenizer: Any
    seed: int = 0

    @property
    def stops(self) -> Stops:
        """A completion ends at the end of its line (or EOS)."""
        return Stops(frozenset({self.tokenizer.eos_token_id}), ("\n",))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def entries(self, task: str) -> tuple[MenuEntry, ...]:
        """The menu of ``task``."""
        by_id = {t.id: t for t in self.tasks}
        return menu_entries(by_id[task], self.seed)

    def start(self, observation: str, info: dict[str, Any]) -> _MenuDialogue:
        return _MenuDialogue(self, info["task"], info.get("hint", ""))

    def gold_label(self, task: str) -> str:
        """The label of the gold patch in ``task``'s menu."""
        return next(e.label for e in self.entries(task) if e.kind == "gold")

    def oracle_texts(self, task: str) -> list[str]:
        """The gold trajectory: pick the gold entry, submit."""
        return [f"{self.gold_label(task)}\n", "submit\n"]

    def gold_hint(self, task: str) -> str:
        """Self-distillation's privileged context: the gold entry's label."""
        return f"gold {self.gold_label(task)}\n"

    @staticmethod
    def corpus(tasks: tuple[Task, ...], seed: int = 0) -> list[str]:
        """Prompts and action strings the tiny tokenizer should encode compactly."""
        labels = sorted({e.label for t in tasks for e in menu_entries(t, seed)})
        return [f"task {t.id}\n" for t in tasks] + [f"{x}\n" for x in labels] + ["submit\n"]


def scripted_episodes(
    fmt: MenuFormat,
    pool: EnvPool,
    config: RolloutConfig,
    on_episode: Callable[[int, int], None] | None = None,
) -> list[Episode]:
    """One real episode per menu entry of every task (pick it, then submit).

    The warm start's data: every entry appears once, so supervised training on them gives a
    uniform mix over the menu; the rewards come from real grading like any other episode's.
    ``on_episode(done, total)`` is called as each episode ends.
    """
    tasks = [t.id for t in fmt.tasks for _ in fmt.entries(t.id)]
    queues = {t.id: iter(fmt.entries(t.id)) for t in fmt.tasks}

    def script(i: int, request: Request) -> str:
        text = fmt.tokenizer.decode(request.prompt_ids)
        prompt, _, rest = text.partition("\n")
        if rest:  # an action and its observation follow the prompt: submit
            return "submit\n"
        return f"{next(queues[prompt.removeprefix('task ')]).label}\n"

    done = [0]

    def finished(_: Episode) -> None:
        done[0] += 1
        if on_episode is not None:
            on_episode(done[0], len(tasks))

    return run_episodes(
        ScriptedEngine(fmt.tokenizer, script), fmt, pool, tasks, config, on_episode=finished
    )
