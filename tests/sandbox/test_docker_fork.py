"""RepoEnv.fork/snapshot/restore on the docker backend (skips without a Docker engine)."""

from __future__ import annotations

import pytest

from tests.conftest import call

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]


def test_fork_copies_files_and_shell_state_and_stays_independent(docker_env):
    env = docker_env(max_episode_steps=10)
    env.reset(seed=0)
    env.step(
        call(
            "bash",
            command="mkdir -p sub && cd sub && export FOO=bar && "
            "echo one > here.txt && rm ../README.md",
        )
    )
    fork = env.unwrapped.fork()
    try:
        obs = fork.step(
            call("bash", command="pwd; echo $FOO; cat here.txt; ls ..; echo two > here.txt")
        )[0]
        assert obs.startswith("/workspace/sub\nbar\none\n") and "README.md" not in obs
        assert env.step(call("bash", command="cat here.txt"))[0].startswith("one\n")
        snap = env.unwrapped.snapshot()
        try:
            env.step(call("bash", command="rm here.txt"))
            env.unwrapped.restore(snap)
            assert env.step(call("bash", command="cat here.txt"))[0].startswith("one\n")
        finally:
            snap.close()
        assert "two" in fork.step(call("submit"))[4]["diff"]
    finally:
        fork.close()
