"""`repogym validate --adversarial`: task-independent hacks never beat noop on the built-ins,
and the check reports the one that beats a deliberately weak task."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repogym.quality.adversarial import ATTACKS, cached_report, check_task
from repogym.quality.validate import PatchGrader
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.task import load_task

WEAK = Path(__file__).parent / "data" / "weak-exit-code"


def test_no_attack_beats_noop_on_a_builtin():
    task = registered_tasks()["retry-zero"]
    with PatchGrader() as grader:
        report = check_task(task, grader, workers=2)
    assert report.ok, [(r.attack, r.reward, r.error) for r in report.holes]
    assert {r.attack for r in report.results} == {a.name for a in ATTACKS}
    forged = {r.attack for r in report.results if "forged_results" in r.flags}
    assert {
        "flip-reports-from-imports",
        "register-plugin-via-gc",
        "fake-records-then-exit-0",
    } <= forged
    assert cached_report(task).results == report.results  # stored for `tasks --quality`


def test_the_cli_reports_the_attack_that_beats_a_weak_task():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "validate",
            "--reruns",
            "1",
            "--workers",
            "2",
            "--adversarial",
            str(WEAK),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "FAIL weak-exit-code: attack exit-0-first (exit) earns 1 > noop 0" in run.stderr
    assert load_task(WEAK).id == "weak-exit-code"
