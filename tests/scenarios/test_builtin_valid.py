"""CI gate: every built-in task's verifier is trustworthy (see `repogym validate`)."""

from __future__ import annotations

import os

from repogym.harness.validate import validate_tasks
from repogym.scenarios.registry import builtin_tasks


def test_every_builtin_task_validates():
    tasks = builtin_tasks()
    assert tasks, "no built-in tasks found under repogym/scenarios/builtin"
    # One gold run each here: tests/sandbox/test_docker_parity.py grades every gold again (in
    # both backends) and requires the same per-test outcomes, which is the flakiness check.
    reports = validate_tasks(tasks, reruns=1, workers=max(2, os.cpu_count() or 1))
    failures = [p for r in reports for p in r.failures]
    assert not failures, "invalid built-in tasks:\n" + "\n".join(failures)
    assert {r.task_id for r in reports} == {t.id for t in tasks}
