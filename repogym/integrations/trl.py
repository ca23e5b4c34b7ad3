"""TRL: repogym tasks for ``GRPOTrainer(environment_factory=...)`` (needs ``repogym[trl]``).

TRL creates one :class:`RepoGymToolEnv` per rollout (and reuses it), calls
``reset(**row)`` with the dataset row, exposes the public methods (``bash``, ``read``,
``write``, ``edit``, ``submit``) as the model's native tools (listed by its chat template,
whose tool calls TRL parses with ``tokenizer.parse_response`` and runs as these methods;
the observation asks for such calls, :data:`NATIVE_TOOLS`), and scores the rollout with
``get_reward()``: the hidden tests' reward from repogym's grader (a rollout that never called
``submit`` is graded as it stands, as a truncated episode is). :func:`script_model` confines
a (tiny) model's turns to given tool calls, for smoke tests of this plumbing.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from repogym.integrations.trl import RepoGymToolEnv, task_dataset

    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=task_dataset("train"),
                          environment_factory=RepoGymToolEnv)

``RepoGymToolEnv.remote = "http://host:8000"`` (or a subclass setting it) runs the sandboxes
on a ``repogym serve`` instead of this machine.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import gymnasium as gym

from repogym.envs import make_suite_env
from repogym.envs.actions import TOOL_HELP, TOOLS
from repogym.envs.info import StepInfo

PROMPT = (
    "Fix the bug described below in the repository. Use the tools to look around and "
    "change files; call submit when you are done.\n\n"
)

NATIVE_TOOLS = (
    "Act by calling the tools given to you (bash, read, write, edit, submit) as "
    "function calls, in the tool-call format your instructions describe; each call's "
    "result comes back as the tool's response. Call submit when you are done: your "
    "changes are then graded by hidden tests."
)
"""What replaces the env's text-action help (:data:`~repogym.envs.actions.TOOL_HELP`, JSON
or fenced bash, which TRL does not parse) in the observations: under TRL the tools are the
model's native tools, which the chat template lists with their schemas and whose calls TRL
parses (``tokenizer.parse_response``) and runs as this env's methods."""


def task_rows(
    split: str | None = None, tags: Iterable[str] | None = None, samples: int = 1
) -> list[dict[str, Any]]:
    """One dataset row per task (``samples`` rows each): ``prompt``, ``task``, ``split``."""
    from repogym.scenarios.registry import registered_tasks
    from repogym.scenarios.task import select_tasks

    tasks = select_tasks(registered_tasks().values(), split=split, tags=tags)
    return [
        {"prompt": [{"role": "user", "content": PROMPT}], "task": t.id, "split": t.split, "seed": s}
        for t in tasks
        for s in range(samples)
    ]


def task_dataset(
    split: str | None = None, tags: Iterable[str] | None = None, samples: int = 1
) -> Any:
    """:func:`task_rows` as a ``datasets.Dataset``; ``task_dataset("train")``/``("test")``."""
    from datasets import Dataset

    return Dataset.from_list(task_rows(split, tags, samples))


class RepoGymToolEnv:
    """One repogym episode per rollout, its tools as typed methods (TRL's environment_factory).

    Class attributes (set them on a subclass, or before building the trainer): ``remote``
    (a ``repogym serve`` URL; None runs local sandboxes), ``sandbox``, ``reward_mode``,
    ``max_steps`` (tool calls before the episode is graded as it stands), ``results`` (a
    list every graded episode is appended to, for logging).
    """

    remote: ClassVar[str | None] = None
    sandbox: ClassVar[str] = "bwrap"
    reward_mode: ClassVar[str] = "binary"
    max_steps: ClassVar[int | None] = None
    results: ClassVar[list[dict[str, Any]] | None] = None

    def __init__(self) -> None:
        local = {} if self.remote else {"sandbox": self.sandbox}
        self._env: gym.Env = make_suite_env(
            remote=self.remote, reward_mode=self.reward_mode, max_steps=self.max_steps, **local
        )
        _OPEN.append(self._env)
        self._info: dict[str, Any] = {}
        self._reward: float | None = None
        self._done = True
        self._task: str | None = None

    def reset(self, **row: Any) -> str:
        """Start the row's task; the returned observation is appended to the prompt."""
        self._task = row["task"]
        obs, self._info = self._env.reset(seed=row.get("seed"), options={"task": self._task})
        self._reward, self._done = None, False
        return _native(obs) if TOOL_HELP in obs else f"{obs.rstrip()}\n\n{NATIVE_TOOLS}\n"

    def _act(self, tool: str, **args: Any) -> str:
        if self._done:
            return "The episode is over: your changes were graded. Stop calling tools."
        obs, reward, terminated, truncated, info = self._env.step(
            json.dumps({"tool": tool, "args": {k: v for k, v in args.items() if v is not None}})
        )
        if terminated or truncated:
            self._finish(float(reward), info)
        return _native(obs)

    def _finish(self, reward: float, info: StepInfo) -> None:
        self._done, self._info = True, info
        self._reward = None if info.get("infra_error") else reward
        if self.results is not None:
            self.results.append(
                {
                    "task": self._task,
                    "reward": self._reward,
                    "resolved": bool(info.get("resolved")),
                    "tests": info.get("tests", {}),
                    "infra_error": info.get("infra_error") or None,
                }
            )

    def bash(self, command: str) -> str:
        return self._act("bash", command=command)

    def read(self, path: str, start: int | None = None, end: int | None = None) -> str:
        return self._act("read", path=path, start=start, end=end)

    def write(self, path: str, content: str) -> str:
        return self._act("write", path=path, content=content)

    def edit(self, path: str, old: str, new: str) -> str:
        return self._act("edit", path=path, old=old, new=new)

    def submit(self) -> str:
        return self._act("submit")

    def get_reward(self) -> float | None:
        """The episode's reward from the hidden tests (None, i.e. masked, on an infra error)."""
        if not self._done:
            self._act("submit")  # graded as it stands, as a truncated episode is
        return self._reward

    @classmethod
    def close_all(cls) -> None:
        """Close every instance's env (sandboxes and temp folders); TRL never closes them.

        A classmethod, so that TRL does not offer it to the model as a tool.
        """
        while _OPEN:
            _OPEN.pop().close()


_OPEN: list[gym.Env] = []


def tools_of(env: RepoGymToolEnv) -> list[Callable[..., str]]:
    """The env's tools as GRPOTrainer lists them (in the system prompt it renders, and in
    that order): the public functions of its class other than ``reset`` and ``get_reward``."""
    return [
        getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def _native(obs: str) -> str:
    """The observation with the text-action help replaced by :data:`NATIVE_TOOLS`."""
    return obs.replace(TOOL_HELP, NATIVE_TOOLS)


# The tool methods' docstrings (TRL builds the tools' schemas from them) come from the one
# tool schema, so the model reads the same descriptions as every other agent.
for _tool in TOOLS.values():
    getattr(RepoGymToolEnv, _tool.name).__doc__ = _tool.docstring()


class ScriptedTurns:
    """A logits processor confining each generated turn to one of ``turns`` (token ids, each
    ending with the end-of-turn token): at every step only the tokens that continue a turn
    matching what was generated so far are allowed, and the model's own logits choose among
    them (so a choice between turns is sampled from the model, and is what GRPO trains).
    ``start`` is the width of the current ``generate`` call's input (set by
    :func:`script_model`)."""

    def __init__(self, turns: Sequence[Sequence[int]], eos_token_id: int) -> None:
        self.turns = [tuple(t) for t in turns]
        self.eos = eos_token_id
        self.start = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        allowed = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(input_ids[:, self.start :].tolist()):
            n = len(ids)
            nxt = {t[n] for t in self.turns if len(t) > n and list(t[:n]) == ids} or {self.eos}
            allowed[row, sorted(nxt)] = 0.0
        return scores + allowed


def script_model(model: Any, tokenizer: Any, turns: Sequence[str]) -> ScriptedTurns:
    """Make ``model.generate`` (which GRPOTrainer calls) emit only the assistant turns in
    ``turns`` (text in the chat template's format, e.g. Qwen3's ``<tool_call>`` blocks; the
    end-of-turn token is appended), choosing among them by the model's sampled logits.

    For smoke tests and demos with a tiny model: what it emits still goes through TRL's real
    generation, tool-call parsing (``parse_response``), tool loop and loss. Returns the
    processor."""
    from transformers import LogitsProcessorList

    processor = ScriptedTurns(
        [tokenizer(t + tokenizer.eos_token, add_special_tokens=False)["input_ids"] for t in turns],
        tokenizer.eos_token_id,
    )
    generate = model.generate

    def scripted_generate(*args: Any, **kwargs: Any) -> Any:
        inputs = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        processor.start = inputs.shape[1]
        kwargs["logits_processor"] = LogitsProcessorList(
            [*(kwargs.get("logits_processor") or []), processor]
        )
        return generate(*args, **kwargs)

    model.generate = scripted_generate
    return processor
