"""The runner and ``repogym run`` with real sandboxes, real processes and real agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repogym.harness.baselines import AgentConfigError
from repogym.harness.config import RunConfig, default_label
from repogym.harness.results import read_results
from repogym.harness.runner import plan, run

from .conftest import TASKS, rows_of, run_cli


def test_cli_oracle_resolves_every_task_with_two_workers(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    proc = run_cli(
        "run",
        "--agent",
        "oracle",
        "--suite",
        "builtin",
        "--workers",
        "2",
        "--tasks",
        ",".join(TASKS),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(out)
    assert sorted(r["task"] for r in rows) == TASKS
    assert all(r["resolved"] and r["reward"] == 1.0 for r in rows), rows
    assert all(r["agent_error"] is None and r["infra_error"] is None for r in rows)
    for r in rows:  # trajectories are complete TrajectoryLogger files
        lines = (out / r["trajectory"]).read_text().splitlines()
        assert json.loads(lines[0])["type"] == "header"
        assert json.loads(lines[-1])["type"] == "summary"
        assert r["tokens"] == 0 and r["steps"] == 3
    assert "100.0%" in proc.stdout and "oracle" in proc.stdout


def test_cli_noop_resolves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "noop"
    proc = run_cli(
        "run",
        "--agent",
        "noop",
        "--workers",
        "2",
        "--tasks",
        ",".join(TASKS),
        "--out",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(out)
    assert len(rows) == 2 and not any(r["resolved"] for r in rows)
    assert all(r["steps"] == 1 and r["reward"] == 0.0 for r in rows)


def test_unknown_agent_and_bad_agent_arg_fail_with_a_fix(tmp_path: Path) -> None:
    proc = run_cli("run", "--agent", "nosuch", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "unknown agent 'nosuch'" in proc.stdout
    proc = run_cli("run", "--agent", "noop", "--agent-arg", "oops", "--out", str(tmp_path / "y"))
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stdout
    proc = run_cli("run", "--agent", "noop", "--tasks", "retry-zerro", "--out", str(tmp_path / "z"))
    assert proc.returncode == 2 and "unknown task ids ['retry-zerro']" in proc.stdout
    assert "did you mean retry-zero" in proc.stdout
    proc = run_cli("run", "--agent", "random", "--agent-arg", "sed=1", "--out", str(tmp_path / "w"))
    assert (
        proc.returncode == 2 and "no option(s) ['sed']" in proc.stdout and "'seed'" in proc.stdout
    )
    assert not any(tmp_path.glob("*/results.jsonl"))  # nothing ran


def test_resume_skips_recorded_episodes_and_retries_infra_errors(tmp_path: Path) -> None:
    out = tmp_path / "r"
    run(RunConfig(agent="noop", out=out, task_ids=TASKS[:1]))
    assert len(rows_of(out)) == 1
    # Fake an infra error on the recorded episode: resume must re-run it, and add retry-zero.
    row = rows_of(out)[0]
    (out / "results.jsonl").write_text(json.dumps({**row, "infra_error": "sandbox died"}) + "\n")
    rows = run(RunConfig(agent="noop", out=out, task_ids=TASKS))
    assert len(rows_of(out)) == 3  # the infra-error row stays in the log, superseded
    assert sorted(r["task"] for r in rows) == TASKS
    assert all(r["infra_error"] is None for r in rows)
    # Everything is recorded now: a third run adds nothing.
    run(RunConfig(agent="noop", out=out, task_ids=TASKS))
    assert len(rows_of(out)) == 3
    with pytest.raises(ValueError, match=r"holds results of \['noop'\].*labelled 'oracle'"):
        run(RunConfig(agent="oracle", out=out, task_ids=TASKS))


def test_agent_errors_are_kept_on_resume_unless_retry_errors(tmp_path: Path) -> None:
    out = tmp_path / "flaky"
    cmd = [
        "run",
        "--agent",
        "rg_test_agents:FlakyOracle",
        "--tasks",
        ",".join(TASKS),
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = run_cli(*cmd, RG_TEST_FAIL="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all("flaky failure" in r["agent_error"] for r in rows_of(out))
    end = proc.stdout.split("agent errors: ", 1)[1].split("\n", 1)[0]  # said at the end
    assert end.startswith("2 (counted as failures; to run them again: repogym run --agent")
    assert end.endswith("--no-progress --retry-errors)")
    proc = run_cli(*cmd)  # a plain resume keeps them: they are the agent's results
    assert "2 episode(s) already recorded, 0 to run" in proc.stdout
    assert (
        "2 recorded episode(s) are agent errors" in proc.stdout and "--retry-errors" in proc.stdout
    )
    assert len(rows_of(out)) == 2
    proc = run_cli(*cmd, "--retry-errors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = read_results(out)
    assert len(rows) == 2 and all(r["resolved"] and r["agent_error"] is None for r in rows)
    assert "100.0%" in proc.stdout


def test_default_labels_name_the_model_and_the_chosen_settings_never_the_url() -> None:
    assert default_label("oracle", {}) == "oracle"
    a = default_label(
        "openai",
        {"model": "Qwen/Qwen3-8B", "temperature": 0.7, "base_url": "http://localhost:8000/v1"},
    )
    b = default_label(
        "openai",
        {
            "model": "Qwen/Qwen3-8B",
            "temperature": 0.2,
            "base_url": "http://127.0.0.1:8000/v1",
            "timeout_s": 30,
        },
    )
    assert (a, b) == ("openai-Qwen3-8B-temperature=0.7", "openai-Qwen3-8B-temperature=0.2")
    assert a == default_label("openai", {"temperature": 0.7, "model": "Qwen/Qwen3-8B"})
    assert default_label("oracle", {}, reward_mode="partial") == "oracle-reward_mode=partial"
    assert default_label("pkg.mod:MyAgent", {}) == "MyAgent"
    assert RunConfig(agent="random", out=Path("x"), agent_args={"seed": 1}).label == "random-seed=1"
    long = default_label("openai", {"model": "m", "system_prompt": "Fix it. " * 20})
    assert long == "openai-m-system_prompt=Fix it. Fix it. Fix i..."


def test_resume_matches_settings_not_the_url_and_old_labels_resume(tmp_path: Path) -> None:
    out = tmp_path / "r"
    args = {"model": "org/m", "temperature": 0.5, "base_url": "http://localhost:9/v1"}
    cfg = RunConfig(agent="openai", out=out, agent_args=args)
    out.mkdir()
    (out / "run.json").write_text(json.dumps({**cfg.meta(), "label": "openai-m-254879"}))
    (out / "results.jsonl").write_text(
        json.dumps({"agent": "openai-m-254879", "task": TASKS[0], "sample": 0, "resolved": True})
        + "\n"
    )
    # the same server as 127.0.0.1, the run labelled by an older version: one run
    same = RunConfig(
        agent="openai",
        out=out,
        agent_args={**args, "base_url": "http://127.0.0.1:9/v1", "timeout_s": 5},
    )
    p = plan(same)
    assert same.label == "openai-m-254879" and p.done == 1 and "continuing it" in p.notes[0]
    hotter = RunConfig(agent="openai", out=out, agent_args={**args, "temperature": 1.0})
    with pytest.raises(ValueError, match=r"holds results of \['openai-m-254879'\]"):
        plan(hotter)
    renamed = RunConfig(
        agent="openai", out=out, label="openai-m-254879", agent_args={**args, "temperature": 1.0}
    )
    p = plan(renamed)  # --name continues it on purpose, and says what changed
    assert "temperature: 0.5 -> 1.0" in p.notes[0]


def test_agent_that_raises_or_hangs_is_an_agent_error_and_the_run_goes_on(
    tmp_path: Path, helper_agents: str
) -> None:
    out = tmp_path / "faulty"
    cfg = RunConfig(
        agent=f"{helper_agents}:FaultyAgent",
        out=out,
        workers=2,
        task_ids=[*TASKS, "empty-mean"],
        act_timeout_s=2.0,
    )
    rows = {r["task"]: r for r in run(cfg)}
    assert "RuntimeError in act: agent exploded" in rows["retry-zero"]["agent_error"]
    assert "did not return within 2s" in rows["paginate-off-by-one"]["agent_error"]
    assert rows["empty-mean"]["agent_error"] is None and rows["empty-mean"]["steps"] == 1
    assert all(not r["resolved"] and r["infra_error"] is None for r in rows.values())


def test_an_agent_that_cannot_be_built_stops_the_run_before_any_episode(
    tmp_path: Path, helper_agents: str
) -> None:
    with pytest.raises(AgentConfigError, match="rejected its arguments"):
        run(RunConfig(agent=f"{helper_agents}:BrokenInit", out=tmp_path / "b", task_ids=TASKS))
    assert not (tmp_path / "b").exists()


def test_read_results_explains_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="repogym run --out DIR"):
        read_results(tmp_path)
