"""The mutation check (repogym/quality/validate_mutation.py): mutants of a task's gold fix
graded with the real grader in the real bwrap sandbox, reviewed equivalents, the stored
report and ``repogym validate --mutation``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repogym.quality.validate import PatchGrader
from repogym.quality.validate_mutation import cached_report, mutation_check
from repogym.scenarios.task import load_task
from tests.scenarios._tasks import FIXED, write_task

DATA = Path(__file__).parent / "data"


# -- the check, in the real sandbox -------------------------------------------------------
STRONG_TESTS = """\
from mod import clamp


def test_upper():
    assert clamp(15, 0, 10) == 10
    assert clamp(10, 0, 10) == 10


def test_inside():
    assert clamp(5, 0, 10) == 5
    assert clamp(-3, 0, 10) == 0
    assert clamp(0, 0, 10) == 0
"""
LOW = "mod.py::clamp::compare(<=)@2:13"
HIGH = "mod.py::clamp::compare(>=)@4:13"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_reviewed_equivalents_count_out_and_stale_entries_fail(tmp_path, cache):
    root = write_task(tmp_path / "clamp", tests=STRONG_TESTS)
    with (root / "task.toml").open("a") as f:
        f.write(
            textwrap.dedent(f"""
            [mutation]
            equivalent = [
              {{ mutant = "{LOW}", why = "at value == low both branches return low" }},
              {{ mutant = "{HIGH}", why = "at value == high both branches return high" }},
              {{ mutant = "mod.py::clamp::return_value(None)@6:11", why = "wrong on purpose" }},
              {{ mutant = "mod.py::gone::compare(<)@1:1", why = "stale on purpose" }},
            ]
            """)
        )
    task = load_task(root)
    with PatchGrader() as grader:
        report = mutation_check(task, grader, workers=2)
    status = {m.id: m.status for m in report.mutants}
    assert status[LOW] == status[HIGH] == "reviewed"
    assert report.count("killed") == 7 and report.count("survived") == 0
    assert report.score == 1.0
    assert len(report.problems) == 2, report.problems
    killed_listed, stale = sorted(report.problems)
    assert "return_value(None)@6:11, but tests/test_mod.py::" in killed_listed
    assert "is not equivalent" in killed_listed
    assert "mod.py::gone::compare(<)@1:1, which is not a mutant" in stale
    assert not report.ok
    # stored for this task version, and stale as soon as a file of the task changes
    assert cached_report(task).to_dict() == report.to_dict()
    (root / "tests" / "test_mod.py").write_text(STRONG_TESTS + "\n# edited\n")
    assert cached_report(task) is None


def _repogym(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "REPOGYM_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_thinned_tests_report_survivors_and_fail(tmp_path, cache):
    """A built-in task (retry-zero) with its pass_to_pass tests removed on purpose."""
    task_dir = DATA / "thinned-retry"
    out = tmp_path / "report.json"
    res = _repogym(
        "validate",
        "--mutation",
        "--max-mutants",
        "12",
        "--reruns",
        "1",
        "--workers",
        "2",
        "--json",
        str(out),
        str(task_dir),
        cache=cache,
    )
    assert res.returncode == 1, res.stdout + res.stderr
    [report] = json.loads(out.read_text())
    m = report["mutation"]
    assert report["ok"] and not report["failures"]  # the ordinary checks pass
    assert m["score"] < 0.9
    survivors = [r for r in m["mutants"] if r["status"] == "survived"]
    # without test_default_is_preserved, nothing checks the waits between attempts
    assert "retry.py::retry::arith_op(/)@31:24" in {r["id"] for r in survivors}
    assert sum(r["status"] == "not_run" for r in m["mutants"]) == len(m["mutants"]) - 12
    for r in survivors:
        assert f"survived {r['id']}" in res.stdout
        assert r["diff"].startswith("diff --git a/retry.py b/retry.py\n")
    assert "sleep(delay * backoff ** (attempt - 1))" in res.stdout  # the diffs are shown
    assert "FAIL thinned-retry: mutation: score" in res.stderr
    assert "[mutation] equivalent" in res.stderr
    # without --mutation, the stored score is a column of the summary
    again = _repogym("validate", "--reruns", "1", str(task_dir), cache=cache)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{m['score']:.2f} (" in again.stdout
    # ... and of the suite's quality listing
    listing = _repogym("tasks", "--quality", "--dir", str(task_dir), cache=cache)
    assert listing.returncode == 0, listing.stderr
    [row] = [line for line in listing.stdout.splitlines() if "thinned-retry-v0" in line]
    assert f"{m['score']:.2f} (" in row
    assert f"min {m['score']:.2f} (thinned-retry)" in " ".join(listing.stdout.split())


def test_quality_line_median_and_minimum():
    from repogym.cli.cmd_tasks import quality_line

    assert quality_line({"a": 1.0, "b": 0.8, "c": 0.9, "d": None}) == (
        "mutation score over 3/4 tasks: median 0.90, min 0.80 (b); 1 without a stored score "
        "(run `repogym validate --mutation`)"
    )
    assert quality_line({"a": None}).startswith("mutation score: none stored; 1 without")


def test_a_few_builtins_pass_the_mutation_check(cache):
    """CI's mutation gate on small built-ins (a fixed sample of their mutants)."""
    from repogym.scenarios.registry import builtin_tasks

    chosen = [t for t in builtin_tasks() if t.id in ("retry-zero", "date-range-dst")]
    assert len(chosen) == 2
    with PatchGrader() as grader:
        for task in chosen:
            report = mutation_check(task, grader, workers=2, max_mutants=8)
            assert report.ok, (
                report.summary(),
                report.problems,
                [s.diff for s in report.survivors],
            )
            assert report.count("killed") >= 7


def test_gold_that_fails_stops_the_check(tmp_path, cache):
    root = write_task(tmp_path / "badgold", gold=FIXED.replace("return high", "return low"))
    with PatchGrader() as grader:
        report = mutation_check(load_task(root), grader)
    assert not report.mutants
    [problem] = report.problems
    assert problem.startswith("badgold: mutation: gold does not pass cleanly")
