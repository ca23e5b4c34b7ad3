"""CI gate: every built-in task's verifier is trustworthy (see `repogym validate`)."""

from __future__ import annotations

import os

from repogym.quality.validate import validate_tasks
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
    # Credit rests on the sealed checks (repogym/grading/seal.py): every built-in has at least
    # 90 % of its listed tests sealed, and every fail_to_pass test's failure on the unfixed
    # code is witnessed by a sealed check, so no forger earns it without the hidden values.
    for r in reports:
        assert r.sealed[0] >= 0.9 * r.sealed[1], (r.task_id, r.seal_summary())
        assert r.witnessed[0] == r.witnessed[1] > 0, (r.task_id, r.seal_summary())
