"""Attack class 5: hostile input to the grader's side (the action parser has its own tests).

Whatever the agent's diff holds, or its code prints, writes or builds while the verifier
runs, grading returns a result: never an exception, never ``infra_error``, never more than
noop, and nothing left behind. Huge output is cut at the verifier's cap (untrusted), a
channel over its cap is ``forged_results``, and the host's memory per grading stays bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import gymnasium as gym
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from repogym.grading.grading_run import GRADING_OUTPUT_BYTES, MAX_CHANNEL_BYTES
from repogym.sandbox import Limits
from tests.adversarial.conftest import assert_as_noop, assert_no_gain, close_and_check
from tests.conftest import call

FLOOD = """
def _rg_flood(channel_bytes, log_bytes):
    import json, os, stat
    pipes = {}  # pipe inode -> lowest write-only fd on it (the launcher's channel is first)
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            st = os.fstat(int(name))
            flags = int(open(f"/proc/self/fdinfo/{name}").read().split("flags:")[1].split()[0], 8)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            pipes.setdefault(st.st_ino, int(name))
    channel, log = sorted(pipes.values())[:2]
    rec = json.dumps({"case": "tests/x.py::t" + "a" * 100, "when": "call",
                      "outcome": "passed", "xfail": False}) + "\\n"
    block = (rec * 1000).encode()
    for _ in range(channel_bytes // len(block) + 1):
        os.write(channel, block)
    for _ in range(log_bytes >> 20):
        os.write(log, b"E" * (1 << 20))


_rg_flood(CHANNEL, LOG)
"""


def _flood(channel: int, log: int) -> str:
    return FLOOD.replace("CHANNEL", str(channel)).replace("LOG", str(log))


def test_many_files_in_a_diff_are_the_agents_failure_not_infra(attacker, backend):
    """More files than the workspace's inode cap: ``git apply`` stops half-way, the hidden
    tests cannot be installed; the agent filled its own workspace."""
    diff = "".join(
        f"diff --git a/d{i}/x b/d{i}/x\nnew file mode 100644\nindex 0000000..e69de29\n"
        for i in range(1200)
    )
    res = attacker.grade(backend, diff=diff, limits=Limits(inodes=2000))
    assert_no_gain(res, attacker.noop(backend))
    assert res.reward == 0.0 and res.untrusted
    assert {"diff_apply_failed", "tests_install_failed"} & set(res.hack_flags), res.hack_flags


def test_diffs_with_odd_characters_never_raise(attacker):
    noop = attacker.noop("bwrap")
    gold = attacker.task().solution_patch.read_text()
    odd = (
        "diff --git a/odd.py b/odd.py\nnew file mode 100644\n--- /dev/null\n+++ b/odd.py\n"
        "@@ -0,0 +1,4 @@\n+s = '\udcff\ud800'\n+t = '\x00\r'\n+u = '\u2028diff --git a/x b/x'\n"
        "+v = '\x0c'\n"
    )
    for diff in (odd, "\udcff" * 10, "diff --git a/\x00 b/\x00\n", gold + odd):
        res = attacker.grade("bwrap", diff=diff)
        assert res.infra_error is None and res.reward <= noop.reward or diff.startswith(gold)


def test_huge_output_and_records_are_bounded(attacker, backend):
    noop = attacker.noop(backend)
    # just under both caps: parsed and trusted; the flood's made-up ids are ignored
    res = attacker.grade(
        backend, attacker.appended(_flood(MAX_CHANNEL_BYTES - (1 << 20), GRADING_OUTPUT_BYTES // 2))
    )
    assert_as_noop(res, noop)
    # a channel over its cap is not read at all
    res = attacker.grade(backend, attacker.appended(_flood(MAX_CHANNEL_BYTES + (1 << 20), 0)))
    assert_no_gain(res, noop, "forged_results")
    # output over the verifier's cap: killed, untrusted
    res = attacker.grade(backend, attacker.appended(_flood(0, GRADING_OUTPUT_BYTES + (4 << 20))))
    assert_no_gain(res, noop, "verifier_output_limit")


def test_host_memory_per_flooded_grading_is_bounded():
    """Host RSS growth while grading a run that fills the channel and the log to their caps
    (measured in a fresh process: ``ru_maxrss`` is a high-water mark)."""
    script = textwrap.dedent(f"""
        import json, resource
        from repogym.grading import grader
        from repogym.sandbox import make_sandbox
        from repogym.sandbox.workspace import TemplateCache, make_diff
        from repogym.scenarios.registry import registered_tasks
        task = registered_tasks()["retry-zero"]
        payload = {_flood(MAX_CHANNEL_BYTES - (1 << 20), GRADING_OUTPUT_BYTES // 2)!r}
        diff = make_diff(task.repo_dir, {{"retry.py": (task.repo_dir / "retry.py").read_text()
                                          + payload}})
        cache = TemplateCache()
        try:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            res = grader.grade(task, cache.get(task.repo_dir), diff, mode="partial",
                               make_sandbox=lambda s: make_sandbox("bwrap", s))
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        finally:
            cache.close()
        print(json.dumps({{"mb": (after - before) / 1024, "reward": res.reward}}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    print(
        f"host RSS growth for a grading with {(MAX_CHANNEL_BYTES >> 20) - 1} MB of records "
        f"and {GRADING_OUTPUT_BYTES >> 21} MB of log: {got['mb']:.0f} MB"
    )
    assert got["mb"] < 4 * (GRADING_OUTPUT_BYTES >> 20), got


DEEP_TREE = """
def _rg_deep(root, depth):
    import os
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        new = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    os.close(fd)


_rg_deep(".", 3000)
_rg_deep("/tmp", 3000)
"""


def test_deep_trees_in_the_grading_and_the_episode_leave_nothing(attacker, backend):
    res = attacker.grade(backend, attacker.appended(DEEP_TREE))
    assert_as_noop(res, attacker.noop(backend))
    env = gym.make("repogym/retry-zero-v0", sandbox=backend)
    try:
        env.reset(seed=0)
        script = DEEP_TREE.replace("3000", "4000")
        env.step(call("write", path="/tmp/deep.py", content=script))
        *_, info = env.step(call("bash", command="python3 /tmp/deep.py; echo made"))
        assert info["exit_code"] == 0
        *_, info = env.step(call("submit"))
        assert info["infra_error"] == "" and info["reward"] == 0.0
    finally:
        close_and_check(env)


#: File-system states an agent can leave behind, as bash run at the workspace root.
HOSTILE_STATES = {
    "fifo-history": "mkfifo /tmp/.bash_history .bash_history /tmp/.python_history",
    "fifo-startup": "mkfifo /tmp/.bashrc /tmp/.profile /tmp/.inputrc .gitconfig /tmp/.gitconfig",
    "socket": 'python3 -c "import socket; [socket.socket(socket.AF_UNIX).bind(p) for p in '
    "('/tmp/.bash_history', 'sock')]\"",
    "symlink-loops": "ln -s loop-a loop-b; ln -s loop-b loop-a; ln -s /tmp/l2 /tmp/l1; "
    "ln -s /tmp/l1 /tmp/l2; ln -s . self",
    "startup-files": "for f in /tmp/.bashrc /tmp/.bash_profile /tmp/.profile .bashrc; do "
    "echo 'exit 3' > $f; done; printf 'import os\\nos._exit(3)\\n' | tee "
    "sitecustomize.py usercustomize.py /tmp/sitecustomize.py >/dev/null",
    "unreadable-dirs": "mkdir -p locked/inner /tmp/locked && chmod 000 locked /tmp/locked",
    "unreadable-git": "chmod -R 000 .git",
    "full-tmpfs": "dd if=/dev/zero of=/tmp/fill bs=1M count=100000 2>/dev/null; "
    "dd if=/dev/zero of=fill bs=1M count=100000 2>/dev/null; true",
    "no-inodes": "mkdir -p /tmp/many && cd /tmp/many && for i in $(seq 1 40000); do "
    ": > $i 2>/dev/null || break; done; true",
    "chmod-000-workspace": "chmod 000 .",
    "chmod-000-tmp": "chmod 000 /tmp",
}


@settings(
    max_examples=14,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    states=st.lists(st.sampled_from(sorted(HOSTILE_STATES)), min_size=1, max_size=3, unique=True),
    shell_exits=st.booleans(),
)
@example(states=["fifo-history"], shell_exits=True)  # blocked every new shell: infra_error
@example(states=["chmod-000-workspace", "full-tmpfs"], shell_exits=True)
def test_no_file_system_state_the_agent_leaves_makes_an_infra_error(states, shell_exits):
    """Whatever the agent leaves behind in its workspace and /tmp (then, or not, ending its
    shell), the next commands, a read, a write and the grading all end as the agent's
    success or failure, never ``infra_error``."""
    env = gym.make("repogym/retry-zero-v0", limits=Limits(workspace_mb=32))
    try:
        env.reset(seed=0)
        setup = "; ".join(HOSTILE_STATES[s] for s in states) + ("; exit" if shell_exits else "")
        steps = [
            call("bash", command=setup),
            call("bash", command="echo alive; ls"),
            call("read", path="retry.py"),
            call("write", path="note.txt", content="x"),
            call("bash", command="cd /; cd /workspace; pwd"),
            call("submit"),
        ]
        for action in steps:
            obs, _, term, trunc, info = env.step(action)
            assert info["infra_error"] == "", (states, action, obs[-600:], info)
            if term or trunc:
                break
        assert term or trunc
        assert info["graded"], info
    finally:
        env.close()
