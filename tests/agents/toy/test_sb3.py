"""The CPU toy's menu env (SB3's check_env, real graded episodes) and `repogym train
--algo sb3-ppo` from the command line."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_checker import check_env

import repogym
from repogym.agents.cli import config_from_args
from repogym.agents.toy.menu import menu_entries
from repogym.agents.toy.menu_env import MenuEnv, build_menu, hashed_bow
from repogym.agents.toy.sb3_ppo import Sb3PpoConfig
from repogym.cli.cmd_train import ALGOS

RESOLVING = {"gold", "alternative"}


@pytest.fixture(scope="module")
def cache() -> dict:
    """Rewards per (task, choice), shared by this module's retry-zero menus."""
    return {}


@pytest.fixture
def menu_env(cache):
    env = MenuEnv(gym.make("repogym/retry-zero-v0"), reward_cache=cache)
    yield env
    env.close()


def test_sb3_check_env(menu_env):
    check_env(menu_env, warn=True)
    assert menu_env.episodes_run >= 1  # real episodes, not a stub


def test_each_choice_earns_what_its_kind_should_then_is_cached(menu_env, retry_task):
    menu = menu_env.menus["retry-zero"]
    names = sorted(c.name for c in menu)
    assert names == sorted(e.name for e in menu_entries(retry_task))
    for i, choice in enumerate(menu):
        obs, _ = menu_env.reset(options={"task": "retry-zero"})
        assert menu_env.observation_space.contains(obs)
        _, reward, term, trunc, info = menu_env.step(i)
        assert term and not trunc and info["choice"] == choice.name
        assert info["resolved"] == (choice.kind in RESOLVING), info
        assert reward == (1.0 if choice.kind in RESOLVING else 0.0)
    before = menu_env.episodes_run
    for i in range(len(menu)):
        menu_env.reset()
        assert menu_env.step(i)[-1]["cached"]
    assert menu_env.episodes_run == before


def test_menus_are_shuffled_per_task_from_the_seed():
    tasks = repogym.builtin_tasks()
    n = max(len(menu_entries(t)) for t in tasks)
    first = [build_menu(t, n, menu_seed=0) for t in tasks]
    assert first == [build_menu(t, n, menu_seed=0) for t in tasks]  # deterministic
    assert first != [build_menu(t, n, menu_seed=1) for t in tasks]
    slot0 = [m[0].kind in RESOLVING for m in first]
    assert 0 < sum(slot0) < len(slot0)  # "always pick slot 0" neither always wins nor loses
    assert all(len(m) == n and m.count(m[0]) < n for m in first)
    with pytest.raises(ValueError, match="n_slots >="):
        build_menu(tasks[0], 2, menu_seed=0)


def test_observation_features():
    a, b = hashed_bow("retries=0 still retries", 64), hashed_bow("mean of an empty list", 64)
    assert a.dtype == np.float32 and np.isclose(np.linalg.norm(a), 1.0)
    assert not np.allclose(a, b) and np.array_equal(a, hashed_bow("retries=0 still retries", 64))
    assert not hashed_bow("", 8).any()


def test_config_from_args():
    args = argparse.Namespace(
        steps=64,
        out="/tmp/x",
        seed=3,
        model=None,
        task_ids=["a"],
        overrides=["learning_rate=0.003", 'task_ids=["b"]'],
    )
    cfg = config_from_args(Sb3PpoConfig, args)
    assert (cfg.steps, cfg.seed, cfg.learning_rate, cfg.task_ids) == (64, 3, 0.003, ["b"])
    with pytest.raises(SystemExit, match="unknown field"):
        config_from_args(Sb3PpoConfig, argparse.Namespace(overrides=["nope=1"]))
    assert ALGOS["sb3-ppo"] == "repogym.agents.toy.sb3_ppo:main"


def test_cli_ppo_learns_the_train_menus(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "repogym.cli",
        "train",
        "--algo",
        "sb3-ppo",
        "--steps",
        "1024",
        "--out",
        str(out),
        "--task",
        "retry-zero",
        "--task",
        "percent-format",
        "--task",
        "duration-format",
    ]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resolve rate" in proc.stdout and "test" in proc.stdout, proc.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["train"]["tasks"] == 2 and results["test"]["tasks"] == 1
    assert results["train"]["resolve_rate"] >= 0.9, results["train"]
    assert results["train"]["chance"] < 0.5
    assert (out / "model.zip").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"loss/policy", "resolve_rate", "reward/mean"} <= set(rows[-1])
