"""Signals and clean-up with real processes: `repogym run` and plain Gymnasium scripts get
real SIGTERM/SIGINT/SIGHUP, then the mounts, lease folders, cgroups and the process table are
checked. The machine is shared, so checks are about the resources these processes held."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from repogym.sandbox.leases import temp_root
from repogym.sandbox.limits import default_signals
from tests.conftest import scaled

from .conftest import HERE, TASKS, cli_env, rows_of, run_cli

#: More tasks than workers, so that a new episode would start if the stop let it.
RUN_TASKS = [*TASKS, "empty-mean"]
#: The acceptance bound: the run is over, and everything removed, within this many seconds.
STOP_BOUND_S = 10.0


def _ppids() -> dict[int, int]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(stat.parent.name)] = int(fields[1])
    return out


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, now."""
    ppids, found, todo = _ppids(), {pid}, [pid]
    while todo:
        parent = todo.pop()
        for child, pp in ppids.items():
            if pp == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _held(marks: Path) -> dict[str, list[str]]:
    held: dict[str, list[str]] = {"paths": [], "cgroups": []}
    for f in marks.glob("*.json"):
        for k, v in json.loads(f.read_text()).items():
            held[k] += v
    return held


def _wait_for_marks(proc: subprocess.Popen, marks: Path, n: int) -> None:
    deadline = time.monotonic() + scaled(120)
    while len(list(marks.glob("*.json"))) < n:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else proc.returncode
        assert time.monotonic() < deadline, "the agents never reported"
        time.sleep(0.1)


def _assert_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + scaled(2.0)  # the kernel may take a moment to reap
    while [p for p in pids if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = {p: _cmdline(p) for p in pids if _alive(p)}
    assert not survivors, f"processes survived: {survivors}"


def assert_released(
    held: dict[str, list[str]], pids: set[int], running: frozenset[int] = frozenset()
) -> None:
    """No process, mount, workspace, lease lock or cgroup of ``pids`` is left (processes in
    ``running`` may still live, holding nothing)."""
    assert held["paths"] and held["cgroups"], held  # the check has something to check
    _assert_gone(pids - running)
    mounts = Path("/proc/mounts").read_text()
    root = temp_root()
    for path in held["paths"]:
        p = Path(path)
        # A lease's lock must be released (checked below); its folder may exist again: the
        # machine is shared and another owner may hold the same lease number since.
        if p.parent == root:
            continue
        assert not p.exists(), f"left behind: {path}"
        assert f" {path} " not in mounts and f" {path}/" not in mounts, f"still mounted: {path}"
    assert not [c for c in held["cgroups"] if Path(c).exists()], "cgroups left"
    locks = [
        line
        for line in Path("/proc/locks").read_text().splitlines()
        if len(line.split()) > 4 and line.split()[4].isdigit() and int(line.split()[4]) in pids
    ]
    assert not locks, locks


def _start_run(
    tmp_path: Path, *extra: str, workers: int = 2, hang: str = "act"
) -> tuple[subprocess.Popen, Path]:
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "run",
            "--agent",
            "rg_test_agents:HangOrOracle",
            "--workers",
            str(workers),
            "--tasks",
            ",".join(RUN_TASKS),
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ],
        env=cli_env(RG_TEST_MARK_DIR=str(marks), RG_TEST_HANG=hang),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_signals,
    )  # signals only
    _wait_for_marks(proc, marks, workers)
    if hang == "step":  # wait for the sandboxed `sleep` of every worker
        deadline = time.monotonic() + scaled(60)
        while sum(_cmdline(p) == "sleep 600" for p in descendants(proc.pid)) < workers:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
    return proc, marks


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _finish(proc: subprocess.Popen) -> tuple[str, float]:
    start = time.monotonic()
    try:
        output, _ = proc.communicate(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return output, time.monotonic() - start


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["TERM", "INT", "HUP"]
)
def test_a_signal_to_run_stops_it_cleanly_and_a_resume_completes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, marks = _start_run(tmp_path, hang="step")
    pids = descendants(proc.pid)
    assert len(pids) >= 7  # the driver, two workers, their sandboxes (bwrap, bash, sleep)
    os.kill(proc.pid, sig)  # the driver only, as `kill` and schedulers do
    output, took = _finish(proc)
    assert proc.returncode == -sig, output  # it dies of the signal, as without repogym
    assert took < scaled(STOP_BOUND_S), f"took {took:.1f}s\n{output}"
    assert "run the same command again to resume" in output
    assert_released(_held(marks), pids)
    out = tmp_path / "run"
    assert len(list((out / "trajectories").glob("*.jsonl"))) == 2  # no episode started after
    assert rows_of(out) == []  # interrupted episodes are not recorded
    if sig == signal.SIGTERM:
        proc = run_cli(
            "run",
            "--agent",
            "rg_test_agents:HangOrOracle",
            "--workers",
            "2",
            "--tasks",
            ",".join(RUN_TASKS),
            "--out",
            str(out),
            "--no-progress",
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows = rows_of(out)
        assert len(rows) == len(RUN_TASKS) and all(r["resolved"] for r in rows)


def test_ctrl_c_reaches_the_whole_group_and_leaves_nothing(tmp_path: Path) -> None:
    proc, marks = _start_run(tmp_path)
    pids = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    output, _ = _finish(proc)
    assert proc.returncode == -signal.SIGINT, output
    assert "again: cleaning up" not in output  # the workers' stop stayed graceful
    assert_released(_held(marks), pids)


def test_a_second_signal_forces_the_exit_and_still_cleans(tmp_path: Path) -> None:
    proc, marks = _start_run(tmp_path, workers=1)  # the driver itself holds the env
    pids = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)
    os.kill(proc.pid, signal.SIGTERM)
    output, took = _finish(proc)
    assert proc.returncode == -signal.SIGTERM, output
    assert took < scaled(STOP_BOUND_S)
    assert_released(_held(marks), pids)


SCRIPT = """
import gc, sys, time
import gymnasium as gym
import repogym
sys.path.insert(0, {here!r})
from rg_test_agents import report_resources
from repogym.sandbox import cleanup

cleanup.install_signal_handlers()  # what a program's entry point does (library code does not)
env = gym.make("repogym/retry-zero-v0")
env.reset(seed=0)
env.step('{{"tool": "bash", "args": {{"command": "echo ready"}}}}')
report_resources({marks!r})
{body}
"""


def _script(tmp_path: Path, body: str) -> tuple[subprocess.Popen, Path]:
    marks = tmp_path / "marks"
    marks.mkdir()
    code = SCRIPT.format(here=str(HERE), marks=str(marks), body=textwrap.dedent(body))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_signals,
    )  # signals only
    _wait_for_marks(proc, marks, 1)
    return proc, marks


@pytest.mark.parametrize(
    "sig, body",
    [
        (signal.SIGTERM, "with env:\n    time.sleep(3600)"),
        (signal.SIGTERM, "time.sleep(3600)"),
        (signal.SIGHUP, "time.sleep(3600)"),
        (signal.SIGINT, "time.sleep(3600)"),
    ],
    ids=["TERM-in-with", "TERM", "HUP", "INT-no-with"],
)
def test_a_plain_gymnasium_script_leaves_nothing_when_signalled(
    tmp_path: Path, sig: signal.Signals, body: str
) -> None:
    proc, marks = _script(tmp_path, body)
    pids = descendants(proc.pid)
    os.kill(proc.pid, sig)
    output, took = _finish(proc)
    assert proc.returncode == -sig, output  # dies of the signal (Python's own way for INT)
    assert took < scaled(STOP_BOUND_S)
    assert_released(_held(marks), pids)


def test_an_env_dropped_without_close_is_cleaned_when_collected(tmp_path: Path) -> None:
    body = """
    import json, os
    from repogym.sandbox import cleanup
    before = cleanup.live_count()
    del env
    gc.collect()
    print(json.dumps({"before": before, "after": cleanup.live_count()}), flush=True)
    time.sleep(3600)
    """
    proc, marks = _script(tmp_path, body)
    line = proc.stdout.readline()
    counts = json.loads(line)
    assert counts["before"] >= 1 and counts["after"] == 0, counts
    assert_released(_held(marks), {proc.pid}, running=frozenset({proc.pid}))
    proc.kill()
    proc.wait()


def _leases_held_by(pids: set[int]) -> list[Path]:
    """Lease folders whose lock one of ``pids`` holds (from /proc/locks)."""
    root = temp_root()
    by_inode = {
        (os.stat(p).st_dev, os.stat(p).st_ino): root / p.name for p in (root / ".locks").glob("u*")
    }
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[4].isdigit() and int(parts[4]) in pids:
            major, minor, ino = parts[5].split(":")
            key = (os.makedev(int(major, 16), int(minor, 16)), int(ino))
            if key in by_inode:
                held.append(by_inode[key])
    return held


def test_a_signal_to_train_stops_it_cleanly(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "train",
            "--algo",
            "grpo",
            "--model",
            "tiny",
            "--steps",
            "500",
            "--task",
            "retry-zero",
            "--out",
            str(tmp_path / "t"),
        ],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_signals,
    )  # signals only
    deadline, workspaces = time.monotonic() + 240, []
    while not workspaces:  # episodes are running: a lease with a workspace in it
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "training never started an episode"
        time.sleep(0.2)
        pids = descendants(proc.pid)
        workspaces = [w for lease in _leases_held_by(pids) for w in lease.glob("w/*")]
    os.kill(proc.pid, signal.SIGTERM)
    output, took = _finish(proc)
    assert proc.returncode == -signal.SIGTERM, output
    assert took < scaled(STOP_BOUND_S), f"took {took:.1f}s\n{output}"
    _assert_gone(pids)
    assert _leases_held_by(pids) == [] and not [w for w in workspaces if w.exists()]


def test_a_signal_to_validate_drops_the_queued_gradings(tmp_path: Path) -> None:
    """`repogym validate` over every built-in queues ~300 gradings (minutes with one worker;
    `suite fetch` and `suite build` queue theirs the same way): a signal must end it once
    the grading in flight is done, not after the queue."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "repogym.cli", "validate", "--workers", "1", "--reruns", "1"],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_signals,
    )  # signals only
    deadline = time.monotonic() + scaled(120)
    while not any(Path(_cmdline(p).split(" ")[0]).name == "bwrap" for p in descendants(proc.pid)):
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no grading ever started"
        time.sleep(0.1)
    pids = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGINT)
    output, took = _finish(proc)
    assert proc.returncode != 0, output
    assert took < scaled(STOP_BOUND_S), f"took {took:.1f}s\n{output}"
    _assert_gone(pids)
    assert _leases_held_by(pids) == []
