"""`repogym synth` makes valid tasks from a small tested package (tests/scenarios/data)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repogym.harness.validate import validate_tasks
from repogym.scenarios.synth import SynthError, mutants_of, synthesize
from repogym.scenarios.task import load_tasks

PACKAGE = Path(__file__).parent / "data" / "textstats"


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    folders = synthesize(PACKAGE, out, max_tasks=3, seed=0)
    return folders, load_tasks(out)


def test_emitted_tasks_validate_in_the_sandbox(synthesised):
    folders, tasks = synthesised
    assert len(folders) == len(tasks) == 3
    reports = validate_tasks(tasks, reruns=1, workers=2)
    failures = [p for r in reports for p in r.failures]
    assert not failures, failures
    assert all(any(c.kind == "decoy" for c in r.checks) for r in reports)


def test_emitted_task_contents(synthesised):
    _, tasks = synthesised
    for task in tasks:
        v = task.verifier
        assert v.fail_to_pass and v.pass_to_pass
        assert not set(v.fail_to_pass) & set(v.pass_to_pass)
        assert not list(task.repo_dir.rglob("test_*.py"))  # the tests are hidden
        assert (task.tests_dir / "test_textstats.py").is_file()
        gold = task.solution_patch.read_text()
        added = [line[1:].strip() for line in gold.splitlines()
                 if line.startswith("+") and not line.startswith("+++")]
        assert added
        for line in added:  # the statement describes failures, not the fix
            assert line not in task.statement
        for t in v.fail_to_pass:
            assert t in task.statement


def test_same_seed_same_tasks(tmp_path, synthesised):
    folders, _ = synthesised
    again = synthesize(PACKAGE, tmp_path, max_tasks=2, seed=0)
    assert [p.name for p in again] == [p.name for p in folders[:2]]
    for a, b in zip(again, folders[:2], strict=True):
        assert (a / "solution.patch").read_text() == (b / "solution.patch").read_text()


def test_mutation_operators():
    source = ("def f(x, n=3, items=None):\n    if items is None:\n        return []\n"
              "    if x < n:\n        return g(x, n)\n    return x + 1\n")
    ops = {m.operator for m in mutants_of(source, "f.py")}
    assert ops == {"flip_compare", "off_by_one", "drop_guard", "swap_args", "wrong_default"}
    for m in mutants_of(source, "f.py"):
        ast.parse(m.source)
        assert m.source != source


def test_package_with_failing_tests_is_refused(tmp_path):
    pkg = tmp_path / "broken"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    return 1\n")
    (pkg / "test_m.py").write_text("from m import f\n\n\ndef test_f():\n    assert f() == 2\n")
    with pytest.raises(SynthError, match="tests fail before any mutation"):
        synthesize(pkg, tmp_path / "out")
