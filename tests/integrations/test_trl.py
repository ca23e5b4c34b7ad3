"""TRL's environment_factory adapter against real envs, and the GRPO example (short)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

from repogym.envs.actions import TOOL_HELP
from repogym.integrations.trl import NATIVE_TOOLS, RepoGymToolEnv, task_dataset, task_rows, tools_of
from repogym.scenarios.registry import registered_tasks

ROOT = Path(__file__).resolve().parents[2]


def tools_trl_sees(env: object) -> dict:
    """What GRPOTrainer exposes: public functions of the class other than reset/get_reward."""
    import inspect

    return {
        name: get_json_schema(getattr(env, name))
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def test_adapter_tools_rewards_and_dataset():
    results: list[dict] = []

    class Env(RepoGymToolEnv):
        pass

    Env.results = results
    env = Env()
    try:
        schemas = tools_trl_sees(env)
        assert sorted(schemas) == ["bash", "edit", "read", "submit", "write"]
        read = schemas["read"]["function"]["parameters"]
        assert read["required"] == ["path"] and read["properties"]["start"]["type"] == "integer"
        assert "hidden tests" in schemas["submit"]["function"]["description"]

        assert [t.__name__ for t in tools_of(env)] == sorted(schemas)  # TRL's order

        obs = env.reset(task="retry-zero", seed=0, prompt=[], split="train")
        assert obs.startswith("# Task: retry-zero")
        # The model is told to use its native tool calls, not repogym's JSON/bash text actions
        assert NATIVE_TOOLS in obs and TOOL_HELP not in obs and '{"tool"' not in obs
        env.write("/tmp/fix.patch", registered_tasks()["retry-zero"].solution_patch.read_text())
        assert "exit code: 0" in env.bash("git apply /tmp/fix.patch")
        assert "Submitted" in env.submit()
        assert env.get_reward() == 1.0
        assert "episode is over" in env.bash("ls")

        env.reset(task="retry-zero", seed=1)
        assert "Retry a flaky call" in env.read("retry.py", start=1, end=3)
        assert env.get_reward() == 0.0  # never submitted: graded as it stands
        assert [r["reward"] for r in results] == [1.0, 0.0]
        assert results[1]["tests"]["tests/test_retry.py::test_zero_disables_retries"] == "failed"
    finally:
        Env.close_all()

    rows = task_rows("test")
    assert rows and {r["split"] for r in rows} == {"test"}
    assert len(task_dataset("train", samples=2)) == 2 * len(task_rows("train"))


@pytest.mark.slow
def test_trl_grpo_example_logs_tool_calls_and_a_loss():
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "oracle through the adapter on retry-zero: reward 1.0" in run.stdout
    assert "episodes graded by repogym" in run.stdout and "infra errors 0" in run.stdout
    steps = [
        dict(zip(line.split()[2::2], map(float, line.split()[3::2]), strict=False))
        for line in run.stdout.splitlines()
        if line.startswith("step ")
    ]
    assert len(steps) == 2, run.stdout
    assert all(s["tools/call_frequency"] > 0 for s in steps)
    assert any(s["reward_std"] > 0 and s["loss"] != 0 for s in steps), run.stdout


def load_example():
    spec = importlib.util.spec_from_file_location("trl_grpo", ROOT / "examples" / "trl_grpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_grpo_trainer_runs_scripted_tool_calls_and_rewards_reach_the_loss():
    """TRL's real GRPOTrainer, one step, a group of 6: the tiny model's decoding is confined to
    the two Qwen3-format calls of the example (a partial fix, a submit), which TRL must parse
    and run in the bwrap sandboxes; the partial fix must show in the hidden tests, the rewards
    must differ within the group, and the loss and gradient must be non-zero."""
    example = load_example()
    logs, results = example.train(steps=1, generations=6)

    step = next(log for log in logs if "reward" in log)
    assert step["tools/call_frequency"] >= 1 and step["tools/failure_frequency"] == 0
    # every rollout was a graded episode; the sed call reached the sandbox in some of them
    assert len(results) == 6 and all(r["infra_error"] is None for r in results)
    fixed = [
        r
        for r in results
        if r["tests"]["tests/test_retry.py::test_zero_disables_retries"] == "passed"
    ]
    assert 0 < len(fixed) < 6
    assert sorted({r["reward"] for r in results}) == [0.5, 0.75]
    assert all(r["reward"] == 0.75 for r in fixed)
    # the reward reached the loss
    assert step["reward_std"] > 0 and step["frac_reward_zero_std"] == 0
    assert step["loss"] != 0 and step["grad_norm"] > 0
