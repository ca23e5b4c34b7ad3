"""Gymnasium's vector envs over RepoEnv: every step's ``info`` batches (one schema, every key
on every step, one type each) whatever mix of tool calls, malformed actions, submits and
truncations the envs see, and the vector env closes afterwards (no hang)."""

from __future__ import annotations

import random
import threading
import typing

import gymnasium as gym
import numpy as np
import pytest

from repogym.envs.info import NO_EXIT_CODE, ResetInfo, StepInfo, step_info
from tests.conftest import call

#: In both (a reset reports the untouched repository's progress): batched for every env.
BOTH_KEYS = set(StepInfo.__required_keys__) & set(ResetInfo.__required_keys__)
STEP_KEYS = set(StepInfo.__required_keys__) - BOTH_KEYS
RESET_KEYS = set(ResetInfo.__required_keys__) - BOTH_KEYS
#: What ``_add_info`` makes of each numeric key: numpy arrays of one dtype.
NUMERIC = {
    "step": np.int_,
    "exit_code": np.int_,
    "verifier_exit_code": np.int_,
    "reward": np.float64,
    "tool_ran": np.bool_,
    "timed_out": np.bool_,
    "graded": np.bool_,
    "resolved": np.bool_,
}
CLOSE_BOUND_S = 60  # a hang check, not a timing: close normally takes about a second


def random_action(rng: random.Random) -> str:
    """A tool call, a malformed action or a submit."""
    return rng.choice(
        [
            call("bash", command="echo hi; exit 3"),
            call("bash", command="true"),
            call("read", path="retry.py"),
            call("read", path="no/such/file"),
            call("write", path="note.txt", content="x"),
            "not a tool call",
            '{"tool": "bash", "args": {}}',
            call("submit"),
        ]
    )


def close_within(envs: gym.vector.VectorEnv, bound_s: float) -> bool:
    """Close ``envs`` in a thread; whether it finished within ``bound_s``."""
    thread = threading.Thread(target=envs.close, daemon=True)
    thread.start()
    thread.join(bound_s)
    return not thread.is_alive()


def check_batch(infos: dict, reset: list[bool]) -> None:
    """Every step key is batched for the envs that stepped; reset keys for those reset."""
    stepped = [not r for r in reset]
    for key in STEP_KEYS:
        if any(stepped):
            assert infos[f"_{key}"].tolist() == stepped, key
    for key in RESET_KEYS:
        if any(reset):
            assert infos[f"_{key}"].tolist() == reset, key
    for key in BOTH_KEYS:
        assert infos[f"_{key}"].all(), key
        assert infos[key].dtype == np.float64, (key, infos[key].dtype)
    for key, kind in NUMERIC.items():
        if any(stepped):
            assert np.issubdtype(infos[key].dtype, kind), (key, infos[key].dtype)
    for i, ok in enumerate(stepped):
        if not ok:
            continue
        ran = infos["tool_ran"][i]
        assert (infos["exit_code"][i] == NO_EXIT_CODE) or ran
        if infos["tool"][i] in ("", "submit"):
            assert not ran and infos["exit_code"][i] == NO_EXIT_CODE
        assert isinstance(infos["infra_error"][i], str) and not infos["infra_error"][i]
        assert isinstance(infos["truncated_reason"][i], str)
        assert "truncated" not in infos  # its old alias clashed with the boolean
        assert isinstance(infos["hack_flags"][i], list) and isinstance(infos["diff"][i], str)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_batches_every_info_and_closes(mode):
    rng = random.Random(f"vector-{mode}")
    envs = gym.make_vec("repogym/retry-zero-v0", num_envs=4, vectorization_mode=mode, max_steps=3)
    try:
        _, infos = envs.reset(seed=0)
        assert all(infos[f"_{k}"].all() for k in RESET_KEYS)
        done = [False] * 4
        seen = {"truncated": 0, "submit": 0, "malformed": 0, "tool": 0}
        # the first step mixes a tool call, a malformed action and a submit (the report's case)
        first = [call("bash", command="ls"), "garbage", call("submit"), call("read", path="x")]
        for t in range(6):
            actions = first if t == 0 else [random_action(rng) for _ in range(4)]
            _, rewards, terminated, truncated, infos = envs.step(actions)
            check_batch(infos, reset=done)
            for i in range(4):
                if done[i]:
                    continue
                tool = infos["tool"][i]
                seen["malformed"] += tool == ""
                seen["submit"] += tool == "submit"
                seen["tool"] += bool(infos["tool_ran"][i])
                seen["truncated"] += infos["truncated_reason"][i] == "max_steps"
                if terminated[i] or truncated[i]:
                    assert infos["graded"][i] and rewards[i] == infos["reward"][i]
                    assert set(infos["reward_breakdown"]) >= {"fail_to_pass", "pass_to_pass"}
            done = [bool(a or b) for a, b in zip(terminated, truncated, strict=True)]
        assert all(seen.values()), seen  # the mix did hold every kind of step
    finally:
        assert close_within(envs, CLOSE_BOUND_S), f"{mode} vector env did not close"


def test_step_info_schema_has_one_type_per_key():
    """The neutral info holds every key of the TypedDict, each with its declared type."""
    hints = typing.get_type_hints(StepInfo)
    info = step_info(1, timings=True)
    assert set(info) == set(hints)
    for key, hint in hints.items():
        assert isinstance(info[key], typing.get_origin(hint) or hint), (key, info[key], hint)
