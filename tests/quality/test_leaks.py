"""The leak scan: a sealed expected value that the task's own files state is found, with its
file and line, and counts as weak (repogym/quality/leaks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.quality.leaks import BARE_CHARS, Leak, scan
from repogym.quality.validate import validate_task
from repogym.scenarios.registry import builtin_tasks
from repogym.scenarios.task import load_task
from tests.scenarios._tasks import write_task

TESTS = """\
from mod import clamp


def test_upper():
    assert clamp(15, 0, 10) == 10
    assert f"{clamp(15, 0, 10)} units of measure" == "10 units of measure"


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
UPPER = "tests/test_mod.py::test_upper"


def _task(tmp_path: Path, readme: str = "", statement: str = "", repro: str = ""):
    folder = write_task(tmp_path / "leaky", tests=TESTS)
    if readme:
        (folder / "repo" / "README.md").write_text(readme)
    if statement:
        toml = folder / "task.toml"
        toml.write_text(toml.read_text().replace("clamp ignores its upper bound", statement))
    if repro:
        (folder / "reproduction.py").write_text(repro)
    return load_task(folder)


def _found(leaks: list[Leak]) -> set[tuple[int, str, int, str]]:
    return {(x.line, x.where, x.where_line, x.form) for x in leaks}


@pytest.mark.parametrize(
    ("readme", "form"),
    [
        ("# mod\n\n    Usage: ``clamp(15, 0, 10) == 10``\n", "assertion"),
        ("# mod\n\nclamp(15,0,10)==10 always\n\n\n", "assertion"),
        ("# mod\n\n    >>> clamp(15, 0, 10)\n    10\n    >>> other()\n", "doctest"),
    ],
)
def test_the_assertion_and_doctest_forms_are_found_with_file_and_line(tmp_path, readme, form):
    assert _found(scan(_task(tmp_path, readme=readme))) == {(5, "repo/README.md", 3, form)}


@pytest.mark.parametrize(
    "readme",
    [
        "``clamp(15, 0, 10) == 100``\n",  # another value
        "``clamp(15, 0, 10) == 10.5``\n",
        ">>> clamp(15, 0, 10)\n100\n",
        "10 is the answer; 10 10 10\n",  # a short literal alone matches nowhere
        "``unclamp(15, 0, 10) == 10``\n",
    ],
)
def test_what_does_not_state_the_value_is_no_leak(tmp_path, readme):
    assert scan(_task(tmp_path, readme=readme)) == []


def test_a_long_literal_is_found_alone_in_the_statement_and_the_reproduction(tmp_path):
    assert len("'10 units of measure'".replace(" ", "")) >= BARE_CHARS
    statement = "The label should read '10 units of measure'."
    leaks = scan(_task(tmp_path, statement=statement))
    assert _found(leaks) == {(6, "statement", 1, "literal")}
    assert leaks[0].test == UPPER and "statement:1" in str(leaks[0])
    repro = "from mod import clamp\n\nassert clamp(15, 0, 10) == 10\n"
    assert _found(scan(_task(tmp_path / "r", repro=repro))) == {
        (5, "reproduction.py", 3, "assertion")
    }


@pytest.mark.parametrize(
    ("actual", "expected"),
    [("_actual", "_expected"), ("result", "expected")],  # a mined reproduction, a report
)
def test_a_comparison_of_names_bound_just_before_states_their_values(tmp_path, actual, expected):
    """A reproduction made from a test says what it got (``_actual = clamp(15, 0, 10)``,
    ``_expected = 10``, ``assert _actual == _expected, ...``): that states the hidden
    expected value as the assertion did, though no line holds ``clamp(15, 0, 10) == 10``."""
    repro = (
        "from mod import clamp\n\n\ndef reproduce():\n"
        f"    {actual} = clamp(15, 0, 10)\n    {expected} = 10\n"
        f"    assert {actual} == {expected}, f'expected {{{expected}!r}}, got {{{actual}!r}}'\n"
    )
    assert _found(scan(_task(tmp_path, repro=repro))) == {(5, "reproduction.py", 7, "assertion")}
    other = repro.replace(f"{expected} = 10", f"{expected} = 11")  # another value: no leak
    assert scan(_task(tmp_path / "other", repro=other)) == []
    far = repro.replace("    assert", "    pass\n" * 4 + "    assert")  # bound too far above
    assert scan(_task(tmp_path / "far", repro=far)) == []


def test_no_builtin_states_a_fail_to_pass_expected_value():
    """Every built-in's fail_to_pass checks ask for values that neither its repository, its
    statement nor its reproduction states (matrix-transpose-ragged's docstrings did)."""
    found = []
    for task in builtin_tasks():
        f2p = {t.partition("[")[0] for t in task.test_spec.fail_to_pass}
        found += [f"{task.id}: {leak}" for leak in scan(task) if leak.test in f2p]
    assert found == []


def test_validation_counts_a_leaked_check_as_weak_and_names_it(tmp_path):
    task = _task(
        tmp_path,
        readme="# mod\n\n``clamp(15, 0, 10) == 10`` and\n"
        '``f"{clamp(15, 0, 10)} units of measure" == '
        '"10 units of measure"``\n',
    )
    report = validate_task(task, reruns=1, workers=2)
    assert report.ok, report.failures
    assert report.witnessed == (1, 1) and report.strongly == 0, report.seal_summary()
    assert [str(x).split(" (")[0] for x in report.leaks] == [
        "tests/test_mod.py:5",
        "tests/test_mod.py:6",
    ]
    assert {x.where_line for x in report.leaks} == {3, 4}
    clean = validate_task(_task(tmp_path / "clean"), reruns=1, workers=2)
    assert clean.strongly == 1 and clean.leaks == []


def test_an_in_check_is_found_in_its_own_form(tmp_path):
    tests = TESTS.replace(
        "    assert clamp(15, 0, 10) == 10\n", "    assert clamp(15, 0, 10) in (10, 10.0)\n"
    )
    folder = write_task(tmp_path / "in-task", tests=tests)
    (folder / "repo" / "README.md").write_text("# mod\n\n``clamp(15, 0, 10) in (10, 10.0)``\n")
    assert _found(scan(load_task(folder))) == {(5, "repo/README.md", 3, "assertion")}


def test_an_assertion_between_names_states_no_value(tmp_path):
    """``result == expected`` in the reproduction says nothing about a gold check written
    ``assert result == expected`` in a test: only a value's text is looked for."""
    tests = """\
from mod import clamp


class Box:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Box) and other.v == self.v


def test_upper():
    expected = Box(10)
    result = Box(clamp(15, 0, 10))
    assert result == expected


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
    folder = write_task(tmp_path / "names", tests=tests)
    (folder / "reproduction.py").write_text(
        "from mod import clamp\nresult = clamp(15, 0, 10)\nexpected = 10\n"
        "assert result == expected\n"
    )
    task = load_task(folder)
    assert scan(task) == []


def test_a_change_to_the_leak_scan_has_every_suite_task_measured_again(tmp_path, monkeypatch):
    """Which seals are weak is the leak scan's to say, so a suite's seal measures are
    recorded under its code as well as the grader's: a fetch after either changes measures
    every task again (a task keeps no floor measured by an older scan)."""
    from repogym.quality import leaks, suite_build

    before = suite_build.seal_record(1, 1)["grader"]
    assert suite_build.seal_record(1, 1)["grader"] == before
    changed = tmp_path / "leaks.py"
    changed.write_text(Path(leaks.__file__).read_text() + "\n# another rule\n")
    monkeypatch.setattr(leaks, "__file__", str(changed))
    assert suite_build.seal_record(1, 1)["grader"] != before
