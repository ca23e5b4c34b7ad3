"""The typed records at the env's seams: every hack flag is a ``HackFlag``, every step's
``info`` follows ``StepInfo`` (real bwrap env), tools hand back a ``ToolOutcome``."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import gymnasium as gym
import pytest

import repogym
from repogym.envs import grader, tools
from repogym.envs import verifier as vr
from repogym.envs.actions import TOOLS
from repogym.envs.canaries import Canary, Masked
from repogym.envs.info import (
    HackFlag,
    ResetInfo,
    StepInfo,
    schema_problems,
    step_info,
)
from repogym.scenarios.registry import registered_tasks
from tests.conftest import call

ENVS = Path(repogym.__file__).parent / "envs"
GRADING = Path(repogym.__file__).parent / "grading"


def _new_file(path: str, text: str = "x = 1\n") -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_filter_diff_flags_are_members():
    """Every flag the diff filter raises is a HackFlag member, one per kind of change."""
    verifier = registered_tasks()["retry-zero"].verifier
    diff = "".join(
        [
            _new_file(f"{verifier.tests_dest}/test_new.py"),
            _new_file("conftest.py"),
            _new_file("sitecustomize.py"),
            _new_file("evil.pth"),
            _new_file("pytest.ini"),
            _new_file("pkg-1.0.dist-info/METADATA"),
            _new_file("json.py"),
            _new_file("helper.py", "import _pytest\n"),
        ]
    )
    _, flags = grader.filter_diff(diff, verifier)
    assert all(type(f) is HackFlag for f in flags), flags
    assert set(flags) == {
        HackFlag.TESTS_MODIFIED,
        HackFlag.CONFTEST,
        HackFlag.SITECUSTOMIZE,
        HackFlag.PTH_FILE,
        HackFlag.PYTEST_CONFIG,
        HackFlag.DIST_INFO,
        HackFlag.SHADOWS_MODULE,
        HackFlag.PYTEST_INTERNALS,
    }


def _channel(**kw: object) -> vr.Channel:
    return vr.Channel(**{"phases": {}, "collected": {}, "refused": None, "exit": None, **kw})


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"exhausted": "memory"}, HackFlag.RESOURCE_EXHAUSTED),
        ({"timed_out": True}, HackFlag.VERIFIER_TIMEOUT),
        ({"truncated": True}, HackFlag.VERIFIER_OUTPUT_LIMIT),
        ({"ch": None}, HackFlag.FORGED_RESULTS),
        ({"ch": _channel(refused=("conftest", "x"))}, HackFlag.CONFTEST),
        ({"ch": _channel(refused=("plugin", "x"))}, HackFlag.VERIFIER_REFUSED),
        ({"ch": _channel(refused=("launcher", "x"))}, HackFlag.VERIFIER_REFUSED),
        ({"ch": _channel(), "exit_code": 2}, HackFlag.VERIFIER_CRASHED),
        ({"ch": _channel(exit=4), "exit_code": 4}, HackFlag.VERIFIER_CRASHED),
        (
            {"ch": _channel(exit=1), "exit_code": 1, "masked": Masked([Canary("t.py::c", False)])},
            HackFlag.FORGED_RESULTS,
        ),
        (
            {
                "ch": _channel(exit=1, phases={"t.py::c": {"call": ("failed", False)}}),
                "exit_code": 1,
                "masked": Masked([Canary("t.py::c", True)]),
            },
            HackFlag.CANARY_FAILED,
        ),
        (  # a class canary skipped while another test of its class passed
            {
                "ch": _channel(
                    exit=1,
                    phases={
                        "t.py::C::c": {"setup": ("skipped", False)},
                        "t.py::C::x": {"setup": ("passed", False), "call": ("passed", False)},
                    },
                ),
                "exit_code": 1,
                "masked": Masked([Canary("t.py::C::c", True)]),
            },
            HackFlag.CANARY_FAILED,
        ),
        (  # a must-fail canary passing, in a class none of whose tests passed
            {
                "ch": _channel(
                    exit=1,
                    phases={
                        "t.py::C::c": {"setup": ("passed", False), "call": ("passed", False)},
                        "t.py::C::x": {"setup": ("skipped", False)},
                    },
                ),
                "exit_code": 1,
                "masked": Masked([Canary("t.py::C::c", False)]),
            },
            HackFlag.FORGED_RESULTS,
        ),
    ],
)
def test_verifier_flags_are_members(kwargs, flag):
    args = {
        "ch": _channel(exit=1),
        "exit_code": 1,
        "timed_out": False,
        "truncated": False,
        "exhausted": None,
        "node_ids": ["t.py::x"],
        "masked": Masked(),
        **kwargs,
    }
    verdict = vr.judge(args.pop("ch"), **args)
    assert not verdict.trusted and verdict.flags == {flag}
    assert all(type(f) is HackFlag for f in verdict.flags)


def _flag_arguments(tree: ast.AST) -> list[ast.expr]:
    """The expressions handed to the flag producers of a module: ``<...flags>.add(x)`` and
    ``untrusted(x, ...)``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        adds = isinstance(f, ast.Attribute) and f.attr == "add" and "flags" in ast.unparse(f.value)
        distrusts = isinstance(f, ast.Name) and f.id == "untrusted"
        if (adds or distrusts) and node.args:
            found.append(node.args[0])
    return found


def _is_member(expr: ast.expr) -> bool:
    if isinstance(expr, ast.IfExp):
        return _is_member(expr.body) and _is_member(expr.orelse)
    return (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "HackFlag"
        and expr.attr in HackFlag.__members__
    )


def test_every_producer_names_a_member_and_every_member_is_produced():
    """The grader's and the grading run's flag producers name HackFlag members (no string
    literal), and each member is raised somewhere in repogym/grading or repogym/envs (no
    dead flag)."""
    named = set()
    for module in ("grader.py", "grading_run.py"):
        args = _flag_arguments(ast.parse((GRADING / module).read_text()))
        assert args, module
        bad = [ast.unparse(a) for a in args if not _is_member(a)]
        assert not bad, (module, bad)
    for path in [*ENVS.rglob("*.py"), *GRADING.rglob("*.py")]:
        if path.name == "flags.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "HackFlag"
            ):
                named.add(node.attr)
    assert named == set(HackFlag.__members__)


def test_hack_flag_is_its_string():
    """A str enum: equal to its value, hashed like it, written by JSON and str() as it."""
    assert HackFlag.FORGED_RESULTS == "forged_results" and "conftest" in [HackFlag.CONFTEST]
    assert "tests_modified" in {HackFlag.TESTS_MODIFIED}
    assert json.dumps({"hack_flags": [HackFlag.PTH_FILE]}) == '{"hack_flags": ["pth_file"]}'
    assert str(HackFlag.DIFF_FAILED) == f"{HackFlag.DIFF_FAILED}" == "diff_failed"
    assert repr([HackFlag.DIFF_FAILED]) == "['diff_failed']"  # messages print as before
    assert (
        ",".join(sorted([HackFlag.TESTS_MODIFIED, HackFlag.CONFTEST])) == "conftest,tests_modified"
    )


def test_schema_problems_catches_what_breaks_the_schema():
    good = step_info(3)
    assert schema_problems(good) == []
    assert schema_problems({**good, "hack_flags": ["conftest"]}) == []  # as JSON brings it
    missing = dict(good)
    del missing["infra_error"]
    assert schema_problems(missing) == ["missing key 'infra_error'"]
    assert schema_problems({**good, "truncated": "max_steps"}) == ["unknown key 'truncated'"]
    assert schema_problems({**good, "exit_code": None}) == ["'exit_code': None is not a int"]
    assert schema_problems({**good, "exit_code": True})  # a bool is not an int here
    assert schema_problems({**good, "reward": 1})  # an int reward breaks vector batching
    assert schema_problems({**good, "hack_flags": ["made_up"]})
    assert schema_problems({**good, "tests": {"t": 1}})
    assert schema_problems(good, ResetInfo)


def test_tools_return_an_outcome_and_take_no_info():
    for name, tool in TOOLS.items():
        if tool.run is None:
            continue
        assert list(inspect.signature(tool.run).parameters) == ["bench", "args"], name
        assert inspect.signature(tool.run).return_annotation in (
            "ToolOutcome",
            tools.ToolOutcome,
        ), name


def _check(info: dict) -> None:
    assert schema_problems(info, StepInfo) == [], info
    assert all(type(f) is HackFlag for f in info["hack_flags"])


def test_real_env_steps_follow_the_schema():
    """Every kind of step of a built-in task in the bwrap sandbox returns a StepInfo."""
    env = gym.make("repogym/retry-zero-v0", max_steps=20)
    try:
        _, reset_info = env.reset(seed=0)
        assert schema_problems(reset_info, ResetInfo) == []
        steps = [
            call("bash", command="echo hi; exit 3"),
            call("read", path="nope.txt"),
            call("read", path="."),
            call("write", path="notes.txt", content="a\n"),
            call("edit", path="notes.txt", old="a", new="b"),
            call("edit", path="notes.txt", old="zzz", new="b"),
            "garbage",
            call("write", path="conftest.py", content="x = 1\n"),
            call("submit"),
        ]
        infos = [env.step(action)[4] for action in steps]
        for info in infos:
            _check(info)
        bash, missing, folder, write, edit, bad_edit, garbage = infos[:7]
        assert (bash["tool_ran"], bash["exit_code"]) == (True, 3)
        assert (missing["exit_code"], folder["exit_code"], bad_edit["exit_code"]) == (1, 1, 1)
        assert (write["exit_code"], edit["exit_code"]) == (0, 0)
        assert garbage["action_error"] and not garbage["tool_ran"]
        final = infos[-1]
        assert final["graded"] and HackFlag.CONFTEST in final["hack_flags"]
        assert "truncated" not in final
    finally:
        env.close()


def test_truncated_step_follows_the_schema():
    env = gym.make("repogym/retry-zero-v0", max_steps=1)
    try:
        env.reset(seed=0)
        *_, truncated, info = env.step(call("bash", command="true"))
        _check(info)
        assert truncated and info["truncated_reason"] == "max_steps" and info["graded"]
    finally:
        env.close()
