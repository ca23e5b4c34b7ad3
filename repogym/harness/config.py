"""The settings of a run (:class:`RunConfig`) and its default label."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from repogym.envs.grader import REWARD_MODES


def settings_hash(settings: dict[str, Any]) -> str:
    """Six hex digits that change whenever ``settings`` (JSON-able) change."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:6]


def default_label(agent: str, agent_args: dict[str, Any], *, reward_mode: str = "binary",
                  max_steps: int | None = None) -> str:
    """A label that tells runs apart: agent, model and a hash of every other setting.

    ``oracle`` stays ``oracle``; ``openai`` with ``model=Qwen/Qwen3-8B, temperature=0.7``
    becomes ``openai-Qwen3-8B-<hash>``. The hash covers the agent arguments and the scoring
    settings that differ from the defaults (reward mode, step budget), so two runs get the
    same label only when they ran the same agent the same way.
    """
    name = agent.rpartition(":")[2] if ":" in agent else agent
    parts = [name]
    model = agent_args.get("model")
    if isinstance(model, str) and model.strip("/"):
        parts.append(model.rstrip("/").rpartition("/")[2])
    settings: dict[str, Any] = dict(agent_args)
    if reward_mode != "binary":
        settings["reward_mode"] = reward_mode
    if max_steps is not None:
        settings["max_steps"] = max_steps
    if settings:
        parts.append(settings_hash(settings))
    return "-".join(parts)


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; picklable so workers (processes, Ray actors) can rebuild it.

    Attributes:
        agent: Built-in agent name or ``module:Class``.
        out: Output folder (results.jsonl, trajectories/, run.json).
        agent_args: Keyword arguments for the agent.
        label: Name of the run in results and tables (default: :func:`default_label`).
        suite: ``builtin``, a shipped suite fetched here (``realpy``) or a folder of task
            folders.
        split: Keep only tasks of this split.
        tags: Keep only tasks with any of these tags.
        task_ids: Keep only these task ids.
        samples: Episodes per task (for pass@k).
        workers: Episodes in parallel.
        ray: None (process pool), ``local`` (start Ray here) or a Ray cluster address.
        seed: Base seed; each episode's seed derives from it, the task id and the sample.
        sandbox: Sandbox backend.
        reward_mode: ``binary``, ``partial`` or ``f2p``.
        max_steps: Override every task's step budget.
        act_timeout_s: Per-``act`` limit; past it the episode is an agent error.
        retry_errors: On resume, run again the episodes recorded with an agent error
            (infra errors are always run again).
        env_server: URL of a ``repogym serve`` holding the sandboxes (None: local envs).
    """

    agent: str
    out: Path
    agent_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    label: str | None = None
    suite: str = "builtin"
    split: str | None = None
    tags: list[str] | None = None
    task_ids: list[str] | None = None
    samples: int = 1
    workers: int = 1
    ray: str | None = None
    seed: int = 0
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    max_steps: int | None = None
    act_timeout_s: float = 300.0
    retry_errors: bool = False
    env_server: str | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.samples < 1 or self.workers < 1:
            raise ValueError(f"samples={self.samples}, workers={self.workers}: both must be >= 1."
                             " Fix: pass positive numbers")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"unknown reward_mode {self.reward_mode!r}. Fix: use one of "
                             f"{REWARD_MODES}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps} must be >= 1. Fix: pass a positive "
                             "step budget, or none for each task's own")
        self.label = self.label or default_label(self.agent, self.agent_args,
                                                 reward_mode=self.reward_mode,
                                                 max_steps=self.max_steps)

    def meta(self) -> dict[str, Any]:
        """The settings as JSON-able data (what ``run.json`` records)."""
        return {k: (str(v) if isinstance(v, Path) else v)
                for k, v in dataclasses.asdict(self).items()}
