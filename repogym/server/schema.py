"""The JSON shapes ``repogym serve`` publishes at ``GET /schema`` and accepts over HTTP.

They follow OpenEnv's models (``Action``/``Observation``/``State`` with ``metadata``,
``done``, ``reward``, ``episode_id``, ``step_count``), so OpenEnv tooling reads them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from repogym.envs.actions import TOOLS


def tool_specs() -> list[dict[str, Any]]:
    """The env's tools as JSON-schema function specs (name, description, parameters)."""
    return [
        {"name": t.name, "description": t.description, "parameters": t.parameters()}
        for t in TOOLS.values()
    ]


class RepoAction(BaseModel):
    """One agent action: its raw text (parsed by the env), or a structured tool call."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"tools": tool_specs()})

    text: str | None = Field(
        None,
        description="The agent's raw output holding one tool call "
        '(JSON {"tool", "args"}, OpenAI {"name", "arguments"}, or a '
        "```bash block); a malformed call comes back as an observation.",
    )
    tool: str | None = Field(None, description="A tool name (instead of text).")
    args: dict[str, Any] | None = Field(None, description="The tool's arguments.")
    metadata: dict[str, Any] | None = Field(None, description="Ignored by the env.")
    type: Literal["list_tools", "call_tool"] | None = Field(
        None,
        description="OpenEnv's MCP actions over /ws (its MCPToolClient): list_tools "
        "answers the tools without a step; call_tool steps with tool_name and arguments.",
    )
    tool_name: str | None = Field(None, description="With type call_tool: the tool.")
    arguments: dict[str, Any] | None = Field(
        None, description="With type call_tool: its arguments."
    )


class RepoObservation(BaseModel):
    """What a reset or step returns (OpenEnv's observation, with repogym's fields)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        description="The observation string (statement + tools after reset; "
        "the tool's output after a step)."
    )
    info: dict[str, Any] = Field(description="The env's info dict (same keys as in-process).")
    terminated: bool = Field(description="The episode ended by submit.")
    truncated: bool = Field(
        description="The episode ended by the step budget or a sandbox "
        "failure (info['truncated_reason'] says which)."
    )
    done: bool = Field(False, description="terminated or truncated.")
    reward: float | None = Field(None, description="Reward of the step (None after reset).")
    metadata: dict[str, Any] = Field(default_factory=dict)


class RepoState(BaseModel):
    """The session's state: no hidden tests, no gold patch."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    step_count: int = 0
    session_id: str | None = Field(None, description="None for a stateless GET /state.")
    done: bool
    task: dict[str, Any] | None = Field(None, description="Task.info() of the current task.")
    reward_mode: str | None = None
    forked_from: str | None = Field(None, description="The session this one was forked from.")


class ResetBody(BaseModel):
    """``POST /reset`` (OpenEnv's ResetRequest plus the task and per-session settings)."""

    model_config = ConfigDict(extra="forbid")

    seed: int | None = Field(None, ge=0)
    episode_id: str | None = Field(None, max_length=255)
    task: str | None = None
    options: dict[str, Any] | None = None
    reward_mode: str | None = None
    max_steps: int | None = Field(None, ge=1)


class StepBody(BaseModel):
    """``POST /step`` (OpenEnv's StepRequest)."""

    model_config = ConfigDict(extra="forbid")

    action: dict[str, Any]
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="Accepted and ignored: the sandbox's own limits bound every command.",
    )
    request_id: str | None = Field(None, max_length=255)
