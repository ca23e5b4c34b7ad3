"""Agent construction, its errors, and the option listing of ``repogym agents``."""

from __future__ import annotations

import json

import pytest

from repogym.harness.baselines import (
    AGENTS,
    AgentConfigError,
    agent_options,
    make_agent,
    resolve_agent_class,
)

from .conftest import run_cli


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_option_of_every_built_in_is_documented(name: str) -> None:
    cls = resolve_agent_class(name)
    for option in agent_options(cls):
        assert option.doc, f"{name}: option {option.name!r} has no entry in the Args section"


def test_openai_options_are_listed_with_defaults() -> None:
    opts = {o.name: o for o in agent_options(resolve_agent_class("openai"))}
    assert set(opts) == {
        "base_url",
        "model",
        "api_key_env",
        "temperature",
        "max_tokens",
        "tools",
        "timeout_s",
        "max_retries",
        "backoff_s",
        "system_prompt",
    }
    assert opts["max_tokens"].default == "1024" and "Completion tokens" in opts["max_tokens"].doc


def test_cli_lists_agents_and_run_help_shows_them() -> None:
    proc = run_cli("agents")
    assert proc.returncode == 0, proc.stderr
    for name in AGENTS:
        assert f"{name}: " in proc.stdout
    assert "api_key_env='OPENAI_API_KEY'" in proc.stdout
    proc = run_cli("agents", "openai", "--json")
    data = json.loads(proc.stdout)
    assert [o["name"] for o in data["openai"]["options"]][:2] == ["base_url", "model"]
    helptext = run_cli("run", "--help").stdout
    assert "openai: " in helptext and "base_url=None" in helptext and "p_submit=0.2" in helptext
    proc = run_cli("agents", "no.such:Agent")
    assert proc.returncode == 2 and "cannot import agent module" in proc.stdout


def test_unknown_option_names_the_valid_ones() -> None:
    with pytest.raises(AgentConfigError, match=r"no option\(s\) \['temprature'\].*'temperature'"):
        make_agent("openai", base_url="http://x/v1", model="m", temprature=0.1)
