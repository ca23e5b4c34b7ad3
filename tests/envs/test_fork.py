"""Forks and snapshots of a running episode (RepoEnv.fork/snapshot/restore), real bwrap.

The property: fork an episode at a random step and act differently in both; the original
behaves exactly as an episode that never forked, and grading the fork equals grading its
actions replayed from reset.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import call

WORDS = st.sampled_from(["a", "b", "x y", "retries=1", "$HOME", "é"])
FILES = st.sampled_from(["f.txt", "sub/g.txt", "retry.py", "README.md", "/tmp/t.txt"])
DIRS = st.sampled_from(["sub", "sub/deep", "..", "/workspace", "/tmp"])
NAMES = st.sampled_from(["V1", "V2", "PAGER"])

ACTIONS = st.one_of(
    st.builds(lambda w, f: call("bash", command=f"echo {w!r} >> {f}"), WORDS, FILES),
    st.builds(lambda d: call("bash", command=f"mkdir -p {d}; cd {d}"), DIRS),
    st.builds(lambda n, w: call("bash", command=f"export {n}={w!r}"), NAMES, WORDS),
    st.builds(lambda n: call("bash", command=f"unset {n}"), NAMES),
    st.builds(lambda w: call("bash", command=f"fn() {{ echo {w!r}; }}"), WORDS),
    st.builds(lambda f: call("bash", command=f"rm -f {f}"), FILES),
    st.builds(lambda f, w: call("write", path=f, content=w), FILES, WORDS),
    st.builds(lambda w: call("edit", path="retry.py", old="retries", new=w), WORDS),
)
#: What an episode's state looks like from inside: the shell's folder, variables and
#: function, and every file of the workspace and /tmp that the actions touch.
PROBE = call(
    "bash",
    command=(
        "pwd; env | grep -E '^(V1|V2|PAGER|OLDPWD)=' | sort; type fn 2>&1 | tail -n +2; "
        "cd /workspace && git status --porcelain; "
        "cat f.txt sub/g.txt retry.py README.md /tmp/t.txt 2>&1 | md5sum"
    ),
)


@pytest.fixture(scope="module")
def envs():
    """Two retry-zero envs: the one that forks and the one that replays from reset."""
    made = [gym.make("repogym/retry-zero-v0", max_episode_steps=40) for _ in range(2)]
    yield made
    for env in made:
        env.close()


def _play(env: gym.Env, actions: list[str]) -> list[str]:
    return [env.step(a)[0] for a in actions]


def _grade(env: gym.Env) -> dict:
    info = env.step(call("submit"))[4]
    return {k: info[k] for k in ("reward", "tests", "diff", "resolved")}


@settings(
    max_examples=4,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prefix=st.lists(ACTIONS, max_size=5),
    mine=st.lists(ACTIONS, max_size=3),
    theirs=st.lists(ACTIONS, min_size=1, max_size=3),
)
def test_fork_is_independent_and_grades_as_its_replay(envs, prefix, mine, theirs):
    env, replay = envs
    env.reset(seed=0)
    _play(env, prefix)
    fork = env.unwrapped.fork()
    try:
        assert fork.unwrapped is fork and fork is not env.unwrapped
        assert fork._steps == env.unwrapped._steps == len(prefix)
        assert fork._budget() == env.unwrapped._budget() == 40
        assert fork.render() == env.unwrapped.render()
        theirs_obs = _play(fork, [*theirs, PROBE])
        mine_obs = _play(env, [*mine, PROBE])
        fork_grade = _grade(fork)
        # The original never noticed the fork: it acts as an episode that never forked.
        replay.reset(seed=0)
        _play(replay, prefix)
        assert _play(replay, [*mine, PROBE]) == mine_obs
        # The fork is its actions replayed from reset, graded alike.
        replay.reset(seed=0)
        _play(replay, prefix)
        assert _play(replay, [*theirs, PROBE]) == theirs_obs
        assert _grade(replay) == fork_grade
    finally:
        fork.close()


def test_fork_keeps_shell_options_aliases_umask_and_errexit(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(
        call(
            "bash",
            command="set -o pipefail; set +o hashall; shopt -s nullglob; "
            "alias hi='echo hello'; umask 027; unset PAGER; set -e",
        )
    )
    fork = env.unwrapped.fork()
    try:
        probe = (
            "echo $SHELLOPTS; shopt -q nullglob && echo nullglob; hi; umask; "
            "echo pager=${PAGER-unset}"
        )
        want = env.step(call("bash", command=probe))[0]
        assert fork.step(call("bash", command=probe))[0] == want
        assert "pipefail" in want and "hashall" not in want and "errexit" in want
        assert "nullglob\nhello\n0027\npager=unset\n" in want
        obs = fork.step(call("bash", command="false"))[0]  # errexit: the shell ends
        assert "the shell exited" in obs
    finally:
        fork.close()


def test_fork_keeps_the_shell_state_and_step_budget(make_env):
    env = make_env(max_episode_steps=4)
    env.reset(seed=0)
    env.step(
        call(
            "bash",
            command="mkdir -p sub && cd sub && export FOO=bar && "
            "greet() { echo hi $1; } && echo one > here.txt",
        )
    )
    fork = env.unwrapped.fork()
    try:
        obs = fork.step(call("bash", command="pwd; echo $FOO; greet you; cat here.txt"))[0]
        assert obs.startswith("/workspace/sub\nbar\nhi you\none\n")
        fork.step(call("bash", command="echo two > here.txt; unset FOO"))
        obs = env.step(call("bash", command="echo $FOO; cat here.txt"))[0]
        assert obs.startswith("bar\none\n")  # the fork's actions never reach the original
        # Same remaining budget: both truncate (and grade) at the fourth step.
        *_, trunc, info = fork.step(call("bash", command="true"))
        assert trunc and info["truncated_reason"] == "max_steps" and "reward" in info
        assert not env.step(call("bash", command="true"))[3]
        assert env.step(call("bash", command="true"))[3]
    finally:
        fork.close()


def test_snapshot_restore_rewinds_the_episode(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(call("bash", command="cd tests && export X=1 && echo kept > /tmp/k"))
    snap = env.unwrapped.snapshot()
    try:
        env.step(call("bash", command="cd / && unset X && rm -rf /workspace/* /tmp/k"))
        for _ in range(2):  # a snapshot can be restored more than once
            env.unwrapped.restore(snap)
            assert env.unwrapped._steps == 1
            obs = env.step(call("bash", command="pwd; echo $X; cat /tmp/k; ls /workspace"))[0]
            assert obs.startswith("/workspace/tests\n1\nkept\nREADME.md\n")
            info = env.step(call("submit"))[4]
            assert info["diff"] == ""
    finally:
        snap.close()


def test_fork_before_reset_or_after_the_end_says_how_to_fix(make_env):
    env = make_env()
    with pytest.raises(gym.error.ResetNeeded, match="Fix: call reset"):
        env.unwrapped.fork()
    env.reset(seed=0)
    env.step(call("submit"))
    with pytest.raises(gym.error.ResetNeeded, match="Fix: call reset"):
        env.unwrapped.snapshot()


def test_closing_the_original_leaves_the_fork_working(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(call("write", path="new.txt", content="x"))
    fork = env.unwrapped.fork()
    try:
        env.close()  # frees the original's sandbox; the shared templates stay for the fork
        assert "x" in fork.step(call("read", path="new.txt"))[0]
        assert "new.txt" in fork.step(call("submit"))[4]["diff"]
        fork.reset(seed=0)  # and it can start new episodes
        assert fork.step(call("bash", command="ls new.txt"))[4]["exit_code"] != 0
    finally:
        fork.close()


def test_background_jobs_stay_with_the_original(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(call("bash", command="(while :; do echo x >> /tmp/log; sleep 0.05; done) & sleep 0.3"))
    fork = env.unwrapped.fork()  # the original is frozen while its files are copied
    try:
        count = "sleep 0.5; wc -l < /tmp/log; jobs -p | wc -l"
        first = fork.step(call("bash", command="wc -l < /tmp/log"))[0].split()[0]
        lines, jobs = fork.step(call("bash", command=count))[0].split()[:2]
        assert lines == first and jobs == "0"  # nothing of the job runs in the fork
        lines, jobs = env.step(call("bash", command=count))[0].split()[:2]
        assert int(lines) > int(first) and jobs == "1"
    finally:
        fork.close()


def test_a_snapshot_outlives_its_env(make_env):
    env = make_env()
    env.reset(seed=0)
    env.step(call("write", path="new.txt", content="kept"))
    snap = env.unwrapped.snapshot()
    try:
        env.close()  # frees the env's sandbox; the snapshot keeps the templates
        env.unwrapped.restore(snap)
        assert "kept" in env.step(call("read", path="new.txt"))[0]
    finally:
        snap.close()
    assert "new.txt" in env.step(call("submit"))[4]["diff"]  # the restored episode lives on
