"""A suite fetch measures again the tasks validated under other grading code, and grades
their gold patch again there: a grading change that breaks gold (a new seal form that a
test's own assertion cannot take) is a validation failure the fetch names, never a task it
keeps serving."""

from __future__ import annotations

from repogym.quality.suite_build import measure_seals
from repogym.quality.validate import PatchGrader
from repogym.scenarios.task import load_task
from tests.scenarios._tasks import BUGGY, diff, write_task


def test_a_task_whose_gold_no_longer_resolves_comes_back_with_why(tmp_path):
    good = load_task(write_task(tmp_path / "good"))
    bad = load_task(write_task(tmp_path / "bad"))
    # what a grading change that breaks a gold run looks like from here: gold fails a test
    bad.solution_patch.write_text(diff({"mod.py": BUGGY}, {"mod.py": BUGGY + "\n# no fix\n"}))
    with PatchGrader() as grader:
        got = dict((t.id, m) for t, m in measure_seals([good, bad], grader=grader, workers=2))
    assert got["good"]["witnessed"] == got["good"]["f2p"] == 1
    assert isinstance(got["bad"], str)
    assert "the gold patch does not resolve the task" in got["bad"]
    assert "tests/test_mod.py::test_upper" in got["bad"]
