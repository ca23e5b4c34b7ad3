"""The settings of a run (:class:`RunConfig`), the settings a resume must match and its
default label."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from repogym.grading.grader import REWARD_MODES
from repogym.harness.baselines import transport_options
from repogym.harness.provenance import public_args

#: Longest setting value shown whole in a label; longer ones are cut (run.json has them all).
_LABEL_VALUE_CHARS = 24


def result_settings(
    agent: str,
    agent_args: dict[str, Any],
    *,
    reward_mode: str = "binary",
    max_steps: int | None = None,
) -> dict[str, Any]:
    """The settings that can change a run's results: the agent, its options less those that
    only say how to reach the model (``TRANSPORT_OPTIONS``: URL, key variable, timeouts,
    retries), and the scoring settings that differ from the defaults.

    Two runs with equal result settings are the same experiment, whichever host name or port
    reached the server; a resume must match them.
    """
    transport = transport_options(agent)
    settings: dict[str, Any] = {"agent": agent}
    settings.update({k: v for k, v in sorted(agent_args.items()) if k not in transport})
    if reward_mode != "binary":
        settings["reward_mode"] = reward_mode
    if max_steps is not None:
        settings["max_steps"] = max_steps
    return settings


def _label_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if isinstance(value, str) and "/" in text.strip("/"):
        text = text.rstrip("/").rpartition("/")[2]  # a path or repo id: its last part
    text = " ".join(text.split())
    return text if len(text) <= _LABEL_VALUE_CHARS else text[: _LABEL_VALUE_CHARS - 3] + "..."


def default_label(
    agent: str,
    agent_args: dict[str, Any],
    *,
    reward_mode: str = "binary",
    max_steps: int | None = None,
) -> str:
    """A readable label: the agent, its model and the other settings the user chose.

    ``oracle`` stays ``oracle``; ``openai`` with ``model=Qwen/Qwen3-8B, temperature=0.7`` and
    any ``base_url`` becomes ``openai-Qwen3-8B-temperature=0.7``. Options that only say how
    to reach the model (:func:`result_settings`) are left out, so the label never depends on
    the URL; long values are cut (``run.json`` records them whole, and a resume compares the
    whole settings, not the label).
    """
    name = agent.rpartition(":")[2] if ":" in agent else agent
    settings = result_settings(agent, agent_args, reward_mode=reward_mode, max_steps=max_steps)
    settings.pop("agent")
    parts = [name]
    model = settings.pop("model", None)
    if isinstance(model, str) and model.strip("/"):
        parts.append(_label_value(model))
    elif model is not None:
        settings["model"] = model
    parts += [f"{k}={_label_value(v)}" for k, v in settings.items()]
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
        max_endpoint_errors: Stop the run as an outage after this many episodes in a row
            ended with an ``endpoint_error`` (the model's server unreachable or failing
            after the agent's retries); 0 never stops.
        named: Whether the label was given (``--name``) rather than derived (set here).
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
    max_endpoint_errors: int = 3
    named: bool = dataclasses.field(default=False, init=False)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.named = self.label is not None
        if self.max_endpoint_errors < 0:
            raise ValueError(
                f"max_endpoint_errors={self.max_endpoint_errors} must be >= 0 "
                "(0: never stop). Fix: pass a count of episodes"
            )
        if self.samples < 1 or self.workers < 1:
            raise ValueError(
                f"samples={self.samples}, workers={self.workers}: both must be >= 1."
                " Fix: pass positive numbers"
            )
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(
                f"unknown reward_mode {self.reward_mode!r}. Fix: use one of {REWARD_MODES}"
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(
                f"max_steps={self.max_steps} must be >= 1. Fix: pass a positive "
                "step budget, or none for each task's own"
            )
        self.label = self.label or default_label(
            self.agent, self.agent_args, reward_mode=self.reward_mode, max_steps=self.max_steps
        )

    def meta(self) -> dict[str, Any]:
        """The settings as JSON-able data (what ``run.json`` records); URLs in the agent's
        options keep only their endpoint and secrets are redacted
        (:func:`~repogym.harness.provenance.public_args`)."""
        meta = {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in dataclasses.asdict(self).items()
            if k != "named"
        }
        meta["agent_args"] = public_args(self.agent_args)
        return meta

    def result_settings(self) -> dict[str, Any]:
        """:func:`result_settings` of this run, as recorded (URLs and secrets redacted)."""
        return recorded_settings(self.meta())


def recorded_settings(meta: dict[str, Any]) -> dict[str, Any]:
    """The :func:`result_settings` of a run from its ``run.json`` (URLs and secrets
    redacted, as recorded)."""
    return result_settings(
        str(meta.get("agent")),
        public_args(meta.get("agent_args") or {}),
        reward_mode=meta.get("reward_mode") or "binary",
        max_steps=meta.get("max_steps"),
    )
