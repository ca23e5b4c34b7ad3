"""The ``apr`` baseline: its plan (pure), and whole episodes in the real sandbox through
``repogym run`` on built-in-style tasks written here."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from repogym.harness.baselines import AgentConfigError, make_agent
from repogym.harness.baselines.apr import function_mutants, plan, reproduction_of
from repogym.scenarios.mutation import mutants

from .conftest import rows_of, run_cli

BUGGY = '''\
"""Ranges."""


def within(x, low, high):
    """True when low <= x <= high (both ends included)."""
    return low < x and x < high


def width(low, high):
    return high - low
'''
FIXED = BUGGY.replace("return low < x and x < high", "return low <= x and x <= high")
REPRODUCTION = """\
from ranges import within

for x in (1, 2, 3):
    assert within(x, 1, 3), f"expected within({x}, 1, 3) to be True, got False"
assert not within(4, 1, 3), "expected within(4, 1, 3) to be False, got True"
"""
TESTS = """\
from ranges import width, within


def test_ends_are_included():
    assert within(1, 1, 3) and within(3, 1, 3)


def test_outside():
    assert not within(0, 1, 3) and not within(4, 1, 3)


def test_width():
    assert width(1, 3) == 2
"""


def _task(root: Path, statement: str) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "ranges.py").write_text(BUGGY)
    (root / "tests").mkdir()
    (root / "tests" / "test_ranges.py").write_text(TESTS)
    (root / "solution.patch").write_text(
        "diff --git a/ranges.py b/ranges.py\n--- a/ranges.py\n+++ b/ranges.py\n"
        "@@ -3,6 +3,6 @@\n \n def within(x, low, high):\n"
        '     """True when low <= x <= high (both ends included)."""\n'
        "-    return low < x and x < high\n+    return low <= x and x <= high\n \n \n"
    )
    (root / "task.toml").write_text(
        textwrap.dedent(f"""\
        id = "{root.name}"
        statement = {json.dumps(statement)}
        max_steps = 30
        [verifier]
        tests_dest = "tests"
        fail_to_pass = ["tests/test_ranges.py::test_ends_are_included"]
        pass_to_pass = ["tests/test_ranges.py::test_outside", "tests/test_ranges.py::test_width"]
        """)
    )
    return root


STATEMENT = (
    "`within(x, low, high)` leaves out both ends of the range.\n\nReproduction:\n\n"
    f"```python\n{REPRODUCTION}```\n"
)


def test_the_reproduction_block_is_read_from_the_statement():
    assert reproduction_of(STATEMENT) == REPRODUCTION
    assert reproduction_of("A bug.\n\n```python\nprint(1)\n```\n") is None  # no Reproduction:
    assert reproduction_of("Reproduction:\n```python\nx = 1\n```") == "x = 1\n"


def test_plan_mutates_the_traceback_frames_first_and_pairs_come_after_singles():
    source = "def f(a, b):\n    return a < b\n\n\ndef g(a):\n    return f(a, 1) + 2\n"
    report = {
        "sources": {"m.py": source},
        "frames": [["m.py", 6, "g"], ["m.py", 2, "f"]],
        "calls": [["m.py", 5, "g", 1, 1], ["m.py", 1, "f", 2, 1]],
        "lines": {"m.py": [1, 2, 5, 6]},
    }
    edits, sets = plan(report, max_functions=5, max_edits=100, double_pool=10)
    assert {e.rank for e in edits} == {0, 1}
    assert edits[0].mutant.startswith("m.py::f::compare")  # the innermost frame, a token
    assert all(len(s) == 1 for s in sets[: len(edits)]) and len(sets[len(edits)]) == 2
    for e in edits:  # each edit makes the mutant's text
        assert source[: e.start] + e.new + source[e.end :] != source
    unrun = dict(report, lines={"m.py": [5, 6]})  # f's body never ran: nothing in it to try
    edits, _ = plan(unrun, max_functions=5, max_edits=100, double_pool=10)
    assert edits and all("::g::" in e.mutant for e in edits)
    _, capped = plan(report, max_functions=5, max_edits=3, double_pool=10)
    assert len(capped) == 3


def test_function_mutants_are_the_whole_modules_mutants_of_that_function():
    source = textwrap.dedent("""\
        import typing


        class Box:
            \x0c
            class Inner:
                @staticmethod
                def get(a, b=1):
                    if a > b:
                        return a - b
                    return b

            @typing.overload
            def put(self, x: int) -> int: ...
            def put(self, x):
                return x * 2 if x else None
        """)
    for name in ("Box.Inner.get", "Box.put"):
        whole = mutants(source, "m.py", functions={name})
        parts = function_mutants(source, "m.py", name)
        assert sorted(source[: e.start] + e.new + source[e.end :] for _, e in parts) == sorted(
            m.source for m in whole
        )
        assert sorted((m.id, m.line) for m, _ in parts) == sorted((m.id, m.line) for m in whole)


def test_bad_options_stop_the_run_with_the_fix():
    with pytest.raises(AgentConfigError, match="max_edits=0 must be positive.*Fix"):
        make_agent("apr", max_edits=0)


def test_apr_repairs_a_two_site_bug_and_gives_up_without_a_reproduction(tmp_path):
    suite = tmp_path / "suite"
    _task(suite / "within-ends", STATEMENT)
    _task(suite / "within-no-repro", "`within(x, low, high)` leaves out both ends.")
    out = tmp_path / "run"
    res = run_cli(
        "run", "--agent", "apr", "--suite", str(suite), "--out", str(out), "--no-progress"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {r["task"]: r for r in rows_of(out)}
    fixed = rows["within-ends"]
    assert fixed["resolved"] and fixed["reward"] == 1.0 and fixed["stop_reason"] is None
    assert fixed["steps"] <= 8  # write x2, trace, candidates, a search or two, submit
    episode = [json.loads(line) for line in (out / fixed["trajectory"]).read_text().splitlines()]
    diff = next(e for e in episode if e.get("type") == "summary")["diff"]
    assert (
        "-    return low < x and x < high" in diff and "+    return low <= x and x <= high" in diff
    )  # the pair, not a single edit that overfits the reproduction
    gave_up = rows["within-no-repro"]
    assert not gave_up["resolved"] and gave_up["stop_reason"] == "no_reproduction"
    assert gave_up["steps"] == 1
    res = run_cli("tiers", str(out), "--out", str(tmp_path / "tiers.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "within" in res.stdout and "100%" in res.stdout  # 1 of the 1 measured
    assert json.loads((tmp_path / "tiers.json").read_text())["tiers"] == {
        "within-ends": "trivial",
        "within-no-repro": "unmeasured",
    }


def test_tiers_count_trivial_tasks_per_package_over_the_measured_ones():
    from repogym.quality.tiers import summarize, tiers

    rows = [
        {"task": "toolz-1", "split": "train", "resolved": True},
        {
            "task": "toolz-2",
            "split": "train",
            "resolved": False,
            "stop_reason": "search_exhausted: 40 edit sets tried",
        },
        {"task": "toolz-3", "split": "train", "resolved": False, "stop_reason": "no_reproduction"},
        {
            "task": "toolz-4",
            "split": "train",
            "resolved": False,
            "stop_reason": "reproduction_broken: ModuleNotFoundError: No module named 'toolz'",
        },
        {
            "task": "semver-h0a1b2c3d",
            "split": "test",
            "resolved": False,
            "stop_reason": None,
        },  # a repair that passed the reproduction, not the tests
        {
            "task": "semver-h0a1b2c3d",
            "split": "test",
            "resolved": False,
            "infra_error": "reset: sandbox failed",
        },
    ]
    assert tiers(rows) == {
        "semver-h0a1b2c3d": "search-resistant",
        "toolz-1": "trivial",
        "toolz-2": "search-resistant",
        "toolz-3": "unmeasured",
        "toolz-4": "unmeasured",
    }
    s = summarize(rows)
    assert list(s) == ["semver", "toolz", "split:test", "split:train", "all"]
    assert s["toolz"] == {
        "tasks": 4,
        "trivial": 1,
        "search-resistant": 1,
        "unmeasured": 2,
        "trivial_share": 0.5,
    }
    assert s["semver"]["trivial_share"] == 0.0 and s["all"]["tasks"] == 5


def test_the_helper_tries_edits_in_a_forked_interpreter_and_keeps_the_first_that_passes(tmp_path):
    import hashlib
    import shutil
    import subprocess
    import sys

    from repogym.harness.baselines.apr import HELPER

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "ranges.py").write_text(BUGGY)
    (home / "reproduction.py").write_text(REPRODUCTION)
    shutil.copy(HELPER, home / "rg_apr.py")

    def helper(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-B", str(home / "rg_apr.py"), *args],
            cwd=ws,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert helper("trace").startswith("RGAPR-CHUNK 0 1 ")
    at = BUGGY.index("low < x")
    second = BUGGY.index("x < high") + 2
    edits = [
        ["ranges.py", at + 4, at + 5, "<=", "within", "compare"],  # low <= x
        ["ranges.py", second, second + 1, "<=", "within", "compare"],  # x <= high
        ["ranges.py", at + 8, at + 11, "or", "within", "bool_op"],
    ]
    (home / "candidates.json").write_text(
        json.dumps(
            {
                "files": {"ranges.py": hashlib.sha256(BUGGY.encode()).hexdigest()},
                "edits": edits,
                "sets": [[0], [1], [2], [0, 1]],
            }
        )
    )
    result = json.loads(helper("search", "0", "30", "5").split("RGAPR ", 1)[1])
    assert result == {"found": 3, "next": 4, "forked": 4, "rejected_by_tests": 0}
    assert (ws / "ranges.py").read_text() == FIXED  # the pair is left applied, nothing else
    assert not list(ws.rglob("__pycache__"))


def test_the_helper_runs_the_reproduction_as_if_at_the_repository_root(tmp_path):
    """A src-layout package: the statement's script puts ``dirname(__file__)/src`` on the
    path, as synthesised reproductions do; the helper keeps the script in its own folder
    but runs it as ``reproduction.py`` at the root, so the package imports, the traceback's
    frames are the package's, and the search repairs it (it found no module before)."""
    import hashlib
    import shutil
    import subprocess
    import sys
    import zlib
    from base64 import b64decode

    from repogym.harness.baselines.apr import HELPER

    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / "src" / "ranges").mkdir(parents=True)
    (ws / "src" / "ranges" / "__init__.py").write_text(BUGGY)
    (home).mkdir()
    (home / "reproduction.py").write_text(
        "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname("
        "os.path.abspath(__file__)), 'src'))\n\n" + REPRODUCTION
    )
    shutil.copy(HELPER, home / "rg_apr.py")

    def helper(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-B", str(home / "rg_apr.py"), *args],
            cwd=ws,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    report = json.loads(zlib.decompress(b64decode(helper("trace").split()[3])))
    assert report["exit_code"] == 1 and "AssertionError" in report["error"], report["output"]
    assert [f[0] for f in report["frames"]] == [], report["frames"]  # the script's own assert
    assert "src/ranges/__init__.py" in report["sources"]
    assert any(c[0] == "src/ranges/__init__.py" and c[2] == "within" for c in report["calls"])
    at = BUGGY.index("low < x")
    second = BUGGY.index("x < high") + 2
    path = "src/ranges/__init__.py"
    edits = [
        [path, at + 4, at + 5, "<=", "within", "compare"],
        [path, second, second + 1, "<=", "within", "compare"],
    ]
    (home / "candidates.json").write_text(
        json.dumps(
            {
                "files": {path: hashlib.sha256(BUGGY.encode()).hexdigest()},
                "edits": edits,
                "sets": [[0], [1], [0, 1]],
            }
        )
    )
    result = json.loads(helper("search", "0", "30", "5").split("RGAPR ", 1)[1])
    assert result["found"] == 2 and result["forked"] == 3
    assert (ws / path).read_text() == FIXED


def test_the_helper_takes_the_frames_of_the_error_a_wrapped_reproduction_was_raised_from(tmp_path):
    """A history reproduction turns the library's own error into an AssertionError of its
    own, raised ``from`` it (``history.asserting_script``): the frames in the repository are
    those of the chained error, as the printed traceback shows them."""
    import shutil
    import subprocess
    import sys
    import zlib
    from base64 import b64decode

    from repogym.harness.baselines.apr import HELPER
    from repogym.scenarios.history import asserting_script

    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / "ranges").mkdir(parents=True)
    (ws / "ranges" / "__init__.py").write_text(BUGGY)
    home.mkdir()
    script = asserting_script(
        "from ranges import width\n\n\ndef reproduce():\n"
        "    assert width(None, 3) is None\n\n\nreproduce()\n"
    )
    (home / "reproduction.py").write_text(script)
    shutil.copy(HELPER, home / "rg_apr.py")
    out = subprocess.run(
        [sys.executable, "-B", str(home / "rg_apr.py"), "trace"],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    report = json.loads(zlib.decompress(b64decode(out.split()[3])))
    assert report["error"].startswith("AssertionError: TypeError: unsupported operand"), report
    assert report["frames"] == [["ranges/__init__.py", 10, "width"]], report["frames"]
