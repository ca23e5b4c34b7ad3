"""The two-role PettingZoo env (tester + fixer), with the real bwrap sandbox."""

from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from repogym.envs.info import duel_step_info
from repogym.envs.multi import FIXER, TESTER, RepoDuelEnv
from tests.conftest import apply_patch_actions, call

REPRO = "tests/test_repro.py"
VALID_TEST = """from retry import retry


def test_zero_retries_calls_once():
    calls = []

    def charge():
        calls.append(1)
        raise OSError("gateway timeout")

    try:
        retry(charge, retries=0, delay=0)
    except OSError:
        pass
    assert len(calls) == 1


def test_negative_count_is_refused():
    import pytest

    with pytest.raises(ValueError):
        retry(lambda: None, retries=-1)


def test_last_error_is_raised_and_waits_only_between_attempts():
    errors, waits = [], []

    def fail():
        errors.append(OSError(f"attempt {len(errors) + 1}"))
        raise errors[-1]

    try:
        retry(fail, retries=2, delay=1.0, sleep=waits.append)
    except OSError as exc:
        assert exc is errors[-1]
    assert waits == [1.0, 2.0]
"""
# Fails on the original and on the gold fix: it asserts something the bug report never asked.
WRONG_TEST = "import retry\n\n\ndef test_flag():\n    assert getattr(retry, 'PATCHED', False)\n"


@pytest.fixture
def duel():
    made: list[RepoDuelEnv] = []

    def _make(**kwargs) -> RepoDuelEnv:
        env = RepoDuelEnv("retry-zero", **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()


def test_parallel_api(duel):
    parallel_api_test(duel(max_steps=3), num_cycles=10)


def test_parallel_seed():
    parallel_seed_test(lambda: RepoDuelEnv(["retry-zero", "empty-mean"], max_steps=2))


def test_roles_get_their_briefs(duel):
    obs, infos = duel().reset(seed=0)
    assert set(obs) == {TESTER, FIXER}
    assert "TESTER" in obs[TESTER] and "FIXER" in obs[FIXER] and REPRO in obs[TESTER]
    assert "retries=0" in obs[FIXER] and infos[TESTER]["role"] == TESTER


def test_valid_test_and_gold_fix(duel, retry_task):
    env = duel()
    env.reset(seed=0)
    fix = apply_patch_actions(retry_task.solution_patch.read_text())
    _, rew, term, trunc, _ = env.step(
        {TESTER: call("write", path=REPRO, content=VALID_TEST), FIXER: fix[0]}
    )
    assert rew == {TESTER: 0.0, FIXER: 0.0} and not any(term.values()) and not any(trunc.values())
    obs, rew, term, _, info = env.step({TESTER: call("submit"), FIXER: fix[1]})
    assert term[TESTER] and rew[TESTER] == 1.0, obs[TESTER]
    repro = info[TESTER]["repro"]
    assert repro.pop("original") == "failed" and repro.pop("gold") == "passed"
    assert set(repro) == {"unrelated"} | {
        f"decoy:{p.relative_to(retry_task.path)}" for p in retry_task.decoys
    }
    assert set(repro.values()) == {"failed"}  # every wrong fix and the unrelated edit
    assert env.agents == [FIXER]
    _, rew, term, _, info = env.step({FIXER: call("submit")})
    assert term == {FIXER: True} and env.agents == []
    assert info[FIXER]["hidden_reward"] == 1.0 and info[FIXER]["repro_on_fix"] == "passed"
    assert rew[FIXER] == pytest.approx(1.5)
    # the tester's file is neither part of the fix nor taken for a hidden test
    assert REPRO not in info[FIXER]["diff"] and info[FIXER]["hack_flags"] == []


def test_fix_that_only_satisfies_a_wrong_test_earns_nothing_extra(duel, retry_task):
    env = duel()
    env.reset(seed=0)
    env.step(
        {
            TESTER: call("write", path=REPRO, content=WRONG_TEST),
            FIXER: call("bash", command="echo 'PATCHED = True' >> retry.py"),
        }
    )
    obs, rew, *_, info = env.step(
        {TESTER: call("submit"), FIXER: call("bash", command=f"python -m pytest -q {REPRO}")}
    )
    assert rew[TESTER] == 0.0 and info[TESTER]["repro"] == {
        "original": "failed",
        "gold": "failed",
    }  # stops there
    assert "1 passed" in obs[FIXER]  # the fixer does satisfy the wrong test
    obs, rew, *_, info = env.step({FIXER: call("submit")})
    assert info[FIXER]["repro_on_fix"] == "passed" and info[FIXER]["repro_valid"] is False
    assert info[FIXER]["repro_bonus"] == 0.0 and rew[FIXER] == info[FIXER]["hidden_reward"] == 0.0


def test_budget_grades_the_tester_and_fixer_uses_the_current_file(duel, retry_task):
    env = duel(max_steps=3)
    env.reset(seed=0)
    fix = apply_patch_actions(retry_task.solution_patch.read_text())
    env.step({TESTER: call("write", path=REPRO, content=VALID_TEST), FIXER: fix[0]})
    env.step({TESTER: call("bash", command="true"), FIXER: fix[1]})
    _, rew, term, trunc, info = env.step({TESTER: call("read", path=REPRO), FIXER: call("submit")})
    assert term == {TESTER: False, FIXER: True} and trunc[TESTER]
    assert info[TESTER]["truncated_reason"] == "max_steps" and rew[TESTER] == 1.0
    assert rew[FIXER] == pytest.approx(1.5)  # graded with the file as it stood
    assert env.agents == []


def test_broken_test_is_an_error_not_a_failure(duel):
    env = duel()
    env.reset(seed=0)
    env.step(
        {
            TESTER: call("write", path=REPRO, content="def test_x(:\n"),
            FIXER: call("bash", command="true"),
        }
    )
    _, rew, *_, info = env.step({TESTER: call("submit"), FIXER: "not a tool call"})
    assert rew[TESTER] == 0.0 and info[TESTER]["repro"] == {"original": "error"}
    assert info[FIXER]["action_error"]
    # one schema: every key for both agents, each with the type its neutral value has
    neutral = duel_step_info(0)
    for agent_info in info.values():
        assert set(agent_info) == set(neutral)
        assert all(type(agent_info[k]) is type(v) for k, v in neutral.items()), agent_info
    assert info[FIXER]["tool"] == "" and info[FIXER]["exit_code"] == -1


def test_missing_action_and_bad_repro_path(duel):
    env = duel()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="no action for live agent"):
        env.step({TESTER: call("bash", command="true")})
    with pytest.raises(ValueError, match="relative pytest file"):
        RepoDuelEnv("retry-zero", repro_path="/abs/test_x.py")


GIT_PEEK = (
    "import subprocess\n\n\ndef test_changed():\n    out = subprocess.run(['git', 'diff', "
    "'HEAD'], capture_output=True, text=True).stdout\n    assert out.strip()\n"
)
ANY_EDIT = (
    "import pathlib\n\n\ndef test_changed():\n"
    "    src = pathlib.Path('retry.py').read_text()\n"
    "    assert 'retries' in src and len(src) != {size}\n"
)


def test_tests_that_only_notice_a_change_are_not_reproductions(duel, retry_task):
    env = duel()
    env.reset(seed=0)
    size = len((retry_task.repo_dir / "retry.py").read_text())
    for test in (GIT_PEEK, ANY_EDIT.format(size=size)):
        valid, details = env.validate_test(test)
        assert not valid, (test, details)


def test_fixer_bonus_needs_a_resolving_fix(duel, retry_task):
    env = duel()
    env.reset(seed=0)
    good = (retry_task.tests_dir / "test_retry.py").read_text()
    env.step(
        {
            TESTER: call("write", path=REPRO, content=good),
            FIXER: call("bash", command="echo note >> README.md"),
        }
    )
    *_, infos = env.step({TESTER: call("submit"), FIXER: call("submit")})
    assert infos[FIXER]["hidden_reward"] < 1.0 and infos[FIXER]["repro_bonus"] == 0.0


LISTENER = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)


def free():
    fds = []
    while len(fds) < 256:
        fd = libc.inotify_init()
        if fd < 0:
            break
        fds.append(fd)
    for fd in fds:
        os.close(fd)
    return len(fds)


base, end = free(), time.time() + 90
while time.time() < end:
    if free() < base - 30:
        open("LEAK", "w").write("a check ran with a changed retry.py")
        break
    time.sleep(0.02)
"""
#: The tester's test: with a fix applied (the gold run of its validation), it holds 60
#: inotify instances for two seconds, a signal a process of the same uid can count.
SIGNALLER = """import ctypes, hashlib, pathlib, time

ORIGINAL = {digest!r}


def test_signal():
    changed = hashlib.sha256(pathlib.Path("retry.py").read_bytes()).hexdigest() != ORIGINAL
    if changed:
        libc = ctypes.CDLL(None)
        held = [libc.inotify_init() for _ in range(60)]
        time.sleep(2)
    assert changed
"""


def test_a_check_that_sees_the_gold_patch_cannot_signal_to_the_live_episode(duel, retry_task):
    """The tester's validation runs its test with the gold patch applied. A covert channel
    through a per-user kernel counter (inotify instances of the uid) once leaked that run to
    a listener the fixer left running in the shared sandbox. Checks now run under a uid of
    their own while every process of the episode is frozen."""
    import hashlib

    env = duel()
    env.reset(seed=0)
    digest = hashlib.sha256((retry_task.repo_dir / "retry.py").read_bytes()).hexdigest()
    env.step(
        {
            TESTER: call("write", path=REPRO, content=SIGNALLER.format(digest=digest)),
            FIXER: call("write", path="listen.py", content=LISTENER),
        }
    )
    env.step(
        {
            TESTER: call("bash", command="true"),
            FIXER: call(
                "bash", command="nohup python3 listen.py >/dev/null 2>&1 & sleep 1; echo started"
            ),
        }
    )
    _, _, _, _, info = env.step({TESTER: call("submit"), FIXER: call("bash", command="true")})
    assert info[TESTER]["repro"]["gold"] == "passed"  # the signalling run did happen
    obs, *_ = env.step(
        {
            FIXER: call(
                "bash",
                command="sleep 1; cat LEAK 2>/dev/null || "
                "echo no-leak; pgrep -f listen.py "
                ">/dev/null && echo alive",
            )
        }
    )
    assert "no-leak" in obs[FIXER] and "alive" in obs[FIXER], obs[FIXER]
