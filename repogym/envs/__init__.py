"""The environments: RepoEnv, SuiteEnv, action parsing, grading and wrappers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from repogym.envs.repo_env import RepoEnv, SuiteEnv, TextSpace
from repogym.scenarios.task import Task


def _maybe_log(env: gym.Env, log_dir: str | Path | None) -> gym.Env:
    if log_dir is None:
        return env
    from repogym.envs.wrappers import TrajectoryLogger

    return TrajectoryLogger(env, log_dir)


def make_env(task: Task | str | Path, log_dir: str | Path | None = None, **kwargs: Any) -> gym.Env:
    """Entry point of ``repogym/<task>-v<version>``; ``log_dir`` adds a TrajectoryLogger."""
    return _maybe_log(RepoEnv(task, **kwargs), log_dir)


def make_suite_env(log_dir: str | Path | None = None, **kwargs: Any) -> gym.Env:
    """Entry point of ``repogym/Suite-v0``."""
    return _maybe_log(SuiteEnv(**kwargs), log_dir)


__all__ = ["RepoEnv", "SuiteEnv", "TextSpace", "make_env", "make_suite_env"]
