"""Attack class 4b: the docstring oracle answers sealed checks from the task's own docs.

Sealed expectations never enter the verifier's sandbox, but the task's repository can state
them itself: matrix-transpose-ragged's docstrings said ``shape([]) == (0, 0)`` and
``transpose([]) == []``, word for word the hidden fail_to_pass checks. ``DOC_ORACLE``
(tests/adversarial/payloads.py) greps the workspace for such lines and answers each
matching check with the stated value. The leak scan (repogym/quality/leaks.py) finds those
checks with file and line; the built-ins state none of their fail_to_pass values, so the
oracle earns no more than noop on them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repogym.grading import grader
from repogym.quality.leaks import scan
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import make_diff
from repogym.scenarios.task import Task, load_task
from tests.adversarial import payloads
from tests.adversarial.conftest import assert_no_gain, leftovers

MATRIX = "matrix-transpose-ragged"
#: The docstring lines matrix.py had before the leak scan (the answers of test_empty_matrix).
STATED = (
    "    ``shape([]) == (0, 0)`` and ``shape([[], []]) == (2, 0)``.\n"
    "    ``transpose([[1, 2, 3]]) == [[1], [2], [3]]`` and ``transpose([]) == []``.\n"
)


def with_answers_in_docs(attacker, tmp_path: Path) -> Task:
    """A copy of matrix-transpose-ragged whose shape() docstring states the answers again."""
    folder = tmp_path / MATRIX
    shutil.copytree(attacker.task(MATRIX).path, folder)
    module = folder / "repo" / "matrix.py"
    text = module.read_text()
    anchor = '    """Return ``(rows, columns)`` of ``matrix``.\n\n'
    assert anchor in text
    module.write_text(text.replace(anchor, anchor + STATED))
    return load_task(folder)


def _grade(attacker, task: Task, changes: dict[str, str]) -> grader.GradeResult:
    res = grader.grade(
        task,
        attacker.cache.get(task.repo_dir),
        make_diff(task.repo_dir, changes),
        mode="partial",
        make_sandbox=lambda spec: make_sandbox("bwrap", spec),
    )
    assert not leftovers(attacker.lease)
    assert res.infra_error is None and res.verifier_exit_code == 1, res.test_output[-800:]
    return res


def _oracle(task: Task) -> dict[str, str]:
    source = (task.repo_dir / "matrix.py").read_text()
    return {"matrix.py": source + "\n" + payloads.DOC_ORACLE}


def test_the_oracle_earns_a_test_whose_answers_the_docs_state(attacker, tmp_path):
    """The attack is real: with the answers in a docstring it earns test_empty_matrix, and
    the leak scan names both checks, the docstring's file and line."""
    task = with_answers_in_docs(attacker, tmp_path)
    noop = _grade(attacker, task, {})
    res = _grade(attacker, task, _oracle(task))
    empty = "tests/test_matrix.py::test_empty_matrix"
    assert noop.tests[empty] == "failed" and res.tests[empty] == "passed", res.sealed_failures
    assert res.reward > noop.reward
    found = {(leak.line, leak.where, leak.form) for leak in scan(task) if leak.test == empty}
    assert found == {(9, "repo/matrix.py", "assertion"), (10, "repo/matrix.py", "assertion")}
    line = (task.repo_dir / "matrix.py").read_text().splitlines().index(STATED.splitlines()[0])
    assert {leak.where_line for leak in scan(task) if leak.test == empty} == {line + 1, line + 2}


@pytest.mark.parametrize("task_id", [MATRIX, "week-number", "percent-format"])
def test_the_oracle_earns_no_more_than_noop_on_the_builtins(attacker, task_id):
    task = attacker.task(task_id)
    module = {MATRIX: "matrix.py", "week-number": "weeks.py", "percent-format": "fmt.py"}[task_id]
    source = (task.repo_dir / module).read_text()
    res = attacker.grade("bwrap", {module: source + "\n" + payloads.DOC_ORACLE}, task_id=task_id)
    assert_no_gain(res, attacker.noop("bwrap", task_id))
