"""The SkyRL-Gym adapter with the installed skyrl-gym package."""

from __future__ import annotations

import json

import skyrl_gym
from skyrl_gym.metrics import aggregate_for_environment

from repogym.integrations.skyrl import ENV_ID, RepoGymTextEnv, skyrl_rows
from repogym.scenarios.registry import registered_tasks
from tests.conftest import apply_patch_actions, call
from tests.integrations._sandbox import BreakSandbox


def test_registered_env_plays_oracle_and_noop_with_metrics():
    row = next(r for r in skyrl_rows("train") if r["extra_info"]["task"] == "retry-zero")
    assert ENV_ID in skyrl_gym.registry
    metrics = []
    for actions in (
        apply_patch_actions(registered_tasks()["retry-zero"].solution_patch.read_text())
        + [call("submit")],
        [call("submit")],
    ):
        env = skyrl_gym.make(ENV_ID, env_config={"max_steps": 10}, extras=row)
        assert isinstance(env, RepoGymTextEnv)
        try:
            messages, meta = env.init(row["prompt"])
            assert (
                meta == {"task": "retry-zero"} and "# Task: retry-zero" in messages[-1]["content"]
            )
            for action in actions:
                out = env.step(action)
            assert out["done"] and out["observations"] == []
            metrics.append(env.get_metrics())
        finally:
            env.close()
    assert [m["reward"] for m in metrics] == [1.0, 0.0]
    agg = aggregate_for_environment(ENV_ID, metrics)
    assert agg["resolved"] == 0.5 and agg["reward"] == 0.5


def test_step_output_midway_and_a_row_without_a_task():
    import pytest

    env = skyrl_gym.make(ENV_ID, extras={"extra_info": {"task": "retry-zero"}})
    try:
        env.init([{"role": "user", "content": "go"}])
        out = env.step("not a tool call")
        assert not out["done"] and out["reward"] == 0.0
        assert out["observations"][0]["role"] == "user"
        assert "Invalid action" in out["observations"][0]["content"]
        assert json.dumps(out["metadata"])  # JSON-safe info
    finally:
        env.close()
    with pytest.raises(ValueError, match="extra_info"):
        skyrl_gym.make(ENV_ID, extras={})


def test_max_turns_from_skyrl_train_is_the_step_budget():
    """skyrl-train puts ``max_turns`` in the row (``env_extras``); the episode ends, graded,
    after that many turns, and ``self.max_turns`` says so."""
    import pytest

    row = {"extra_info": {"task": "retry-zero"}, "max_turns": 2}
    env = skyrl_gym.make(ENV_ID, env_config={"max_steps": 10}, extras=row)
    try:
        env.init([{"role": "user", "content": "go"}])
        assert env.max_turns == 2
        first = env.step(call("bash", command="true"))
        assert not first["done"]
        second = env.step(call("bash", command="true"))
        assert second["done"] and second["metadata"]["truncated_reason"] == "max_steps"
        assert env.get_metrics()["steps"] == 2
    finally:
        env.close()
    nested = skyrl_gym.make(ENV_ID, extras={"extra_info": {"task": "retry-zero", "max_turns": 3}})
    try:
        assert nested.max_turns == 3
    finally:
        nested.close()
    with pytest.raises(ValueError, match="max_turns"):
        skyrl_gym.make(ENV_ID, extras={"extra_info": {"task": "retry-zero"}, "max_turns": 0})


def test_infra_error_ends_the_episode_masked():
    """A sandbox failure ends the episode with ``loss_masked`` in the step's metadata (what a
    BaseTextEnvStepOutput can carry) and ``infra_error`` in the metrics; a normal step says
    ``loss_masked: False``."""
    row = {"extra_info": {"task": "retry-zero"}}
    env = skyrl_gym.make(ENV_ID, env_config={"max_steps": 10}, extras=row)
    env.env = BreakSandbox(env.env)
    try:
        env.init([{"role": "user", "content": "go"}])
        out = env.step(call("bash", command="ls"))
        assert out["done"] and out["observations"] == []
        assert out["metadata"]["loss_masked"] is True and out["metadata"]["infra_error"]
        assert out["reward"] == 0.0 and env.get_metrics()["infra_error"] == 1.0
        assert json.dumps(out["metadata"])
    finally:
        env.close()
    env = skyrl_gym.make(ENV_ID, extras=row)
    try:
        env.init([{"role": "user", "content": "go"}])
        assert env.step(call("bash", command="ls"))["metadata"]["loss_masked"] is False
    finally:
        env.close()
