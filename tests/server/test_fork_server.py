"""Forks over ``repogym serve``: RemoteEnv.fork (a new server session) and ``POST /fork``."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repogym.envs.remote import RemoteEnv, RemoteEnvError
from tests.conftest import call
from tests.envs.test_fork import ACTIONS, PROBE
from tests.server.conftest import http

TASK = "retry-zero"


def _play(env: RemoteEnv, actions: list[str]) -> list[str]:
    return [env.step(a)[0] for a in actions]


def _grade(env: RemoteEnv) -> dict:
    info = env.step(call("submit"))[4]
    return {k: info[k] for k in ("reward", "tests", "diff", "resolved")}


@pytest.fixture(scope="module")
def remotes(server):
    made = [RemoteEnv(server.url, task=TASK, max_steps=30) for _ in range(2)]
    yield made
    for env in made:
        env.close()


@settings(
    max_examples=2,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prefix=st.lists(ACTIONS, max_size=3),
    mine=st.lists(ACTIONS, max_size=2),
    theirs=st.lists(ACTIONS, min_size=1, max_size=2),
)
def test_remote_fork_is_independent_and_grades_as_its_replay(remotes, prefix, mine, theirs):
    env, replay = remotes
    env.reset(seed=0)
    _play(env, prefix)
    fork = env.fork()
    try:
        state = fork.state()
        assert state["forked_from"] == env.state()["session_id"] != state["session_id"]
        assert state["step_count"] == len(prefix) and not state["done"]
        theirs_obs = _play(fork, [*theirs, PROBE])
        mine_obs = _play(env, [*mine, PROBE])
        fork_grade = _grade(fork)
        replay.reset(seed=0)
        _play(replay, prefix)
        assert _play(replay, [*mine, PROBE]) == mine_obs
        replay.reset(seed=0)
        _play(replay, prefix)
        assert _play(replay, [*theirs, PROBE]) == theirs_obs
        assert _grade(replay) == fork_grade
    finally:
        fork.close()


def test_fork_session_is_taken_once_and_http_fork_works(server):
    env = RemoteEnv(server.url, task=TASK)
    try:
        env.reset(seed=0)
        env.step(call("bash", command="cd tests && export K=v"))
        fork = env.fork()
        sid = fork.state()["session_id"]
        other = RemoteEnv(server.url, task=TASK)
        other._adopt = sid  # a second client for the same fork is refused
        with pytest.raises(RemoteEnvError, match="already has a client"):
            other.state()
        assert fork.step(call("bash", command="pwd; echo $K"))[0].startswith(
            "/workspace/tests\nv\n"
        )
        fork.close()
    finally:
        env.close()
    status, body, _ = http(server.url + "/reset", "POST", {"task": TASK}, {"X-Session-Id": "new"})
    assert status == 200
    sid = body["session_id"]
    http(
        server.url + "/step",
        "POST",
        {"action": {"tool": "write", "args": {"path": "n.txt", "content": "hi"}}},
        {"X-Session-Id": sid},
    )
    status, state, _ = http(server.url + "/fork", "POST", None, {"X-Session-Id": sid})
    assert status == 200 and state["forked_from"] == sid and state["step_count"] == 1
    status, body, _ = http(
        server.url + "/step",
        "POST",
        {"action": {"tool": "read", "args": {"path": "n.txt"}}},
        {"X-Session-Id": state["session_id"]},
    )
    assert status == 200 and "hi" in body["observation"]["text"]
    for s in (sid, state["session_id"]):
        assert http(server.url + "/close", "POST", None, {"X-Session-Id": s})[0] == 200
    status, body, _ = http(server.url + "/fork", "POST")
    assert status == 400 and "Fix" in body["detail"]
