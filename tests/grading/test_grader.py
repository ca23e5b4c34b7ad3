"""Grading: gold/alternatives pass, noop/decoys do not, hacks are flagged, crashes are infra."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repogym.grading import grader
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios import patches
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.task import TestSpec
from tests.conftest import apply_patch_actions, call, diff_of

#: Graded here in every reward mode; every built-in's noop, gold, alternatives and decoys are
#: graded by the validation gate (tests/quality/test_builtin_valid.py), and the modes agree
#: on full reward for any outcomes (test_the_modes_agree_on_full_reward).
CORE_TASKS = ["retry-zero", "multi-file-config"]


@pytest.fixture(scope="module")
def grade():
    cache = TemplateCache()

    def _grade(task_id: str, diff: str, mode: str = "binary") -> grader.GradeResult:
        task = registered_tasks()[task_id]
        return grader.grade(
            task,
            cache.get(task.repo_dir),
            diff,
            mode=mode,
            make_sandbox=lambda spec: make_sandbox("bwrap", spec),
        )

    yield _grade
    cache.close()


_STATUS = st.sampled_from(["passed", "failed", "error", "skipped", "missing"])


@given(
    f2p=st.lists(_STATUS, min_size=1, max_size=4),
    p2p=st.lists(_STATUS, max_size=4),
    weights=st.lists(st.floats(0.1, 10), min_size=8, max_size=8),
)
def test_the_modes_agree_on_full_reward(f2p, p2p, weights):
    """Binary, partial and f2p give 1.0 exactly when every listed test passed, so a patch
    that falls short in one mode falls short in all (weights only move partial credit)."""
    ids_f, ids_p = [f"f{i}" for i in range(len(f2p))], [f"p{i}" for i in range(len(p2p))]
    tests = dict(zip(ids_f, f2p, strict=True)) | dict(zip(ids_p, p2p, strict=True))
    weighted = dict(zip(ids_f + ids_p, weights, strict=False))  # 8 weights, up to 8 tests
    v = TestSpec(
        command="pytest",
        tests_dest="tests",
        timeout_s=1,
        fail_to_pass=tuple(ids_f),
        pass_to_pass=tuple(ids_p),
        weights=weighted,
    )
    everything = all(s == "passed" for s in tests.values())
    for mode in grader.REWARD_MODES:
        reward = grader.score(tests, v, mode)[0]
        assert (reward == 1.0) == everything, (mode, tests, reward)
        assert 0.0 <= reward <= 1.0


@pytest.mark.parametrize("task_id", CORE_TASKS)
def test_gold_and_alternatives_full_reward_in_every_mode(grade, task_id):
    task = registered_tasks()[task_id]
    assert task.alternatives and task.decoys
    for patch in [task.solution_patch, *task.alternatives]:
        res = grade(task_id, patch.read_text(), "partial")
        assert res.reward == 1.0 and res.resolved, (patch.name, res.tests)
        assert set(res.rewards(task.test_spec).values()) == {1.0}
        assert res.hack_flags == [] and res.infra_error is None


@pytest.mark.parametrize("task_id", CORE_TASKS)
def test_noop_and_decoys_fall_short(grade, task_id):
    task = registered_tasks()[task_id]
    for name, diff in [("noop", ""), *[(d.name, d.read_text()) for d in task.decoys]]:
        res = grade(task_id, diff, "f2p")
        assert not res.resolved, (name, res.tests)
        assert max(res.rewards(task.test_spec).values()) < 1.0, (name, res.tests)
        if name == "noop":
            assert all(res.tests[t] != "passed" for t in task.test_spec.fail_to_pass)
            assert all(res.tests[t] == "passed" for t in task.test_spec.pass_to_pass)


def test_test_gaming_decoys_are_flagged(grade):
    task = registered_tasks()["retry-zero"]
    decoys = {d.stem: d.read_text() for d in task.decoys}
    forge = grade("retry-zero", decoys["conftest_forge"])
    assert "conftest" in forge.hack_flags and forge.reward == 0.0
    empty = grade("retry-zero", decoys["empty_tests"])
    assert "tests_modified" in empty.hack_flags and empty.reward == 0.0
    assert empty.tests["tests/test_retry.py::test_zero_disables_retries"] == "failed"


def _added_file(path: str, content: str) -> str:
    lines = content.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_customize_pth_and_config_are_kept_but_never_read(grade):
    gold = registered_tasks()["retry-zero"].solution_patch.read_text()
    extra = (
        _added_file("sitecustomize.py", "raise SystemExit(3)")
        + _added_file("evil.pth", "import sys; sys.exit(3)")
        + _added_file("pytest.ini", "[pytest]\naddopts = -p no:python")
    )
    res = grade("retry-zero", gold + extra)
    assert res.hack_flags == ["pth_file", "pytest_config", "sitecustomize"]
    assert res.reward == 1.0  # applied, but the verifier reads none of them


FORGE_CHANNEL = """
import json, os, stat

def _forge():
    names = ("test_zero_disables_retries", "test_negative_count_is_rejected",
             "test_positive_count_makes_exactly_that_many_retries", "test_default_is_preserved")
    lines = [json.dumps({"case": f"tests/test_retry.py::{n}", "when": w, "outcome": "passed",
                         "xfail": False}) for n in names for w in ("setup", "call", "teardown")]
    data = ("\\n".join(lines + [json.dumps({"exit": 0})]) + "\\n").encode()
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, data)
        except OSError:
            pass
    os._exit(0)

_forge()
"""


def _with_module(tmp_path, name: str, code: str) -> str:
    """A diff that adds module ``name`` and imports it from the code under test."""
    repo = registered_tasks()["retry-zero"].repo_dir
    source = (repo / "retry.py").read_text() + f"\nimport {name}  # noqa: E402\n"
    return diff_of(repo, {f"{name}.py": code, "retry.py": source}, tmp_path / "work")


def test_records_forged_on_every_pipe_then_exit_0_are_not_trusted(grade, tmp_path):
    res = grade("retry-zero", _with_module(tmp_path, "forge_helper", FORGE_CHANNEL))
    assert "forged_results" in res.hack_flags, (res.hack_flags, res.test_output[-800:])
    assert res.reward == 0.0 and not res.resolved and res.untrusted
    assert set(res.tests.values()) == {"missing"}


def test_crashed_sandbox_is_infra_error_not_a_score(make_env):
    env = make_env()
    env.reset(seed=0)
    workspace = env.unwrapped.session.sandbox.workspace
    subprocess.run(["umount", "-l", str(workspace.path)], check=False)
    subprocess.run(["rm", "-rf", str(workspace.path)], check=False)
    obs, _r, _term, trunc, info = env.step(call("bash", command="ls"))
    assert trunc and info["infra_error"] and info["truncated_reason"] == "infra_error"
    assert "sandbox failed" in obs


def test_agent_breaking_git_is_graded_as_empty_diff(make_env, retry_task):
    env = make_env()
    env.reset(seed=0)
    for action in apply_patch_actions(retry_task.solution_patch.read_text()):
        env.step(action)
    env.step(call("bash", command="rm -rf .git && git init -q && echo junk > .git/HEAD"))
    _, r, _, _, info = env.step(call("submit"))
    assert r == 1.0 and info["infra_error"] == ""  # the diff is taken against pristine git


def test_junit_key_mapping():
    assert patches.junit_key("tests/test_a.py::test_x") == ("tests.test_a", "test_x")
    assert patches.junit_key("tests/test_a.py::TestC::test_y[1-2]") == (
        "tests.test_a.TestC",
        "test_y[1-2]",
    )


def test_split_diff_and_score_closed_forms():
    task = registered_tasks()["retry-zero"]
    v = task.test_spec
    f2p, p2p = v.fail_to_pass, v.pass_to_pass
    tests = {f2p[0]: "passed", f2p[1]: "failed", p2p[0]: "passed", p2p[1]: "passed"}
    assert grader.score(tests, v, "binary")[0] == 0.0
    assert grader.score(tests, v, "partial")[0] == 0.75
    assert grader.score(tests, v, "f2p")[0] == 0.5
    tests[p2p[1]] = "failed"
    assert grader.score(tests, v, "f2p")[0] == 0.0
    parts = patches.split_diff(task.solution_patch.read_text() + _added_file("x.py", "a"))
    assert [p.new for p in parts][-1] == "x.py"


def test_the_partial_modes_count_an_unwitnessed_test_only_once_the_witnessed_ones_pass():
    """A fail_to_pass test whose failure at noop no value seal shows passes on a bit a forger
    can set: it counts as failed in ``partial`` and ``f2p`` until every witnessed test
    passes, then as what it is."""
    v = registered_tasks()["retry-zero"].test_spec
    (seen, bit), p2p = v.fail_to_pass[:2], v.pass_to_pass
    flipped = {seen: "failed", bit: "passed", p2p[0]: "passed", p2p[1]: "passed"}
    noop = {**flipped, bit: "failed"}
    for mode in grader.REWARD_MODES:
        assert grader.score(flipped, v, mode, [seen]) == grader.score(noop, v, mode, [seen])
    assert grader.score(flipped, v, "partial", [seen])[0] == 0.5  # the two p2p of four
    assert grader.score(flipped, v, "partial")[0] == 0.75  # every test witnessed: as before
    assert grader.score(flipped, v, "partial", [seen, bit])[0] == 0.75
    fixed = {**flipped, seen: "passed"}
    assert grader.score(fixed, v, "partial", [seen])[0] == 1.0
    assert grader.score({**fixed, bit: "failed"}, v, "partial", [seen])[0] == 0.75
    assert grader.score({**fixed, bit: "failed"}, v, "f2p", [seen])[0] == 0.5
    assert grader.score({**fixed, bit: "failed"}, v, "binary", [seen])[0] == 0.0
    # no witnessed test at all (noop's run showed none, or the strongest attack passed every
    # one noop showed): a fail_to_pass test counts only once every test passes
    assert grader.score(flipped, v, "partial", [])[0] == 0.5
    forged = {**flipped, seen: "passed", p2p[1]: "failed"}  # every f2p flipped, a p2p broken
    assert (
        grader.score(forged, v, "partial", [])[0] == 0.25 < grader.score(noop, v, "partial", [])[0]
    )
    assert grader.score(forged, v, "partial", [seen, bit])[0] == 0.75
    assert grader.score({**forged, p2p[1]: "passed"}, v, "partial", [])[0] == 1.0


def test_agent_cannot_fake_an_infra_error(make_env):
    env = make_env()
    env.reset(seed=0)
    for fd in range(3, 10):
        env.step(call("bash", command=f"echo started >&{fd} 2>/dev/null; true"))
    _obs, _r, _term, trunc, info = env.step(
        call("bash", command='echo "bwrap: Can\'t find source path /x" >&2; exit 1')
    )
    assert not trunc and not info["infra_error"] and info["exit_code"] == 1


DOWN_CLASSES = """

import unittest

import pytest


@pytest.mark.skipif(True, reason="an optional dependency the environment lacks")
class TestNeedsColorama:
    def test_colours(self):
        assert clamp(1, 0, 2) == 1


class TestNeedsItsEntryPoints(unittest.TestCase):
    def setUp(self):
        raise ModuleNotFoundError("No module named 'meta'")  # as markdown's, without them

    def test_meta(self):
        self.assertEqual(clamp(1, 0, 2), 1)
"""


def test_canaries_of_a_class_that_did_not_run_whole_do_not_distrust_the_run(tmp_path):
    """structlog skips test classes whose optional dependency is missing; markdown's
    extension classes failed to set up without its entry points. Their canaries could
    not run as planted either; grading trusted no run of such a package (every task
    dropped). The rest of the run is judged as usual, and nothing of those classes earns."""
    from repogym.sandbox.workspace import TemplateCache
    from repogym.scenarios.task import load_task
    from tests.scenarios._tasks import TESTS, write_task

    task = load_task(write_task(tmp_path / "down", tests=TESTS + DOWN_CLASSES))
    cache = TemplateCache()
    try:
        results = {
            name: grader.grade(
                task,
                cache.get(task.repo_dir),
                diff,
                mode="binary",
                make_sandbox=lambda spec: make_sandbox("bwrap", spec),
            )
            for name, diff in (("noop", ""), ("gold", (task.path / "solution.patch").read_text()))
        }
    finally:
        cache.close()
    assert not results["noop"].untrusted and results["noop"].reward == 0.0
    assert not results["gold"].untrusted and results["gold"].reward == 1.0, results["gold"]
    assert results["gold"].hack_flags == []
