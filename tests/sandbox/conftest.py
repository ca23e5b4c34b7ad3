"""Docker fixtures for the sandbox tests (``docker_engine`` itself is in tests/conftest.py,
shared with the adversarial suite)."""

from __future__ import annotations

import gymnasium as gym
import pytest


@pytest.fixture
def docker_env(docker_engine):
    """gym.make(..., sandbox="docker") that closes every env it made."""
    made: list[gym.Env] = []

    def _make(env_id: str = "repogym/retry-zero-v0", **kwargs: object) -> gym.Env:
        env = gym.make(env_id, sandbox="docker", **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()
