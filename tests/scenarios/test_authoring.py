"""`repogym new-task` scaffolds a loadable task that validation then guides to completion."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repogym.quality.validate import validate_task
from repogym.scenarios.task import load_task

from ._tasks import diff


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args], capture_output=True, text=True, check=False
    )


def test_scaffold_loads_and_validates_once_gold_is_written(tmp_path):
    res = _cli("new-task", "my-task", "--dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    root = tmp_path / "my-task"
    for name in (
        "task.toml",
        "repo/my_task.py",
        "tests/test_my_task.py",
        "solution.patch",
        "alternatives",
        "decoys",
    ):
        assert (root / name).exists(), name
    task = load_task(root)
    assert task.env_id == "repogym/my-task-v0"
    assert "#" in (root / "task.toml").read_text()  # commented for the author

    # Empty gold: validation says what to do, naming the task and the patch.
    report = validate_task(task, reruns=1, workers=2)
    assert any(
        p.startswith("my-task: gold solution.patch: the patch is empty") for p in report.failures
    ), report.failures
    # The noop checks already pass: the example bug fails fail_to_pass only.
    assert next(c for c in report.checks if c.kind == "noop").ok

    source = (root / "repo" / "my_task.py").read_text()
    fixed = source.replace("    return value\n", "    return min(value, high)\n")
    (root / "solution.patch").write_text(diff({"my_task.py": source}, {"my_task.py": fixed}))
    report = validate_task(load_task(root), reruns=1, workers=2)
    assert report.ok, report.failures


def test_scaffold_rejects_bad_names_and_existing_folders(tmp_path):
    bad = _cli("new-task", "Bad Name", "--dir", str(tmp_path))
    assert bad.returncode == 2 and "not a valid task id" in bad.stdout
    assert _cli("new-task", "x", "--dir", str(tmp_path)).returncode == 0
    again = _cli("new-task", "x", "--dir", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stdout


def test_scaffold_takes_the_mutation_options_the_docs_give(tmp_path):
    # docs/authoring.md: new-task prints the mutation score; --no-mutation skips it.
    quiet = _cli("new-task", "x", "--dir", str(tmp_path), "--no-mutation")
    assert quiet.returncode == 0, quiet.stderr
    assert "x: mutation" not in quiet.stdout and quiet.stdout.startswith(f"created {tmp_path}")
    scored = _cli("new-task", "y", "--dir", str(tmp_path), "--max-mutants", "2")
    assert scored.returncode == 0, scored.stderr
    assert "y: mutation" in scored.stdout and "needs the gold fix" in scored.stdout
    bad = _cli("new-task", "z", "--dir", str(tmp_path), "--min-score", "2")
    assert bad.returncode == 2 and not (tmp_path / "z").exists()


def test_candidates_and_select_tasks_are_the_one_definition():
    from repogym.scenarios import registered_tasks, select_tasks

    task = registered_tasks()["retry-zero"]
    kinds = [c.kind for c in task.candidates()]
    assert kinds[0] == "gold" and kinds.count("gold") == 1
    assert {c.name for c in task.candidates() if c.kind == "decoy"} == {
        str(p.relative_to(task.path)) for p in task.decoys
    }
    assert all(c.correct == (c.kind != "decoy") for c in task.candidates())
    pool = registered_tasks().values()
    test_split = select_tasks(pool, split="test")
    assert test_split and all(t.split == "test" for t in test_split)
    assert [t.id for t in select_tasks(pool, task_ids=["retry-zero"])] == ["retry-zero"]
    with pytest.raises(ValueError, match="did you mean retry-zero"):
        select_tasks(pool, task_ids=["retry-zer"])
    with pytest.raises(ValueError, match="unknown split"):
        select_tasks(pool, split="dev")
