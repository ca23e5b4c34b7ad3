"""The Agent protocol, the registry of built-in agents and ``module:Class`` loading.

An agent is any object with ``reset(task_info)`` and ``act(observation) -> str``.
``task_info`` is :meth:`repogym.Task.info` plus ``seed`` and
``sample``: what an agent may be told, never the hidden tests or the gold patch.

Optional hooks the runner uses when present:

- ``usage``: a dict of counters for the current episode (``prompt_tokens``,
  ``completion_tokens``, ``requests``, ``retries``), recorded in results.jsonl.
- ``wants_gold_patch = True`` and ``set_gold_patch(text)``: reference baselines (the oracle)
  get the task's solution.patch out of band, before ``reset``, never through an observation.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Protocol, runtime_checkable

#: Built-in agent name -> "module:Class". Third-party agents load by "module:Class" directly.
AGENTS: dict[str, str] = {
    "oracle": "repogym.harness.agents.scripted:OracleAgent",
    "noop": "repogym.harness.agents.scripted:NoopAgent",
    "random": "repogym.harness.agents.scripted:RandomAgent",
    "replay": "repogym.harness.agents.scripted:ReplayAgent",
    "hf": "repogym.harness.agents.hf:HFAgent",
    "openai": "repogym.harness.agents.openai_compat:OpenAIAgent",
}


class AgentError(RuntimeError):
    """An agent could not be built or failed in a way it reports itself (e.g. an API error)."""


@runtime_checkable
class Agent(Protocol):
    """What the runner drives: one episode is ``reset`` then ``act`` until the env ends it."""

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start an episode of the task described by ``task_info``."""

    def act(self, observation: str) -> str:
        """Return the next action (raw text holding one tool call) for ``observation``."""


def tool_call(tool: str, **args: Any) -> str:
    """An action string in repogym's JSON form, e.g. ``tool_call("bash", command="ls")``."""
    return json.dumps({"tool": tool, "args": args})


def new_usage() -> dict[str, int]:
    """Zeroed usage counters for one episode."""
    return {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0, "retries": 0}


def parse_agent_args(pairs: list[str]) -> dict[str, Any]:
    """Turn ``["k=v", ...]`` into keyword arguments; values are JSON when they parse.

    ``temperature=0.7`` gives a float, ``tools=false`` a bool, ``model=/path`` a string.

    Raises:
        ValueError: a pair has no ``=`` (the message shows the expected form).
    """
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--agent-arg {pair!r} is not KEY=VALUE. Fix: write e.g. "
                             "--agent-arg temperature=0.7")
        try:
            args[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            args[key.strip()] = value
    return args


def resolve_agent_class(name: str) -> type:
    """The class for a built-in name or a ``module:Class`` reference.

    Raises:
        AgentError: unknown name, unimportable module or missing class (with the fix).
    """
    ref = AGENTS.get(name, name)
    if ":" not in ref:
        raise AgentError(f"unknown agent {name!r}. Fix: use one of {sorted(AGENTS)} or "
                         "'package.module:ClassName' for your own agent")
    module_name, _, cls_name = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise AgentError(f"cannot import agent module {module_name!r}: {e}. Fix: install it or "
                         "put it on PYTHONPATH") from e
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise AgentError(f"module {module_name!r} has no {cls_name!r}. Fix: check the name "
                         "after the ':'")
    return cls


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build an agent by built-in name or ``module:Class`` with keyword arguments.

    Raises:
        AgentError: the agent is unknown, its arguments are wrong, or it lacks reset/act.
    """
    cls = resolve_agent_class(name)
    try:
        agent = cls(**kwargs)
    except TypeError as e:
        raise AgentError(f"agent {name!r} rejected its arguments {sorted(kwargs)}: {e}. Fix: "
                         "check the --agent-arg names in its docstring") from e
    if not (callable(getattr(agent, "reset", None)) and callable(getattr(agent, "act", None))):
        raise AgentError(f"{name!r} is not an agent: it needs reset(task_info) and "
                         "act(observation) -> str methods")
    return agent
