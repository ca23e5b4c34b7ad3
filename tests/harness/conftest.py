"""Shared fixtures for the harness tests: the CLI as a real subprocess, helper agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
#: Two small built-in tasks with valid gold patches (fast to grade).
TASKS = ["paginate-off-by-one", "retry-zero"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a ``repogym`` subprocess, with the helper agents importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run ``repogym ARGS`` (python -m repogym.cli) and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(**env),
        check=False,
    )


def rows_of(out: Path) -> list[dict]:
    """The rows of ``out/results.jsonl``."""
    return [
        json.loads(line)
        for line in (out / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]


@pytest.fixture
def helper_agents(monkeypatch: pytest.MonkeyPatch) -> str:
    """Make ``rg_test_agents`` importable here and in spawned workers; returns its name."""
    monkeypatch.syspath_prepend(str(HERE))
    return "rg_test_agents"
