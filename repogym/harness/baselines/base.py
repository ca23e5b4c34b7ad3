"""The Agent protocol, the registry of built-in agents and ``module:Class`` loading.

An agent is any object with ``reset(task_info)`` and ``act(observation) -> str``.
``task_info`` is :meth:`repogym.Task.info` plus ``seed`` and
``sample``: what an agent may be told, never the hidden tests or the gold patch.

Optional hooks the runner uses when present:

- ``usage``: a dict of counters for the current episode (``prompt_tokens``,
  ``completion_tokens``, ``requests``, ``retries``), recorded in results.jsonl.
- ``wants_gold_patch = True`` and ``set_gold_patch(text)``: reference baselines (the oracle)
  get the task's solution.patch out of band, before ``reset``, never through an observation.
- ``preflight()``: called once before a run spends its suite; raises
  :class:`AgentConfigError` when the settings cannot work (bad key, unknown model, rejected
  argument), which stops the run with that message.
- ``stop_reason``: why the agent ended the current episode when it was not its own choice
  (e.g. ``context_limit: ...``), recorded in results.jsonl; None otherwise.
- ``TRANSPORT_OPTIONS``: the names of the options that say how to reach the model (URL, key
  variable, timeouts, retries) rather than how it behaves; they are left out of the run's
  label and of the settings a resume must match, so the same server reached as
  ``localhost`` or ``127.0.0.1`` is the same run.

Raising :class:`AgentConfigError` from ``reset``/``act`` stops the whole run too (every other
episode would fail the same way). Raising :class:`EndpointError` marks the episode as hit by
a failing model endpoint: it is recorded as an ``endpoint_error`` (not scored, re-run by a
resume), and a run of them in a row stops the run as an outage. Any other exception is an
agent error of that episode.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from typing import Any, Protocol, runtime_checkable

#: Built-in agent name -> "module:Class". Third-party agents load by "module:Class" directly.
AGENTS: dict[str, str] = {
    "oracle": "repogym.harness.baselines.scripted:OracleAgent",
    "noop": "repogym.harness.baselines.scripted:NoopAgent",
    "random": "repogym.harness.baselines.scripted:RandomAgent",
    "replay": "repogym.harness.baselines.scripted:ReplayAgent",
    "predictions": "repogym.harness.baselines.scripted:PredictionsAgent",
    "hf": "repogym.harness.baselines.hf:HFAgent",
    "openai": "repogym.harness.baselines.openai_compat:OpenAIAgent",
    "apr": "repogym.harness.baselines.apr:AprAgent",
    "forger": "repogym.harness.baselines.forger:ForgerAgent",
}


class AgentError(RuntimeError):
    """An agent could not be built or failed in a way it reports itself (e.g. an API error)."""


class AgentConfigError(AgentError):
    """The agent's settings cannot work (credentials, model name, arguments): stop the run."""


class EndpointError(AgentError):
    """The model's endpoint failed (connection refused, timeout, HTTP 5xx) even after retries.

    Not the agent's failure: the episode is recorded as an ``endpoint_error``, left out of
    the rates and run again by a resume.
    """


def transport_options(agent: str) -> frozenset[str]:
    """The options of ``agent`` (a built-in name or ``module:Class``) that only say how to
    reach the model (its ``TRANSPORT_OPTIONS``); empty when it declares none or cannot be
    loaded (the run reports that when it builds the agent)."""
    try:
        cls = resolve_agent_class(agent)
    except AgentError:
        return frozenset()
    return frozenset(getattr(cls, "TRANSPORT_OPTIONS", ()))


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
            raise ValueError(
                f"--agent-arg {pair!r} is not KEY=VALUE. Fix: write e.g. "
                "--agent-arg temperature=0.7"
            )
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
        raise AgentError(
            f"unknown agent {name!r}. Fix: use one of {sorted(AGENTS)} or "
            "'package.module:ClassName' for your own agent"
        )
    module_name, _, cls_name = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise AgentError(
            f"cannot import agent module {module_name!r}: {e}. Fix: install it or "
            "put it on PYTHONPATH"
        ) from e
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise AgentError(
            f"module {module_name!r} has no {cls_name!r}. Fix: check the name after the ':'"
        )
    return cls


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build an agent by built-in name or ``module:Class`` with keyword arguments.

    Raises:
        AgentError: the agent is unknown, its arguments are wrong, or it lacks reset/act.
    """
    cls = resolve_agent_class(name)
    known = {o.name for o in agent_options(cls)}
    unknown = sorted(set(kwargs) - known) if not _takes_any_kwargs(cls) else []
    if unknown:
        raise AgentConfigError(
            f"agent {name!r} has no option(s) {unknown}. Fix: use "
            f"{sorted(known) or 'no --agent-arg'} (see `repogym agents`)"
        )
    try:
        agent = cls(**kwargs)
    except TypeError as e:
        raise AgentConfigError(
            f"agent {name!r} rejected its arguments {sorted(kwargs)}: {e}. "
            "Fix: check the --agent-arg names with `repogym agents`"
        ) from e
    if not (callable(getattr(agent, "reset", None)) and callable(getattr(agent, "act", None))):
        raise AgentError(
            f"{name!r} is not an agent: it needs reset(task_info) and "
            "act(observation) -> str methods"
        )
    return agent


@dataclasses.dataclass(frozen=True)
class AgentOption:
    """One keyword argument of an agent's constructor (an ``--agent-arg``).

    Attributes:
        name: The keyword.
        default: Its default as source text (``required`` when it has none).
        doc: Its description from the class docstring's ``Args:`` section.
    """

    name: str
    default: str
    doc: str


def _docstring_args(cls: type) -> dict[str, str]:
    """``name -> description`` from a Google-style ``Args:`` section of the class docstring."""
    doc = inspect.getdoc(cls) or ""
    match = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)+)", doc, re.MULTILINE)
    if not match:
        return {}
    args: dict[str, str] = {}
    current = None
    for line in match.group(1).splitlines():
        item = re.match(r"^\s{2,8}(\w+)(?: \([^)]*\))?:\s*(.*)$", line)
        if item and (current is None or len(line) - len(line.lstrip()) <= 8):
            current = item.group(1)
            args[current] = item.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    return args


def _takes_any_kwargs(cls: type) -> bool:
    params = inspect.signature(cls).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


def agent_options(cls: type) -> list[AgentOption]:
    """The ``--agent-arg`` options of an agent class: constructor keywords with their docs."""
    docs = _docstring_args(cls)
    out = []
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = "required" if p.default is p.empty else repr(p.default)
        if len(default) > 40:
            default = default[:37] + "..."
        out.append(AgentOption(p.name, default, docs.get(p.name, "")))
    return out


def agent_summary(cls: type) -> str:
    """The first line of an agent class's docstring."""
    return (inspect.getdoc(cls) or "").split("\n", 1)[0]
