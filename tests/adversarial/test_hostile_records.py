"""Attack class 5b: hostile sealed-check records, written by the graded code, end in a verdict.

The sealed checks' records come from the verifier's process, which runs the agent's code.
A record the grader cannot read as a value (a fraction with a zero denominator, an
exception record that is no class at all) must end as a check that did not hold: the
episode's ``submit`` returns a reward, never an exception (Gymnasium's contract), and earns
no more than noop. tests/grading/test_seal_records.py checks the same rule over generated
records without a sandbox.
"""

from __future__ import annotations

import gymnasium as gym

from repogym.envs.repo_env import RepoEnv
from tests.adversarial.conftest import close_and_check
from tests.conftest import call
from tests.scenarios._tasks import write_task

#: Replaces the sealed-check runtime: every check reports 1/0, every ``raises`` block a
#: record whose ``raised`` is a number.
HOSTILE = """
def _rg_hostile():
    import sys
    seal = sys.modules.get("_repogym_seal")
    if seal is None:
        return
    runtime = seal.check.__self__

    def check(cid, value):
        runtime._send(cid, {"v": {"q": ["1", "0"]}, "is": None, "truth": True, "shown": "1/0"})

    class Raises:
        def __init__(self, cid):
            self.cid = cid

        def __enter__(self):
            return None

        def __exit__(self, t, v, tb):
            runtime._send(self.cid, {"raised": 5, "message": ""})
            return True

    seal.check, seal.raises = check, Raises


_rg_hostile()
"""

APPROX_TESTS = """\
import pytest

from mod import clamp


def test_upper():
    assert clamp(15, 0, 10) == pytest.approx(10.0)
    assert clamp(12, 0, 10) in (10, 10.0)


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def _submit_with(env: gym.Env, module: str, payload: str) -> tuple[float, dict]:
    """Append ``payload`` to ``module`` in the episode's workspace, then submit."""
    env.reset(seed=0)
    *_, info = env.step(call("bash", command=f"cat >> {module} <<'RGEOF'\n{payload}\nRGEOF"))
    assert info.get("exit_code") == 0, info
    _, reward, term, _, info = env.step(call("submit"))
    assert term
    return reward, info


def test_hostile_records_on_a_builtin_end_in_a_verdict():
    """retry-zero's value and ``raises`` checks all receive records the grader cannot read
    as values; before, a ``raises`` record whose ``raised`` was not a list raised TypeError
    out of ``env.step``."""
    env = gym.make("repogym/retry-zero-v0", sandbox="bwrap")
    try:
        reward, info = _submit_with(env, "retry.py", HOSTILE)
    finally:
        close_and_check(env)
    assert not info["infra_error"] and reward == 0.0, info
    assert info["reward_breakdown"].get("fail_to_pass") == 0.0, info


def test_a_zero_denominator_for_approx_and_in_checks_ends_in_a_verdict(tmp_path):
    """``== pytest.approx(...)`` and ``in (...)`` checks decode the value the sandbox sent;
    before, ``{"q": ["1", "0"]}`` raised ZeroDivisionError out of ``env.step``."""
    folder = write_task(tmp_path / "approx-task", tests=APPROX_TESTS)
    env = RepoEnv(folder, sandbox="bwrap")
    try:
        reward, info = _submit_with(env, "mod.py", HOSTILE)
    finally:
        close_and_check(env)
    assert not info["infra_error"] and reward == 0.0, info
    assert info["tests"] == {
        "tests/test_mod.py::test_upper": "failed",
        "tests/test_mod.py::test_inside": "failed",
    }, info
