"""`repogym synth` makes valid tasks from a small tested package (tests/scenarios/data)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from repogym.envs.grader import split_diff
from repogym.harness.validate import validate_tasks
from repogym.scenarios.synth import SynthError, synthesize
from repogym.scenarios.task import load_tasks

PACKAGE = Path(__file__).parent / "data" / "textstats"
REPRS = Path(__file__).parent / "data" / "reprs"


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


def test_bugs_are_formatted_like_their_surroundings(synthesised):
    """The mutated line is edited in place (no re-printed line, no bare `pass`)."""
    _, tasks = synthesised
    for task in tasks:
        [file] = {p.new for p in split_diff(task.solution_patch.read_text())}
        original = (PACKAGE / file).read_text().splitlines()
        buggy = (task.repo_dir / file).read_text().splitlines()
        removed = [x for x in original if x not in buggy]
        added = [x for x in buggy if x not in original]
        assert len(added) <= 1 and len(removed) <= 2, (added, removed)
        assert not any(x.strip() == "pass" for x in added)
        for new in added:  # the same line with one or two spans edited, the rest as it was
            old = max(removed, key=lambda o, n=new: SequenceMatcher(None, o, n).ratio())
            edits = [op for op in SequenceMatcher(None, old, new).get_opcodes()
                     if op[0] != "equal"]
            assert len(edits) <= 2, (old, new)


def test_statements_hide_addresses_paths_and_the_fix(tmp_path):
    """Failures of the reprs package print `<Point object at 0x...>` and pytest's tmp_path."""
    # seed 1 picks, among the one mutant per function, a shift() bug whose failure shows
    # the Point repr and a scratch_name() bug whose failure shows the tmp_path
    folders = synthesize(REPRS, tmp_path / "out", max_tasks=3, seed=1)
    statements = [(f / "STATEMENT.md").read_text() for f in folders]
    assert len(statements) >= 2
    text = "\n".join(statements)
    assert "<reprs.core.Point object>" in text  # the repr is kept, its address is not
    assert "<tmp>" in text
    assert "Shifting by 3 moves a point three steps to the right." in text  # test docstring
    assert not re.search(r"0x[0-9a-f]{4,}", text)
    assert tempfile.gettempdir() + "/" not in text and "repogym-synth" not in text
    for f, statement in zip(folders, statements, strict=True):
        gold = (f / "solution.patch").read_text()
        for line in gold.splitlines():
            if line[:1] in "+-" and line[:3] not in ("+++", "---") and len(line) > 7:
                assert line[1:].strip() not in statement
        toml = (f / "task.toml").read_text()
        assert 'tags = ["synthetic"]' in toml
        assert f.name.startswith("reprs-") and len(f.name) == len("reprs-") + 8


def test_package_with_failing_tests_is_refused(tmp_path):
    pkg = tmp_path / "broken"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    return 1\n")
    (pkg / "test_m.py").write_text("from m import f\n\n\ndef test_f():\n    assert f() == 2\n")
    with pytest.raises(SynthError, match="tests fail before any mutation"):
        synthesize(pkg, tmp_path / "out")


def test_cli_prints_the_mutation_score_of_each_task(tmp_path):
    env = {**os.environ, "REPOGYM_CACHE": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "repogym.harness.cli", "synth", str(REPRS),
                          "--out", str(tmp_path / "out"), "--max-tasks", "1",
                          "--max-mutants", "2", "--workers", "2"], env=env,
                         capture_output=True, text=True, check=False, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    [task] = [line.split("/")[-1] for line in res.stdout.splitlines()
              if line.startswith("wrote ")]
    line = rf"^{task}: mutation (ok|FAILED) score \d\.\d\d \("
    assert re.search(line, res.stdout, re.MULTILINE), res.stdout
