"""``repogym prm label RUN_DIR`` on a built-in task: per-step labels, beside the rollouts
and in the ATIF export, from recorded progress and from a replay."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from repogym.cli import main
from repogym.envs.wrappers import TrajectoryLogger, read_trajectory
from tests.conftest import apply_patch_actions, call


def _episode(log_dir, retry_task, progress: bool) -> None:
    env = TrajectoryLogger(gym.make("repogym/retry-zero-v0", progress=progress), log_dir)
    try:
        env.reset(seed=0)
        actions = [
            call("read", path="retry.py"),
            call("write", path="notes.txt", content="x"),
            *apply_patch_actions(retry_task.solution_patch.read_text()),
            call("submit"),
        ]
        for action in actions:
            env.step(action)
    finally:
        env.close()


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, retry_task):
    run = tmp_path_factory.mktemp("run")
    _episode(run, retry_task, progress=True)  # progress recorded by the env
    _episode(run, retry_task, progress=False)  # progress measured by replaying it
    files = sorted(run.glob("*.jsonl"))
    with (run / "values.jsonl").open("w") as f:
        for t, v in enumerate([0.2, 0.25, 0.3, 0.3, 0.9, 1.0]):
            f.write(json.dumps({"trajectory": files[0].name, "t": t, "value": v}) + "\n")
    assert main(["prm", "label", str(run)]) == 0
    rows = [json.loads(line) for line in (run / "labels.jsonl").read_text().splitlines()]
    return run, files, rows


def test_every_step_is_labelled_with_progress_deltas(labelled):
    run, files, rows = labelled
    by_file = {f.name: [r for r in rows if r["trajectory"] == f.name] for f in files}
    sources = set()
    for name, labels in by_file.items():
        steps = read_trajectory(run / name)["steps"]
        assert [r["t"] for r in labels] == [s["t"] for s in steps]  # one label per step
        # read: unmeasured; notes.txt: measured, no test moved; the patch written to /tmp:
        # the workspace did not change; git apply: the tests pass; submit: the final grade.
        assert [r["progress_measured"] for r in labels] == [False, True, False, True, True]
        deltas = [r["progress_delta"] for r in labels]
        assert deltas[:3] == [0.0, 0.0, 0.0] and deltas[3] > 0
        assert labels[-1]["progress"] == 1.0
        assert sum(deltas) == pytest.approx(1.0 - (labels[0]["progress"] - deltas[0]))
        sources.add(labels[0]["source"])
    assert sources == {"recorded", "replay"}
    replayed = [r for r in rows if r["source"] == "replay"]
    assert all(r["replay_diff_matches"] for r in replayed)


def test_value_deltas_come_from_the_values_file(labelled):
    _, files, rows = labelled
    first = [r for r in rows if r["trajectory"] == files[0].name]
    assert [r["value"] for r in first] == [0.25, 0.3, 0.3, 0.9, 1.0]
    assert [r["value_delta"] for r in first] == pytest.approx([0.05, 0.05, 0.0, 0.6, 0.1])
    other = [r for r in rows if r["trajectory"] == files[1].name]
    assert all(r["value"] is None and r["value_delta"] is None for r in other)


def test_labels_are_in_the_atif_export(labelled):
    run, files, rows = labelled
    for f in files:
        doc = json.loads((run / "atif" / f.stem / "trajectory.json").read_text())
        agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
        mine = [r for r in rows if r["trajectory"] == f.name]
        assert len(agent_steps) == len(mine)
        for step, row in zip(agent_steps, mine, strict=True):
            assert step["extra"]["labels"]["progress_delta"] == row["progress_delta"]


def test_a_folder_without_trajectories_says_how_to_fix(tmp_path, capsys):
    assert main(["prm", "label", str(tmp_path)]) == 2
    assert "Fix:" in capsys.readouterr().err
