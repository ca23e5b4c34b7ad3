"""CI gate: every built-in task's verifier is trustworthy (see `repogym validate`)."""

from __future__ import annotations

import os

from repogym.harness.validate import validate_tasks
from repogym.scenarios.registry import builtin_tasks


def test_every_builtin_task_validates():
    tasks = builtin_tasks()
    assert tasks, "no built-in tasks found under repogym/scenarios/builtin"
    reports = validate_tasks(tasks, reruns=2, workers=max(2, os.cpu_count() or 1))
    failures = [p for r in reports for p in r.failures]
    assert not failures, "invalid built-in tasks:\n" + "\n".join(failures)
    assert {r.task_id for r in reports} == {t.id for t in tasks}
