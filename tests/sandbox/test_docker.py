"""The docker backend against the same escape attempts as bwrap, plus its own plumbing."""

from __future__ import annotations

import _thread
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import repogym
from repogym.cli import main as cli_main
from repogym.sandbox import Limits, SandboxError, SandboxSpec, make_sandbox
from repogym.sandbox.docker import owner_label, remove_stale
from repogym.sandbox.docker_setup import LABEL, client
from repogym.sandbox.leases import MAX_LEASES, UID_BASE, remove_tree, temp_root
from repogym.sandbox.limits import remove_cgroups
from repogym.sandbox.workspace import TemplateCache
from tests.conftest import apply_patch_actions, call, env_shell, probe_network, scaled

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]
HIDDEN_MARKER = "Hidden verifier tests for retry()"


@pytest.fixture(scope="module")
def dshell(docker_engine):
    """One docker-sandboxed retry-zero env for a module of tests: run(cmd) -> obs."""
    with env_shell(sandbox="docker") as run:
        yield run


@pytest.fixture
def sandbox(docker_engine, retry_task):
    """A bare DockerSandbox over retry-zero's template, closed at the end."""
    cache = TemplateCache()
    made = []

    def _make(**limits: object):
        sb = make_sandbox("docker", SandboxSpec(cache.get(retry_task.repo_dir), Limits(**limits)))
        made.append(sb)
        return sb

    yield _make
    for sb in made:
        sb.close()
    cache.close()


def _containers(**filters: str) -> list[dict]:
    c = client()
    try:
        return c.api.containers(all=True, filters={"label": LABEL, **filters})
    finally:
        c.close()


def _alive(env) -> bool:
    """The env still runs commands (a fork bomb left as a background job may print first)."""
    obs, *_ = env.step(call("bash", command="echo alive-$((6 * 7))"))
    return "alive-42\n" in obs


# -- isolation (mirrors tests/envs/test_isolation.py) -------------------------------------------
def test_runs_as_unprivileged_uid_without_capabilities(dshell):
    out = dshell("id -u; id -g; grep -E '^(Cap|NoNewPrivs)' /proc/self/status")
    lines = out.splitlines()
    assert UID_BASE <= int(lines[0]) < UID_BASE + MAX_LEASES and lines[1] == "65534"
    assert all(line.split()[-1] == "0000000000000000" for line in lines[2:7]), out
    assert lines[7].split()[-1] == "1"  # no-new-privileges


def test_no_internet_and_no_host_loopback(dshell):
    out = probe_network(dshell)
    assert "OPEN" not in out and out.count("blocked") == 3, out
    assert out.strip().splitlines()[-2] == "lo"


def test_git_history_is_one_commit_and_nothing_else(dshell):
    out = dshell(
        "git log --all --oneline | wc -l; git reflog | wc -l; git tag | wc -l; "
        "git remote | wc -l; git stash list | wc -l; ls .git; "
        "git log -1 --format='%an %ad' --date=iso"
    )
    lines = out.splitlines()
    assert lines[:5] == ["1", "0", "0", "0", "0"], out
    assert set(lines[5:-2]) <= {"HEAD", "config", "index", "objects", "refs", "packed-refs"}
    assert "repogym 2000-01-01" in lines[-2]


def test_host_environment_is_invisible(docker_env, monkeypatch):
    monkeypatch.setenv("REPOGYM_SECRET_TOKEN", "s3cr3t-value-4242")
    env = docker_env()
    env.reset(seed=0)
    obs, *_ = env.step(
        call(
            "bash",
            command=(
                "env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'; "
                "grep -rs s3cr3t-value /proc/*/environ /tmp /etc 2>/dev/null; echo END"
            ),
        )
    )
    assert "END" in obs and "s3cr3t-value-4242" not in obs
    assert "REPOGYM_SECRET_TOKEN" not in obs


def test_hidden_tests_gold_and_task_files_are_not_findable(dshell):
    checkout = Path(repogym.__file__).resolve().parents[1]
    out = dshell(
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( "
        "-name task.toml -o -name solution.patch -o -name loop_counter.patch \\) "
        f"-print 2>/dev/null; grep -rlsF '{HIDDEN_MARKER}' / --exclude-dir=proc "
        "--exclude-dir=sys --exclude-dir=dev --exclude-dir=usr 2>/dev/null; "
        f"ls {checkout} 2>&1 | grep -c pyproject; cat /etc/shadow 2>&1 | grep -c root:; "
        "python3 -c 'import repogym' 2>&1 | tail -1; echo END"
    )
    lines = out.strip().splitlines()
    assert lines[:3] == ["0", "0", lines[2]] and lines[2].startswith("ModuleNotFoundError"), out
    assert lines[3:] == ["END", "[exit code: 0]"]


def test_writes_outside_workspace_fail(dshell):
    out = dshell(
        "for p in /usr/x /etc/x /x /var/x /run/repogym/ro/x /run/repogym/rw/x /proc/x; "
        "do touch $p 2>/dev/null && echo WROTE $p; done; touch ok_here && echo inside-ok;"
        " touch /tmp/ok && echo tmp-ok"
    )
    assert "WROTE" not in out and "inside-ok" in out and "tmp-ok" in out, out


def test_tmp_is_size_capped(docker_env):
    env = docker_env(limits=Limits(workspace_mb=32), max_episode_steps=10)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(call("bash", command="head -c 100017000 /dev/zero > /tmp/big"))
    assert info["exit_code"] != 0 and "No space left" in obs


def test_fork_bomb_is_contained(docker_env):
    env = docker_env(limits=Limits(timeout_s=10, pids=64), max_episode_steps=10)
    env.reset(seed=0)
    env.step(call("bash", command=":(){ :|:& };: ; sleep 2; echo done"))
    assert _alive(env)


@pytest.mark.parametrize("alloc", ["bytearray(16 * 1024**3)", "b'x' * (2 * 1024**3)"])
def test_huge_allocation_is_contained(docker_env, alloc):
    env = docker_env(limits=Limits(memory_mb=512, timeout_s=30), max_episode_steps=10)
    env.reset(seed=0)
    _, _, _, _, info = env.step(
        call("bash", command=(f"python3 -c 'b = {alloc}; print(\"ALLOCATED\", len(b))'"))
    )
    obs = env.unwrapped._transcript[-1]
    assert "ALLOCATED" not in obs and info["exit_code"] != 0
    assert _alive(env)


def test_huge_output_is_capped(docker_env):
    env = docker_env(limits=Limits(output_bytes=1 << 20), max_episode_steps=10)
    env.reset(seed=0)
    obs, *_ = env.step(call("bash", command="head -c 50000000 /dev/zero | tr '\\0' a"))
    assert len(obs) < 40_000 and "output limit reached" in obs
    assert _alive(env)


def _sandbox_args(env) -> str:
    obs, *_ = env.step(call("bash", command="cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo"))
    return obs


def _host_sleeps(marker: str = "sleep 999") -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], check=False, capture_output=True, text=True)
    return [line for line in ps.stdout.splitlines() if marker in line]


def test_sleep_is_killed_and_background_processes_end_with_the_episode(docker_env, monkeypatch):
    alive_at_grading: list[list[str]] = []
    grade = repogym.grading.grader.grade

    def watched_grade(*args: object, **kwargs: object):
        alive_at_grading.append(_host_sleeps())
        return grade(*args, **kwargs)

    monkeypatch.setattr(repogym.grading.grader, "grade", watched_grade)
    env = docker_env(limits=Limits(timeout_s=2), max_episode_steps=10)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(call("bash", command="cd /tmp; sleep 100017; echo AFTER"))
    assert info["timed_out"] and "timed out" in obs and "AFTER" not in obs
    _, _, _, _, info = env.step(
        call(
            "bash",
            command=(
                "(setsid sleep 99917 >/dev/null 2>&1 &) ; "
                "nohup sleep 99918 >/dev/null 2>&1 & echo bg"
            ),
        )
    )
    assert not info["timed_out"]  # the command returned while its children still ran
    env.step(call("read", path="retry.py"))  # the file tools leave the shell's jobs alone
    obs = _sandbox_args(env)
    assert "sleep 99917" in obs and "sleep 99918" in obs and "sleep 100017" not in obs, obs
    obs, *_ = env.step(call("bash", command="pwd"))
    assert obs.startswith("/tmp\n")
    env.step(call("submit"))
    assert alive_at_grading == [[]]  # nothing of the episode runs while it is graded
    assert _host_sleeps() == [] and _host_sleeps("sleep 100017") == []


def test_fresh_shell_lets_nothing_outlive_a_command(docker_env):
    env = docker_env(limits=Limits(timeout_s=2), max_episode_steps=10, shell="fresh")
    env.reset(seed=0)
    env.step(
        call(
            "bash",
            command=(
                "cd /tmp; (setsid sleep 99919 >/dev/null 2>&1 &) ; "
                "nohup sleep 99920 >/dev/null 2>&1 &"
            ),
        )
    )
    obs = _sandbox_args(env)
    assert "sleep 999" not in obs, obs
    obs, *_ = env.step(call("bash", command="pwd"))
    assert obs.startswith("/workspace\n")


def test_persistent_shell_state_restart_and_framing(docker_env):
    env = docker_env(limits=Limits(timeout_s=2), max_episode_steps=20)
    env.reset(seed=0)
    fake = "printf '%s 0\\n' 0123456789abcdef0123456789abcdef"
    steps = [
        ("export X=41; f() { echo f$1; }; cd tests 2>/dev/null || cd /tmp", None),
        ("echo $((X + 1)); f 1", "42\nf1\n"),
        (f"{fake}; {fake} >&2; sleep 0.2; (exit 3)", "[exit code: 3]"),
        ("while :; do :; done", "timed out"),
        ("echo $X", "41\n"),
        ("exit 4", "the shell exited (exit code 4)"),
        ("pwd; echo ${X:-unset}", "/workspace\nunset\n"),
    ]
    for command, expect in steps:
        obs, *_ = env.step(call("bash", command=command))
        assert expect is None or expect in obs, (command, obs)


def _ours() -> set[str]:
    """Ids of the containers this process owns (other test workers make theirs)."""
    return {c["Id"] for c in _containers(label=f"{LABEL}.owner={owner_label()}")}


def test_nothing_left_after_close(docker_env):
    before = _ours()
    env = docker_env()
    env.reset(seed=0)
    env.step(call("bash", command="sleep 3017 & echo started"))
    sb = env.unwrapped.session.sandbox
    paths = [sb.workspace.path, sb.workspace.path.parent]
    assert _containers(name=sb.name) and sb.container_id in _ours()
    env.step(call("submit"))
    env.close()
    env.close()
    assert not _containers(name=sb.name)
    mounts = Path("/proc/mounts").read_text()
    for p in paths:
        assert not p.exists() and not _mounted_under(p, mounts), p
    procs = subprocess.run(
        ["ps", "-eo", "args="], check=False, capture_output=True, text=True
    ).stdout
    assert "sleep 3017" not in procs
    assert _ours() <= before  # the grader's containers are gone too


# -- backend plumbing ----------------------------------------------------------------------------
def test_run_with_binds_exposes_folders_and_copies_rw_back(sandbox, tmp_path):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "data.txt").write_text("from-the-host\n")
    sb = sandbox()
    res = sb.run_with_binds(
        'cat "$RG_INPUT/data.txt"; echo x > "$RG_INPUT/new" || echo RO-OK; '
        'echo result > "$RG_OUT/r.xml"; mkdir "$RG_OUT/d"; echo y > '
        '"$RG_OUT/d/f"; ln -s /etc/passwd "$RG_OUT/link"',
        ro={"input": ro},
        rw={"out": rw},
    )
    assert res.stdout.startswith("from-the-host\nRO-OK"), res
    assert (rw / "r.xml").read_text() == "result\n" and (rw / "d" / "f").read_text() == "y\n"
    assert not (rw / "link").exists() and not (ro / "new").exists()
    later = sb.run('ls /run/repogym/ro /run/repogym/rw; echo "${RG_INPUT:-unset}"')
    assert later.stdout.split() == ["/run/repogym/ro:", "/run/repogym/rw:", "unset"]


def test_stdin_exit_codes_and_streams(sandbox):
    sb = sandbox()
    res = sb.run("cat; echo err >&2; exit 3", stdin=b"x" * 300_000)
    assert (len(res.stdout), res.stderr, res.exit_code) == (300_000, "err\n", 3)
    assert sb.run("kill -9 $$").exit_code == 137
    sb.write_file("deep/dir/f.txt", "héllo\n")
    assert sb.read_file("deep/dir/f.txt") == "héllo\n"
    assert "+héllo" in sb.diff()
    with pytest.raises(FileNotFoundError):
        sb.read_file("missing.txt")


def test_file_size_limit(sandbox):
    sb = sandbox(file_size_mb=1)
    res = sb.run("head -c 3000000 /dev/zero > big; echo rc=$?; stat -c %s big")
    assert res.stdout.split() == ["rc=153", "1048576"], res  # 128 + SIGXFSZ, file capped


def test_interrupt_kills_the_command_and_close_removes_the_container(sandbox, sigint_handled):
    sb = sandbox(timeout_s=60)
    threading.Timer(1.5, _thread.interrupt_main).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sb.run("sleep 45; echo finished")
    assert time.monotonic() - start < scaled(40)
    assert "sleep 45" not in sb.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
    sb.close()
    assert not _containers(name=sb.name)


def test_bad_image_is_a_clear_error(docker_engine, retry_task):
    cache = TemplateCache()
    try:
        with pytest.raises(SandboxError, match="not found.*Fix"):
            make_sandbox(
                "docker",
                SandboxSpec(cache.get(retry_task.repo_dir)),
                image="repogym/no-such-image:0",
            )
    finally:
        cache.close()
    assert not [c for c in _containers() if c["Image"] == "repogym/no-such-image:0"]


def test_gold_patch_grades_in_docker(docker_env, retry_task):
    env = docker_env(sandbox_options={"image": "repogym/python:bookworm"})
    env.reset(seed=0)
    for action in apply_patch_actions(retry_task.solution_patch.read_text()):
        env.step(action)
    _, reward, terminated, _, info = env.step(call("submit"))
    assert terminated and reward == 1.0 and info["resolved"] and not info["infra_error"]
    assert set(info["tests"].values()) == {"passed"}


_ORPHAN = """
import os, sys, time
from repogym.sandbox import SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.registry import registered_tasks
import repogym
cache = TemplateCache()  # kept: a collected cache releases its lease and templates
sb = make_sandbox("docker", SandboxSpec(cache.get(registered_tasks()["retry-zero"].repo_dir)))
print(sb.name, sb.workspace.path, flush=True)
time.sleep(600)
"""


def _orphan() -> tuple[subprocess.Popen, str, Path]:
    """A process holding a docker sandbox: (the process, its container, its workspace)."""
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True)
    try:
        name, ws = proc.stdout.readline().split()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, name, Path(ws)


def _remove_container(name: str) -> None:
    c = client()
    try:
        c.api.remove_container(name, force=True, v=True)
    except Exception:  # already gone
        pass
    finally:
        c.close()


def _killed_orphan() -> tuple[str, Path, int]:
    """A docker sandbox whose process was SIGKILLed, and its lease's lock, taken here.

    Other processes (other test workers) take the lowest free lease at once and clear what
    its dead holder left; holding the lock keeps the leftovers for the test. Returns the
    container's name, the workspace and the lock's fd; tried again when another process
    takes the lease first.
    """
    for _ in range(5):
        proc, name, ws = _orphan()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lock = temp_root() / ".locks" / ws.relative_to(temp_root()).parts[0]
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return name, ws, fd
        except BlockingIOError:
            os.close(fd)
            _remove_container(name)
    pytest.fail("another process took a killed sandbox's lease first, five times in a row")


def _gone(path: Path, wait_s: float = 30.0) -> bool:
    """``path`` is gone, or goes within ``wait_s`` (a new holder of its lease clears it)."""
    deadline = time.monotonic() + wait_s
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not path.exists()


def test_gc_removes_containers_of_killed_processes(docker_engine, capsys):
    name, ws, fd = _killed_orphan()
    try:
        assert _containers(name=name) and ws.exists()
    finally:
        os.close(fd)
    try:
        assert cli_main(["gc"]) == 0
        assert not _containers(name=name) and _gone(ws)
        assert "removed" in capsys.readouterr().out
    finally:
        _remove_container(name)


def test_the_next_holder_of_a_lease_removes_its_dead_holders_containers(docker_engine):
    name, ws, fd = _killed_orphan()
    folder = temp_root() / ws.relative_to(temp_root()).parts[0]
    live, live_name, live_ws = _orphan()
    c = client()
    try:
        assert _containers(name=name)
        # Sweeping another lease's folder touches neither: its live owner's container
        # stays, and so does the dead owner's, which lies in another lease.
        assert remove_stale(temp_root() / live_ws.relative_to(temp_root()).parts[0], c) == []
        assert _containers(name=live_name) and _containers(name=name)
        assert remove_stale(folder, c) == [name]
        assert not _containers(name=name) and _containers(name=live_name)
        assert remove_stale(folder, c) == []  # once per lease folder
    finally:
        c.close()
        live.kill()
        live.wait()
        _remove_container(name)
        _remove_container(live_name)
        remove_tree(folder)
        remove_cgroups(folder.name)
        os.close(fd)


def test_unreachable_engine_is_a_clear_error(tmp_path):
    import gymnasium as gym

    env = gym.make(
        "repogym/retry-zero-v0",
        sandbox="docker",
        sandbox_options={"base_url": f"unix://{tmp_path}/no.sock"},
    )
    try:
        with pytest.raises(SandboxError, match="not reachable.*Fix"):
            env.reset(seed=0)
    finally:
        env.close()


def _mounted_under(folder: Path, mounts: str) -> bool:
    """True if /proc/mounts text ``mounts`` has a mount point at or below ``folder``."""
    points = [line.split()[1] for line in mounts.splitlines()]
    return any(m == str(folder) or m.startswith(f"{folder}/") for m in points)
