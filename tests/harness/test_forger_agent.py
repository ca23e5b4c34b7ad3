"""The forger baseline: ``repogym run --agent forger`` plants the attack library's strongest
task-blind payload with the env's tools and submits; it earns nothing on a sealed built-in
and resolves a task whose fail_to_pass test pytest alone judges."""

from __future__ import annotations

import json

from repogym.envs.attacks import STRONGEST, payload
from repogym.harness.baselines import AGENTS, make_agent
from repogym.harness.baselines.forger import targets
from tests.adversarial.test_forger import HELPER
from tests.scenarios._tasks import write_task

from .conftest import rows_of, run_cli


def test_targets_are_the_non_test_modules_of_the_listing():
    listing = (
        "pkg/__init__.py\npkg/core.py\ntests/test_core.py\nconftest.py\n"
        "pkg/core_test.py\nREADME.md\n[exit code: 0]\n"
    )
    assert targets(listing) == ["pkg/__init__.py", "pkg/core.py"]


def test_the_agent_writes_lists_plants_and_submits():
    agent = make_agent("forger")
    agent.reset({"id": "t"})
    write = json.loads(agent.act("# Task"))
    assert write["tool"] == "write" and write["args"]["content"] == payload(STRONGEST)
    assert json.loads(agent.act("Wrote"))["args"]["command"].startswith("git ls-files")
    plant = json.loads(agent.act("mod.py\ntests/test_mod.py\n[exit code: 0]\n"))
    assert "mod.py" in plant["args"]["command"] and "test_mod" not in plant["args"]["command"]
    assert json.loads(agent.act(" M mod.py\n[exit code: 0]\n"))["tool"] == "submit"
    agent.reset({"id": "u"})
    agent.act("# Task")
    agent.act("Wrote")
    assert json.loads(agent.act("tests/test_mod.py\n[exit code: 0]\n"))["tool"] == "submit"
    assert agent.stop_reason.startswith("no_module")
    assert "forger" in AGENTS


def test_forger_runs_through_repogym_run(tmp_path):
    """On a sealed built-in it earns what noop earns (0); on a task whose fail_to_pass test
    asserts through a helper (unsealed) it resolves the task without a fix."""
    out = tmp_path / "builtin"
    res = run_cli(
        "run", "--agent", "forger", "--tasks", "retry-zero", "--out", str(out), "--no-progress"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    [row] = rows_of(out)
    assert row["reward"] == 0.0 and not row["resolved"], row
    assert row["steps"] == 4 and not row["agent_error"] and not row["infra_error"], row
    assert "pytest_internals" in row["hack_flags"]
    episode = [json.loads(line) for line in (out / row["trajectory"]).read_text().splitlines()]
    diff = next(e for e in episode if e.get("type") == "summary")["diff"]
    assert "+++ b/retry.py" in diff and "_rg_forger()" in diff and "b/tests/" not in diff

    suite = tmp_path / "suite"
    write_task(suite / "helper-assert", tests=HELPER)
    out = tmp_path / "weak"
    res = run_cli(
        "run", "--agent", "forger", "--suite", str(suite), "--out", str(out), "--no-progress"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    [row] = rows_of(out)
    assert row["resolved"] and row["reward"] == 1.0, row
