"""A compact action language for the CPU demo: the policy picks one of a few candidate edits.

This is a toy that shows the learning machinery end to end (real environments, real
sandboxes, real hidden-test grading, GRPO updates); it is not a claim that a 0.5M-parameter
model fixes bugs. For each task the menu holds the task's gold fix, its alternative fixes,
its decoys and "no change", under shuffled labels ``fix 1`` ... ``fix n``. The policy sees
``task <id>`` and writes ``fix <k>`` or ``submit``; this agent-side interface expands
``fix <k>`` into ``write`` tool calls with the edited files' contents.

Where the patches are read: on the host, by the interface, outside the sandbox. The patches
are applied to a host copy of the task's ``repo/`` with ``git apply``; only the resulting file
contents go into the sandbox, through the environment's ``write`` tool. The gold patch is
never readable inside the sandbox, and the reward still comes from the hidden tests run by
the environment's grader (which does not know which menu entry was picked).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.agents.rollout import SUBMIT_ACTION
from repogym.envs.grader import split_diff
from repogym.scenarios.task import Task

__all__ = ["Candidate", "PatchMenu"]

NOOP_ACTION = json.dumps({"tool": "bash", "args": {"command": "true"}})


@dataclass
class Candidate:
    """One menu entry.

    Attributes:
        label: What the policy writes, e.g. ``fix 3``.
        source: Where it came from: ``solution``, ``alternatives/x.patch``,
            ``decoys/y.patch`` or ``no change`` (for reports; never shown to the policy).
        actions: The environment actions it expands to.
    """

    label: str
    source: str
    actions: list[str]

    @property
    def intended_fix(self) -> bool:
        """True for the gold fix and the alternatives (bookkeeping only; not the reward)."""
        return self.source == "solution" or self.source.startswith("alternatives/")


@dataclass
class PatchMenu:
    """The demo's action language over a few tasks (an :class:`AgentInterface`).

    Args:
        tasks: Tasks whose patches form the menus (single- or multi-file edits, no deletions).
        seed: Shuffles the labels per task, so the label of the right fix differs by task.
        noop: Add a "no change" entry.
    """

    tasks: Sequence[Task]
    seed: int = 0
    noop: bool = True
    stop: tuple[str, ...] = ("\n",)
    menus: dict[str, list[Candidate]] = field(init=False)

    def __post_init__(self) -> None:
        self.menus = {t.id: self._menu(t) for t in self.tasks}

    def _menu(self, task: Task) -> list[Candidate]:
        sources: list[tuple[str, Path | None]] = [("solution", task.solution_patch)]
        sources += [(f"alternatives/{p.name}", p) for p in task.alternatives]
        sources += [(f"decoys/{p.name}", p) for p in task.decoys]
        if self.noop:
            sources.append(("no change", None))
        entries = []
        for source, patch in sources:
            actions = [NOOP_ACTION] if patch is None else _write_actions(task, patch)
            if actions:
                entries.append((source, actions))
        random.Random(f"{self.seed}:{task.id}").shuffle(entries)
        return [Candidate(f"fix {i + 1}", s, a) for i, (s, a) in enumerate(entries)]

    # -- AgentInterface ---------------------------------------------------------------------
    def prompt(self, observation: str, info: dict[str, Any]) -> str:
        """``task <id>`` and a newline (the statement is too long for the tiny model)."""
        return f"task {info['task']}\n"

    def actions(self, text: str, task: str) -> list[str]:
        """``fix <k>`` -> its writes; ``submit`` -> submit; anything else goes through as is."""
        words = text.strip()
        if words == "submit":
            return [SUBMIT_ACTION]
        for cand in self.menus[task]:
            if words == cand.label:
                return list(cand.actions)
        return [text]

    def observation(self, observation: str) -> str:
        """The observation's first line, clipped to 60 characters."""
        first = observation.strip().splitlines()[0] if observation.strip() else ""
        return first[:60] + "\n"

    def corpus(self) -> list[str]:
        """Prompts and action strings, for the tiny tokenizer."""
        labels = {c.label for menu in self.menus.values() for c in menu}
        return (
            [f"task {t}\n" for t in self.menus] + [f"{x}\n" for x in sorted(labels)] + ["submit\n"]
        )

    # -- demo helpers -----------------------------------------------------------------------
    def labels(self, task: str) -> list[str]:
        """The menu labels of ``task``."""
        return [c.label for c in self.menus[task]]

    def script(self, task: str, label: str) -> list[str]:
        """The action texts of the trajectory that picks ``label`` and submits."""
        return [f"{label}\n", "submit\n"]


def _write_actions(task: Task, patch: Path) -> list[str]:
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
            return []
        return [
            json.dumps(
                {
                    "tool": "write",
                    "args": {"path": f.new, "content": (work / f.new).read_text("utf-8")},
                }
            )
            for f in files
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scripted_episodes(menu: PatchMenu, actor_tokenizer: Any, pool: Any, config: Any) -> list:
    """Run one real episode per menu entry of every task (pick it, then submit).

    These are the oracle and decoy trajectories of the demo's warm start: every entry
    appears once, so supervised training on them gives a uniform mix over the menu. Their
    rewards come from the environment's grading like any other episode's.

    Args:
        menu: The menu.
        actor_tokenizer: Tokenizer of the policy (the scripted actions are its tokens).
        pool: :class:`repogym.agents.rollout.EnvPool`.
        config: :class:`repogym.agents.rollout.RolloutConfig`.

    Returns:
        The episodes.
    """
    from repogym.agents.rollout import ScriptedActor, run_episodes

    tasks = [task for task in menu.menus for _ in menu.labels(task)]
    queues = {task: iter(menu.labels(task)) for task in menu.menus}

    def script(i: int, ctx: list[int]) -> str:
        text = actor_tokenizer.decode(ctx)
        prompt, _, rest = text.partition("\n")
        if rest:  # an action and its observation follow the prompt: submit
            return "submit\n"
        return f"{next(queues[prompt.removeprefix('task ')])}\n"

    return run_episodes(ScriptedActor(actor_tokenizer, script), menu, pool, tasks, config)
