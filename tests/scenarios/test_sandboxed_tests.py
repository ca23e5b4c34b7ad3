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


SHUFFLED = '''\
import os

import pytest

from calc import add

# Each process draws another order, and pytest names a dict parameter by its index, so the
# ids name other cases in the next run (isodate parametrizes over a set of tuples, one
# holding None, whose hash in Python 3.11 is its address: the same effect).
CASES = sorted(range(6), key=lambda _: os.urandom(4))


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES])
def test_shuffled(n, box):
    assert add(n, 0) == box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES[::-1]])
def test_reversed(n, box):
    assert add(0, n) == box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES[1:] + CASES[:1]])
def test_rotated(n, box):
    assert add(n, n) == 2 * box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in [0, *CASES]])
def test_prefixed(n, box):
    assert add(n, 1) == box["n"] + 1


@pytest.mark.parametrize("n", [1, 2])
def test_fixed(n):
    assert add(n, n) == 2 * n
'''


def test_a_parametrized_test_whose_ids_change_between_runs_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(SHUFFLED)
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        assert runner.collect(root, timeout_s=60) == [
            "tests/test_calc.py::test_fixed[1]", "tests/test_calc.py::test_fixed[2]"]


def test_stable_ids():
    from repogym.harness.sandboxed_tests import stable_ids

    a = {"t.py::f[0-x]", "t.py::f[1-y]", "t.py::g[1]", "t.py::h"}
    b = {"t.py::f[0-y]", "t.py::f[1-x]", "t.py::g[1]", "t.py::h"}
    c = {"t.py::f[0-x]", "t.py::f[1-y]", "t.py::g[1]", "t.py::h", "t.py::k"}
    assert stable_ids([a, b, c]) == {"t.py::g[1]", "t.py::h"}
    assert stable_ids([a, a]) == a
    assert stable_ids([]) == set()
