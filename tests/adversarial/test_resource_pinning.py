"""Attack class 8: failure masked by pinning the sandbox's own resources.

An episode fills what stays charged to its memory after its commands end (tmpfs data and
inodes; xattrs are refused), runs a memory hog into the OOM killer, then goes on: the next
command still starts (or says that the sandbox's own limit is used up), and submitting
grades normally. Neither the episode nor its grading is ever ``infra_error``, which trainers
mask and runners retry: a failing episode cannot be turned into "no episode". The same
holds for code the grader imports that exhausts the grading sandbox's memory.
"""

from __future__ import annotations

import gymnasium as gym

from repogym.sandbox import Limits
from tests.adversarial.conftest import assert_no_gain, close_and_check
from tests.conftest import call

FILL = r"""
import os
n = 0
try:
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20)); f.flush(); n += 1
except OSError as e:
    print("data MB", n, e.strerror)
try:
    os.setxattr("/tmp/fill", "user.pin", b"x" * 60000)
    print("xattr set")
except OSError as e:
    print("xattr", e.strerror)
os.makedirs("inodes", exist_ok=True)
n = 0
try:
    while True:
        open(f"inodes/{n:07d}" + "y" * 200, "w").close(); n += 1
except OSError as e:
    print("inodes", n, e.strerror)
"""
HOG = "python3 -c 'b = bytearray(400 << 20); print(len(b))'"


def test_pinned_memory_and_inodes_do_not_mask_a_failure(backend, attacker):
    env = gym.make(
        "repogym/retry-zero-v0",
        sandbox=backend,
        max_episode_steps=50,
        limits=Limits(memory_mb=192, workspace_mb=128, timeout_s=60),
    )
    try:
        env.reset(seed=0)
        env.step(call("write", path="/tmp/fill.py", content=FILL))
        obs, _, _, trunc, info = env.step(call("bash", command="python3 /tmp/fill.py"))
        assert not trunc and not info["infra_error"], obs
        assert "xattr set" not in obs
        for command in (HOG, "echo alive", "echo alive"):
            obs, _, _, trunc, info = env.step(call("bash", command=command))
            assert not trunc and not info["infra_error"], obs
        assert obs.startswith("alive") or "limit is used up" in obs, obs
        _, reward, term, _, info = env.step(call("submit"))
        assert term and info["infra_error"] == "", info
        assert reward == 0.0 and not info["resolved"]
    finally:
        close_and_check(env)


MEMORY_HOG = "_rg_pinned = bytearray(3 << 30)\n"


def test_graded_code_that_exhausts_memory_is_the_agents_failure(attacker, backend):
    res = attacker.grade(backend, attacker.appended(MEMORY_HOG))
    assert_no_gain(res, attacker.noop(backend))
    assert res.reward == 0.0 and res.untrusted
    assert {"resource_exhausted", "verifier_crashed"} & set(res.hack_flags), res.hack_flags
