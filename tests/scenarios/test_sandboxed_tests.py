"""Discovery for `repogym synth --pypi`: the tests it keeps are those the grader can hide."""

from __future__ import annotations

from pathlib import Path

from repogym.harness.sandboxed_tests import SandboxRunner

TESTS = '''\
import sys

from calc import add


def test_add():
    assert add(2, 3) == 5


def test_reads_a_file_named_after_itself():
    # like a snapshot/refdata library: the expectation is keyed by the test's own name
    assert sys._getframe().f_code.co_name == "test_reads_a_file_named_after_itself"


class TestAdd:
    def test_zero(self):
        assert add(0, 0) == 0
'''


def test_a_test_that_depends_on_its_own_name_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    runner = SandboxRunner(None, {"pythonpath": "."})
    assert runner.collect(root, timeout_s=60) == [
        "tests/test_calc.py::TestAdd::test_zero", "tests/test_calc.py::test_add"]
