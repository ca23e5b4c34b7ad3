"""Docker fixtures: start a private dockerd and build the base image when missing.

The session fixture ``docker_engine`` uses :mod:`repogym.sandbox.docker_setup`: an engine
that already answers is used as is; otherwise (as root) a private dockerd is started under
``/var/lib/repogym-docker`` and stopped again at the end of the session (set
``REPOGYM_KEEP_DOCKER=1`` to keep it). The image is built once with debootstrap and stays
cached in the daemon's data root. Where no engine can be had, the docker tests skip with
the reason (shown by ``-ra`` in the summary and printed right away).
"""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import pytest


@pytest.fixture(scope="session")
def docker_engine():
    """A ready engine (``docker_setup.Setup``), or a skip that says why there is none."""
    try:
        from repogym.sandbox import docker_setup

        setup = docker_setup.ensure()
    except ImportError as e:
        reason = f"docker tests skipped: the docker SDK is missing ({e}); pip install docker"
    except Exception as e:  # noqa: BLE001 - any set-up failure becomes the printed skip reason
        reason = f"docker tests skipped: no Docker engine could be started: {e}"
    else:
        yield setup
        if setup.started and not os.environ.get("REPOGYM_KEEP_DOCKER"):
            docker_setup.stop_daemon()
        return
    print(f"\n{reason}", file=sys.__stderr__, flush=True)
    pytest.skip(reason)


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
