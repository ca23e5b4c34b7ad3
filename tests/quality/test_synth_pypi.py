"""`repogym synth --pypi` (repogym/quality/synth_pypi.py): validated tasks from a real
package's sdist, and the sample of mutants it scores."""

from __future__ import annotations

import os
import subprocess
import sys
from difflib import SequenceMatcher

import pytest

from repogym.scenarios import pypi
from repogym.scenarios.patches import split_diff
from repogym.scenarios.task import load_tasks
from tests.scenarios._tasks import PROJECT


def test_synth_pypi_writes_validated_tasks_with_bugs_formatted_like_their_code(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "synth",
            "--pypi",
            PROJECT,
            "--out",
            str(out),
            "--max-tasks",
            "2",
            "--reruns",
            "1",
            "--workers",
            "2",
            "--no-mutation",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "validated tasks from munch 4.0.0" in res.stdout
    tasks = load_tasks(out)
    assert len(tasks) >= 1
    sdist = pypi.download(PROJECT)
    pristine = pypi.unpack(sdist, tmp_path / "pristine")
    for task in tasks:
        assert task.dependencies is not None and task.dependencies.exclude in ((), ("munch",))
        assert all("==" in r for r in task.dependencies.requirements)  # pinned
        assert not list(task.repo_dir.rglob("test_*.py"))  # the tests are hidden
        [file] = {p.new for p in split_diff(task.solution_patch.read_text())}
        original = (pristine / file).read_text().splitlines()
        buggy = (task.repo_dir / file).read_text().splitlines()
        ops = [
            op
            for op in SequenceMatcher(None, original, buggy, autojunk=False).get_opcodes()
            if op[0] != "equal"
        ]
        assert len(ops) == 1, ops  # one place changed, every other line as it was
        _, i1, i2, j1, j2 = ops[0]
        removed, added = original[i1:i2], buggy[j1:j2]
        assert len(added) <= 1 and len(removed) <= 2, (added, removed)
        for old, new in zip(removed, added, strict=False):  # one region of the line replaced
            head = len(os.path.commonprefix([old, new]))
            tail = len(os.path.commonprefix([old[head:][::-1], new[head:][::-1]]))
            assert head > len(old) - len(old.lstrip()), (old, new)  # indentation kept
            assert old[:head] + new[head : len(new) - tail] + old[len(old) - tail :] == new
        text = task.statement
        assert "0x" not in text and "/workspace" not in text and "/tmp/" not in text
        for line in added + removed:
            if len(line.strip()) > 6:
                assert line.strip() not in text


@pytest.mark.parametrize(("flags", "expected"), [([], 20), (["--max-mutants", "5"], 5)])
def test_synth_pypi_scores_a_sample_of_mutants_unless_told(
    monkeypatch, tmp_path, capsys, flags, expected
):
    """A real function has 50-100 mutants and a package's own suite takes seconds per
    grading: `synth --pypi` scores a fixed sample unless --max-mutants says otherwise."""
    from repogym import cli
    from repogym.cli import cmd_synth
    from repogym.quality import synth_pypi, synthesis
    from repogym.scenarios.registry import builtin_tasks

    task = builtin_tasks()[0]
    sdist = pypi.Sdist(
        name="demo", version="1.0", path=tmp_path / "demo-1.0.tar.gz", sha256="0" * 64
    )
    done = synth_pypi.PypiSynthesis(
        sdist=sdist, dependencies=None, written=[task.path], dropped={}, passing_tests=3
    )
    monkeypatch.setattr(synthesis, "from_pypi", lambda *a, **k: done)
    seen = []
    monkeypatch.setattr(
        cmd_synth, "run_mutation", lambda tasks, args, console, diffs: seen.append(args.max_mutants)
    )
    assert cli.main(["synth", "--pypi", "demo==1.0", "--out", str(tmp_path / "o"), *flags]) == 0
    assert seen == [expected]
    assert "1 validated tasks from demo 1.0" in capsys.readouterr().out
