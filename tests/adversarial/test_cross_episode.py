"""Attack class 6: one episode against another, running at the same time on the same host.

Each environment holds a lease (its own uid, tmpfs folder and cgroups), so processes,
memory and disk an episode uses count against its own limits only: a concurrent episode
keeps working and grades normally. Everything an episode can write lies on capped tmpfs
(the workspace and ``/tmp``; docker's own small ``/dev/shm``), never on the host's disk, and
nothing of a concurrent grading (its hidden tests, its grader folder) can be found.
"""

from __future__ import annotations

import threading

import gymnasium as gym

from repogym.sandbox import Limits
from tests.adversarial.conftest import close_and_check
from tests.conftest import apply_patch_actions, call

HIDDEN_MARKER = "Hidden verifier tests for retry()"  # first line of retry-zero's hidden tests


def _env(backend: str, task: str = "retry-zero", **limits: object) -> gym.Env:
    env = gym.make(
        f"repogym/{task}-v0",
        sandbox=backend,
        max_episode_steps=200,
        limits=Limits(**limits) if limits else None,
    )
    env.reset(seed=0)
    return env


def _bash(env: gym.Env, command: str) -> tuple[str, dict]:
    obs, _, _, _, info = env.step(call("bash", command=command))
    return obs, info


STORM = """python3 -c '
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
        n += 1
except OSError as e:
    print("spawned", n, "then", os.strerror(e.errno))
time.sleep(6)
'"""


def test_a_process_storm_does_not_touch_a_concurrent_episode(backend, retry_task):
    hog, other = _env(backend, pids=64, timeout_s=30), _env(backend)
    storm: dict = {}

    def run_storm() -> None:
        storm["obs"], storm["info"] = _bash(hog, STORM)

    try:
        t = threading.Thread(target=run_storm)
        t.start()
        for action in apply_patch_actions(retry_task.solution_patch.read_text()):
            other.step(action)
        obs, info = _bash(other, "for i in $(seq 40); do (sleep 1 &); done; echo fine")
        assert "fine" in obs and info["infra_error"] == ""
        _, reward, *_, info = other.step(call("submit"))
        t.join()
        assert reward == 1.0 and info["infra_error"] == "", info
        assert not storm["info"]["infra_error"] and "spawned" in storm["obs"]
        obs, info = _bash(hog, "echo still-alive")
        assert obs.startswith("still-alive"), obs
    finally:
        close_and_check(hog)
        close_and_check(other)


WRITABLE = r"""
import json, os
mounts = {}
for line in open("/proc/self/mountinfo"):
    left, right = line.split(" - ")
    point, fstype, opts = left.split()[4], right.split()[0], right.split()[2]
    if os.path.isdir(point) and os.access(point, os.W_OK) and \
            not point.startswith(("/proc", "/dev/pts")):
        mounts[point] = [fstype, opts]
wrote = {}
for d in sorted(mounts) + [os.environ.get("HOME", "/tmp")]:
    n = 0
    try:
        with open(os.path.join(d, "rg-fill"), "wb") as f:
            for _ in range(160):
                f.write(b"x" * (1 << 20)); f.flush(); n += 1
    except OSError:
        pass
    wrote[d] = n
print(json.dumps({"mounts": mounts, "wrote": wrote}))
"""


def test_writes_past_the_cap_stay_in_capped_space(backend):
    """160 MB written everywhere a sandbox may write, with a 32 MB workspace cap."""
    import json

    env = _env(backend, memory_mb=256, workspace_mb=32)
    try:
        env.step(call("write", path="/tmp/w.py", content=WRITABLE))
        obs, info = _bash(env, "python3 /tmp/w.py")
        seen = json.loads(obs.splitlines()[0])
        _, info = _bash(env, "echo alive")
        assert info["exit_code"] == 0
    finally:
        close_and_check(env)
    for point, (fstype, _opts) in seen["mounts"].items():
        assert fstype in ("tmpfs", "overlay", "mqueue"), (point, fstype)  # never the disk
        assert point in ("/workspace", "/tmp", "/dev/shm", "/dev/mqueue", "/dev"), point
    on_workspace_tmpfs = sum(n for d, n in seen["wrote"].items() if d != "/dev/shm")
    assert on_workspace_tmpfs <= 32, seen["wrote"]  # workspace and /tmp share the cap
    assert seen["wrote"].get("/dev/shm", 0) <= 64  # docker's own shm, counted as memory


def test_a_concurrent_grading_cannot_be_found_from_another_episode(attacker, backend):
    hang = "import time as _rg_t\n_rg_t.sleep(6)\n"
    result: dict = {}
    grading = threading.Thread(
        target=lambda: result.update(res=attacker.grade(backend, attacker.appended(hang)))
    )
    env = _env(backend, task="empty-mean")
    try:
        grading.start()
        obs, _ = _bash(
            env,
            (
                "sleep 2; for i in 1 2 3; do "
                f"grep -rlsF '{HIDDEN_MARKER}' / --exclude-dir=proc --exclude-dir=sys "
                "--exclude-dir=usr 2>/dev/null; ls -d /proc/[0-9]*/root/run/repogym/*/* "
                "/run/repogym/*/* /dev/shm/* 2>/dev/null; sleep 1; done; echo END"
            ),
        )
        grading.join()
    finally:
        close_and_check(env)
    found = [
        line
        for line in obs.splitlines()
        if line.strip() and line != "END" and not line.startswith("[exit code")
    ]
    assert found == [], found
    assert result["res"].infra_error is None
