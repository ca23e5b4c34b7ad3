"""info["progress"] (gym.make(id, progress=True)): the share of hidden tests passing on the
workspace after each changing step, graded by the real grader in a fresh sandbox."""

from __future__ import annotations

from tests.conftest import apply_patch_actions, call


def test_progress_is_off_by_default_with_a_stable_type(make_env):
    env = make_env()
    _, info = env.reset(seed=0)
    assert info["progress"] == -1.0
    for action in (call("write", path="x.txt", content="1"), call("submit")):
        assert env.step(action)[4]["progress"] == -1.0


def test_progress_measures_changing_steps_like_the_final_grade(make_env, retry_task):
    env = make_env(progress=True, max_episode_steps=20)
    _, info = env.reset(seed=0)
    baseline = info["progress"]
    assert 0 < baseline < 1  # retry-zero: the pass_to_pass tests pass before any fix
    seen = [
        env.step(call("read", path="retry.py"))[4]["progress"],  # cannot change anything
        env.step(call("bash", command="ls"))[4]["progress"],  # changed nothing
        env.step(call("write", path="notes.txt", content="x"))[4]["progress"],
    ]
    assert seen == [-1.0, -1.0, baseline]  # changed, but no test moved
    fixed = [
        env.step(a)[4]["progress"]
        for a in apply_patch_actions(retry_task.solution_patch.read_text())
    ]
    assert fixed[-1] == 1.0
    assert env.step(call("bash", command="true"))[4]["progress"] == -1.0
    # Going back to an earlier state is measured again (from the cache).
    obs, *_, info = env.step(call("bash", command="git stash -q && git stash drop -q"))
    assert info["progress"] == baseline, obs
    *_, info = env.step(call("submit"))
    tests = info["tests"]
    assert info["progress"] == sum(s == "passed" for s in tests.values()) / len(tests)
    assert info["progress"] == baseline


def test_forks_keep_the_last_measured_state(make_env):
    env = make_env(progress=True)
    env.reset(seed=0)
    env.step(call("write", path="notes.txt", content="x"))
    fork = env.unwrapped.fork()
    try:
        # The same workspace as the original's last measure: nothing new to measure.
        assert fork.step(call("bash", command="true"))[4]["progress"] == -1.0
        assert fork.step(call("write", path="notes.txt", content="y"))[4]["progress"] >= 0
    finally:
        fork.close()
