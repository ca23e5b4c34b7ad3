"""The Gymnasium contract of RepoEnv/SuiteEnv, with the real bwrap sandbox."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import repogym
from repogym.envs.wrappers import SCHEMA, read_trajectory
from repogym.scenarios.registry import builtin_tasks, registered_tasks
from tests.conftest import apply_patch_actions, call, write_task

#: Every built-in task's env and every suite env. A fetched suite's per-task envs (hundreds,
#: registered only where `repogym suite fetch` ran) are the same class as the built-ins'.
_SUITE_TASK = re.compile(r"repogym/.+-\d+-v0")
_BUILTIN_IDS = {f"repogym/{t.id}-v0" for t in builtin_tasks()}
ALL_IDS = sorted(
    i
    for i in gym.registry
    if i.startswith("repogym/") and (i in _BUILTIN_IDS or not _SUITE_TASK.fullmatch(i))
)


def test_builtins_registered_on_import():
    assert "repogym/retry-zero-v0" in gym.registry
    assert "repogym/Suite-v0" in gym.registry
    ids = {t.id for t in repogym.builtin_tasks()}
    assert {"retry-zero", "multi-file-config", "visible-tests-slugify", "naive-fix-breaks"} <= ids
    for t in repogym.builtin_tasks():
        assert t.split in ("train", "test") and isinstance(t.tags, tuple)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env(env_id):
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_same_seed_same_first_observation(make_env):
    a, b = make_env(), make_env()
    assert a.reset(seed=3)[0] == b.reset(seed=3)[0]
    suite_a, suite_b = make_env("repogym/Suite-v0"), make_env("repogym/Suite-v0")
    firsts = [suite_a.reset(seed=s)[1]["task"] for s in range(6)]
    assert firsts == [suite_b.reset(seed=s)[1]["task"] for s in range(6)]
    assert len(set(firsts)) > 1  # the seed actually drives the task choice


def test_json_tool_call_episode(make_env, retry_task):
    env = make_env()
    obs, info = env.reset(seed=0)
    assert "retries=0" in obs and "submit()" in obs and info["task"] == "retry-zero"
    obs, r, term, trunc, info = env.step(call("read", path="retry.py", start=1, end=3))
    assert r == 0 and not term and not trunc and info["tool"] == "read"
    assert obs.lstrip().startswith("1\t")
    source = env.unwrapped.session.sandbox.read_file("retry.py")
    for action in apply_patch_actions(retry_task.solution_patch.read_text()):
        obs, r, term, trunc, info = env.step(action)
        assert info["exit_code"] == 0, obs
    assert env.unwrapped.session.sandbox.read_file("retry.py") != source
    obs, r, term, trunc, info = env.step('{"name": "submit", "arguments": "{}"}')
    assert term and not trunc and r == 1.0 and info["resolved"]
    assert set(info["tests"].values()) == {"passed"} and info["hack_flags"] == []
    assert info["infra_error"] == "" and "retry.py" in info["diff"]
    with pytest.raises(gym.error.ResetNeeded):
        env.step(call("submit"))


def test_write_edit_and_fenced_bash(make_env):
    env = make_env()
    env.reset(seed=0)
    obs, *_ = env.step(call("write", path="pkg/new.py", content="VALUE = 1\n"))
    assert "Wrote" in obs
    obs, *_ = env.step(call("edit", path="pkg/new.py", old="VALUE = 1", new="VALUE = 2"))
    assert "Edited" in obs
    obs, _, _, _, info = env.step("I'll check:\n```bash\ncat pkg/new.py; exit 3\n```")
    assert "VALUE = 2" in obs and info["exit_code"] == 3 and "[exit code: 3]" in obs
    obs, _, _, _, info = env.step(call("edit", path="pkg/new.py", old="nope", new="x"))
    assert "occurs 0 times" in obs and info["exit_code"] == 1
    obs, *_ = env.step(call("read", path="missing.py"))
    assert "no such file" in obs


@pytest.mark.parametrize(
    "action, expect",
    [
        ("just some prose", "no tool call found"),
        ("", "empty"),
        ('{"tool": "rm_rf", "args": {}}', "unknown tool"),
        ('{"tool": "bash", "args": {}}', "missing argument"),
        ('{"tool": "bash", "args": {"command": 3}}', "must be str"),
        ('{"tool": "read", "args": {"path": "a", "colour": 1}}', "unknown argument"),
        ('{"name": "bash", "arguments": "{not json"}', "not valid JSON"),
        ('{"args": {"command": "ls"}}', 'no "tool"'),
    ],
)
def test_malformed_action_is_an_observation(make_env, action, expect):
    env = make_env()
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(action)
    assert obs.startswith("Invalid action") and expect in obs
    assert '{"tool": "bash"' in obs  # says how to write it
    assert r == 0 and not term and not trunc and info["action_error"]
    obs, *_ = env.step(call("bash", command="echo still alive"))
    assert "still alive" in obs


def test_truncation_still_grades(make_env, retry_task):
    env = make_env(max_episode_steps=3)
    env.reset(seed=0)
    for action in apply_patch_actions(retry_task.solution_patch.read_text()):
        obs, r, term, trunc, info = env.step(action)
        assert not trunc
    obs, r, term, trunc, info = env.step(call("bash", command="true"))
    assert trunc and not term and info["truncated_reason"] == "max_steps"
    assert r == 1.0 and info["resolved"] and "Hidden tests passed: 4/4" in obs


def test_reward_modes_for_noop(make_env):
    rewards = {}
    for mode in ("binary", "partial", "f2p"):
        env = make_env(reward_mode=mode)
        env.reset(seed=0)
        _, rewards[mode], _, _, info = env.step(call("submit"))
        assert info["reward_breakdown"]["pass_to_pass"] == 1.0
    assert rewards == {"binary": 0.0, "partial": 0.5, "f2p": 0.0}
    with pytest.raises(ValueError, match="reward_mode"):
        gym.make("repogym/retry-zero-v0", reward_mode="dense")


def test_render_ansi_and_idempotent_close(make_env):
    env = make_env(render_mode="ansi")
    env.reset(seed=0)
    env.step(call("bash", command="echo rendered-output"))
    text = env.render()
    assert "retries=0" in text and "rendered-output" in text and "$ {" in text
    env.close()
    env.close()


def test_user_task_folder_registers_and_grades(tmp_path):
    folder = write_task(tmp_path)
    tasks = repogym.register_task(folder)
    assert [t.id for t in tasks] == ["user-task"]
    task = registered_tasks()["user-task"]
    patches = {
        "gold": (task.solution_patch, 1.0),
        "alt": (task.alternatives[0], 1.0),
        "decoy": (task.decoys[0], None),
        "noop": (None, None),
    }
    for name, (patch, want) in patches.items():
        env = gym.make("repogym/user-task-v0")
        try:
            env.reset(seed=0)
            if patch:
                for action in apply_patch_actions(patch.read_text()):
                    env.step(action)
            _, r, term, _, info = env.step(call("submit"))
        finally:
            env.close()
        assert term and info["infra_error"] == ""
        if want is None:
            assert r < 1.0, name
        else:
            assert r == want, (name, info["tests"])


def test_suite_filters_and_options(make_env):
    env = make_env("repogym/Suite-v0", split="test")
    for seed in range(5):
        _, info = env.reset(seed=seed)
        assert info["split"] == "test"
    env = make_env("repogym/Suite-v0", task_ids=["retry-zero", "naive-fix-breaks"])
    _, info = env.reset(seed=0, options={"task": "naive-fix-breaks"})
    assert info["task"] == "naive-fix-breaks"
    with pytest.raises(ValueError, match="unknown task ids"):
        gym.make("repogym/Suite-v0", task_ids=["no-such-task"])


def test_trajectory_logging_and_show(tmp_path, make_env):
    env = make_env(log_dir=tmp_path)
    env.reset(seed=7)
    env.step(call("bash", command="echo logged"))
    env.step("garbage")
    env.step(call("submit"))
    files = list(tmp_path.glob("retry-zero-*.jsonl"))
    assert len(files) == 1
    traj = read_trajectory(files[0])
    h, steps, summary = traj["header"], traj["steps"], traj["summary"]
    assert h["schema"] == SCHEMA and h["seed"] == 7 and h["sandbox"] == "bwrap"
    assert [s["tool"] for s in steps] == ["bash", None, "submit"]
    assert "logged" in steps[0]["observation"] and steps[1]["action_error"]
    assert all(s["duration_s"] >= 0 for s in steps)
    assert summary["reward"] == 0.0 and summary["tests"] and summary["abandoned"] is False
    out = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "show", str(files[0])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "retry-zero" in out and "logged" in out and "test_zero_disables_retries" in out


def test_async_vector_env_keeps_unicode():
    envs = gym.make_vec("repogym/retry-zero-v0", num_envs=2, vectorization_mode="async")
    try:
        obs, _ = envs.reset(seed=0)
        assert all(o.startswith("# Task: retry-zero") for o in obs)
        obs, *_ = envs.step([call("bash", command="echo héllo ✓")] * 2)
        assert all("héllo ✓" in o for o in obs)
    finally:
        envs.close()


def test_bad_task_toml_names_file_key_and_fix(tmp_path):
    folder = write_task(tmp_path, "broken")
    toml = folder / "task.toml"
    good = toml.read_text()
    cases = {
        'split = "test"': ('split = "validation"', "key 'split'"),
        "fail_to_pass = [": ('fail_to_pass = ["not-a-node-id", ', "pytest node id"),
        "[verifier]": ("[other]", "key 'other'"),
    }
    for old, (new, expect) in cases.items():
        toml.write_text(good.replace(old, new, 1))
        with pytest.raises(repogym.TaskError) as err:
            repogym.load_task(folder)
        assert str(toml) in str(err.value) and expect in str(err.value)
        assert "Fix:" in str(err.value)
    toml.write_text(good)
    (folder / "repo" / ".git").mkdir()
    with pytest.raises(repogym.TaskError, match="must not contain .git"):
        repogym.load_task(folder)


def test_action_json_inside_prose_and_openai_function_form(make_env):
    env = make_env()
    env.reset(seed=0)
    wrapped = {
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": "echo fn"})},
    }
    obs, *_ = env.step("Let me look. " + json.dumps(wrapped))
    assert "fn\n" in obs
