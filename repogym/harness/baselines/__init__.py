"""Agents for the harness: the protocol, built-ins (oracle, noop, random, replay,
predictions, hf, openai, apr, forger) and ``module:Class`` loading.

``make_agent("oracle")`` or ``make_agent("my_pkg.agents:MyAgent", temperature=0.2)``.
"""

from repogym.harness.baselines.base import (
    AGENTS,
    Agent,
    AgentConfigError,
    AgentError,
    AgentOption,
    EndpointError,
    agent_options,
    agent_summary,
    make_agent,
    parse_agent_args,
    resolve_agent_class,
    tool_call,
    transport_options,
)

__all__ = [
    "AGENTS",
    "Agent",
    "AgentConfigError",
    "AgentError",
    "AgentOption",
    "EndpointError",
    "agent_options",
    "agent_summary",
    "make_agent",
    "parse_agent_args",
    "resolve_agent_class",
    "tool_call",
    "transport_options",
]
