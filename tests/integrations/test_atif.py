"""ATIF-v1.8 out and in, checked against Harbor's own models and their JSON schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import jsonschema
import pytest

from repogym.integrations.atif import SCHEMA_VERSION, from_atif, to_atif
from tests.conftest import apply_patch_actions, call
from tests.integrations.test_harbor import _harbor_wheel


@pytest.fixture(scope="module")
def harbor_atif():
    """Harbor's ATIF models (Trajectory) and its validator, from harbor's wheel."""
    wheel = _harbor_wheel()
    sys.path.insert(0, str(wheel))
    try:
        from harbor.models.trajectories import Trajectory
        from harbor.utils.trajectory_validator import TrajectoryValidator
    finally:
        sys.path.remove(str(wheel))
    return Trajectory, TrajectoryValidator


def _check(doc: dict, harbor_atif) -> None:
    trajectory, validator = harbor_atif
    jsonschema.validate(doc, trajectory.model_json_schema())
    trajectory.model_validate(doc)
    v = validator()
    assert v.validate(doc), v.get_errors()


def _episode(log_dir: Path, retry_task) -> Path:
    env = gym.make(retry_task.env_id, log_dir=log_dir)
    try:
        env.reset(seed=0)
        for action in [
            "not a tool call",
            *apply_patch_actions(retry_task.solution_patch.read_text()),
            call("submit"),
        ]:
            env.step(action)
    finally:
        env.close()
    (log,) = log_dir.glob("*.jsonl")
    return log


def test_episode_exports_as_valid_atif_with_counts_timestamps_and_rewards(
    tmp_path, retry_task, harbor_atif
):
    log = _episode(tmp_path / "logs", retry_task)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "show",
            str(log),
            "--format",
            "atif",
            "--model",
            "org/coder-7b",
            "--agent",
            "oracle",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(run.stdout)
    _check(doc, harbor_atif)
    assert doc["schema_version"] == SCHEMA_VERSION == "ATIF-v1.8"
    steps = doc["steps"]
    assert [s["source"] for s in steps] == ["user"] + ["agent"] * 4
    assert doc["final_metrics"]["total_steps"] == len(steps) == 5
    assert doc["agent"] == {**doc["agent"], "name": "oracle", "model_name": "org/coder-7b"}
    assert [t["function"]["name"] for t in doc["agent"]["tool_definitions"]] == [
        "bash",
        "read",
        "write",
        "edit",
        "submit",
    ]
    assert all(s.get("timestamp") for s in steps)
    assert "tool_calls" not in steps[1] and steps[2]["tool_calls"][0]["function_name"] == "write"
    assert steps[1]["observation"]["results"][0]["extra"]["action_error"]
    assert [s["metrics"]["extra"]["reward"] for s in steps[1:]] == [0.0, 0.0, 0.0, 1.0]
    assert doc["final_metrics"]["extra"]["reward"] == 1.0
    assert doc["final_metrics"]["extra"]["resolved"] is True
    assert doc["extra"]["repogym"]["task"] == "retry-zero" and doc["extra"]["repogym"]["diff"]
    # the importer gives back a trajectory that exports to the same document
    assert to_atif(from_atif(doc)) == doc


def test_training_rollout_exports_token_ids_and_logprobs(tmp_path, harbor_atif):
    from repogym.agents.episode import Episode, Turn, read_rollout, write_rollouts

    ep = Episode(
        task="retry-zero",
        prompt="# Task: retry-zero\n",
        reward=1.0,
        terminated=True,
        graded=True,
        resolved=True,
        turns=[
            Turn(
                [1, 2, 3],
                [10, 11],
                [-0.5, -0.25],
                [0, 1, 1],
                '{"tool": "bash", "args": {"command": "ls"}}',
                "retry.py\n",
            ),
            Turn([4, 5], [12], [-0.125], [], '{"tool": "submit", "args": {}}', ""),
        ],
        final_ids=[6, 7],
    )
    (path,) = write_rollouts(tmp_path / "rollouts", 3, [ep], decode=lambda ids: f"<{ids}>")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "show",
            str(tmp_path),
            "--format",
            "atif",
            "--out",
            str(tmp_path / "atif"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = tmp_path / "atif" / path.stem / "trajectory.json"
    assert run.stdout.strip() == str(out)
    doc = json.loads(out.read_text())
    _check(doc, harbor_atif)
    first, second = doc["steps"][1]["metrics"], doc["steps"][2]["metrics"]
    assert first["prompt_token_ids"] == [1, 2, 3] and first["prompt_tokens"] == 3
    assert first["completion_token_ids"] == [10, 11] and first["logprobs"] == [-0.5, -0.25]
    # the prompt of a later turn is the whole context the model was given
    assert second["prompt_token_ids"] == [1, 2, 3, 10, 11, 4, 5]
    assert second["completion_token_ids"] == [12] and second["completion_tokens"] == 1
    assert second["extra"]["reward"] == 1.0 and first["extra"]["reward"] == 0.0
    assert doc["final_metrics"]["total_prompt_tokens"] == 3 + 7
    assert doc["final_metrics"]["total_completion_tokens"] == 3
    assert doc["steps"][1]["tool_calls"][0]["function_name"] == "bash"  # parsed env action
    assert to_atif(from_atif(doc)) == doc
    back = from_atif(doc)
    rollout = read_rollout(path)
    assert [(r["prompt_ids"], r["completion_ids"], r["logprobs"]) for r in back["steps"]] == [
        (t.prompt_ids, t.completion_ids, t.logprobs) for t in rollout.turns
    ]
    assert back["summary"]["final_ids"] == [6, 7]


def test_run_folder_writes_one_trajectory_json_per_episode(tmp_path, retry_task):
    logs = tmp_path / "run" / "trajectories"
    _episode(logs, retry_task)
    env = gym.make(retry_task.env_id, log_dir=logs)
    try:
        env.reset(seed=1)
        env.step(call("submit"))
    finally:
        env.close()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "show",
            str(tmp_path / "run"),
            "--format",
            "atif",
            "--out",
            str(tmp_path / "atif"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    written = sorted(tmp_path.joinpath("atif").glob("*/trajectory.json"))
    assert len(written) == 2 and sorted(run.stdout.split()) == [str(p) for p in written]
    rewards = sorted(json.loads(p.read_text())["final_metrics"]["extra"]["reward"] for p in written)
    assert rewards == [0.0, 1.0]


FOREIGN = {
    "schema_version": "ATIF-v1.6",
    "session_id": "other-tool-42",
    "agent": {"name": "terminus-2", "version": "2.0", "model_name": "some-model"},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are a coding agent."},
        {"step_id": 2, "source": "user", "message": "Fix the bug."},
        {
            "step_id": 3,
            "source": "agent",
            "message": "",
            "tool_calls": [
                {"tool_call_id": "a", "function_name": "bash", "arguments": {"command": "ls"}},
                {"tool_call_id": "b", "function_name": "bash", "arguments": {"command": "pwd"}},
            ],
            "observation": {
                "results": [
                    {"source_call_id": "a", "content": "x.py"},
                    {"source_call_id": "b", "content": [{"type": "text", "text": "/app"}]},
                ]
            },
            "metrics": {"prompt_tokens": 50, "completion_tokens": 9},
        },
        {"step_id": 4, "source": "user", "message": "Also run the tests."},
        {"step_id": 5, "source": "agent", "message": "Done."},
    ],
    "final_metrics": {"total_steps": 5},
}


def test_a_foreign_atif_file_is_read_and_shown(tmp_path, harbor_atif):
    _check(FOREIGN, harbor_atif)
    traj = from_atif(FOREIGN)
    assert traj["header"]["observation"] == "You are a coding agent.\n\nFix the bug."
    assert traj["header"]["model"] == "some-model"
    first, second = traj["steps"]
    assert json.loads(first["action"]) == {"tool": "bash", "args": {"command": "ls"}}
    assert first["observation"] == "x.py\n/app\n\n[user] Also run the tests."
    assert second["action"] == "Done."
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(FOREIGN))
    run = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "show", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "Fix the bug." in run.stdout and "Also run the tests." in run.stdout
