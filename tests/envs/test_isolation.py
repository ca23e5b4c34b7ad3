"""Escape attempts against the default bwrap sandbox. Every command here is 'the agent'."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

import repogym
from repogym.sandbox import BACKENDS, Limits
from repogym.sandbox.leases import MAX_LEASES, UID_BASE
from repogym.sandbox.process import ProcessSandbox
from tests.conftest import call, probe_network

HIDDEN_MARKER = "Hidden verifier tests for retry()"  # first line of the hidden test file


def test_runs_as_unprivileged_uid(shell):
    out = shell("id -u; id -g; grep Cap /proc/self/status")
    lines = out.splitlines()
    uid = int(lines[0])
    if os.geteuid() == 0:  # a uid of the env's own lease, never root or a host user's
        assert UID_BASE <= uid < UID_BASE + MAX_LEASES, uid
    assert lines[1] == "65534"
    assert all(line.split()[-1] == "0000000000000000" for line in lines[2:7])


def test_no_internet_and_no_host_loopback(shell):
    out = probe_network(shell)
    assert "OPEN" not in out and out.count("blocked") == 3
    assert out.strip().splitlines()[-2] == "lo"  # loopback is the only interface


def test_git_history_is_one_commit_and_nothing_else(shell):
    out = shell(
        "git log --all --oneline | wc -l; git reflog | wc -l; git tag | wc -l; "
        "git remote | wc -l; git stash list | wc -l; ls .git; "
        "git log -1 --format='%an %ad' --date=iso"
    )
    lines = out.splitlines()
    assert lines[:5] == ["1", "0", "0", "0", "0"], out
    listing = set(lines[5:-2])
    assert listing <= {"HEAD", "config", "index", "objects", "refs", "packed-refs"}, listing
    assert "repogym 2000-01-01" in lines[-2]


def test_host_environment_is_invisible(monkeypatch):
    monkeypatch.setenv("REPOGYM_SECRET_TOKEN", "s3cr3t-value-4242")
    env = gym.make("repogym/retry-zero-v0")
    try:
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
    finally:
        env.close()
    assert "END" in obs and "s3cr3t-value-4242" not in obs
    assert "REPOGYM_SECRET_TOKEN" not in obs


def test_host_files_homes_and_checkout_are_unreadable(shell):
    checkout = Path(repogym.__file__).resolve().parents[1]
    out = shell(
        f"ls -a /root /home 2>&1; ls {checkout} 2>&1; cat /etc/shadow 2>&1; "
        f"ls {Path.home()} 2>&1; ls /var /srv /mnt /boot 2>&1; echo END"
    )
    assert "No such file" in out and "END" in out
    assert "pyproject.toml" not in out and "root:" not in out


def test_hidden_tests_gold_and_task_files_are_not_findable(shell):
    out = shell(
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( "
        "-name task.toml -o -name solution.patch -o -name loop_counter.patch \\) -print "
        f"2>/dev/null; grep -rlsF '{HIDDEN_MARKER}' / --exclude-dir=proc "
        "--exclude-dir=sys --exclude-dir=dev --exclude-dir=usr 2>/dev/null; "
        "python3 -c 'import repogym' 2>&1 | tail -1; echo END"
    )
    lines = out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("ModuleNotFoundError"), out  # nothing found
    assert lines[1:] == ["END", "[exit code: 0]"]


def test_writes_outside_workspace_fail(shell):
    out = shell(
        "for p in /usr/x /etc/x /opt/python/x /x /proc/x /opt/repogym/site/x; do "
        "touch $p 2>/dev/null && echo WROTE $p; done; touch ok_here && echo inside-ok"
    )
    assert "WROTE" not in out and "inside-ok" in out


def _fresh_env(**limits: object) -> gym.Env:
    env = gym.make("repogym/retry-zero-v0", limits=Limits(**limits), max_episode_steps=100)
    env.reset(seed=0)
    return env


def _alive(env: gym.Env) -> bool:
    """The env still runs commands (a fork bomb left as a background job may print first)."""
    obs, *_ = env.step(call("bash", command="echo alive-$((6 * 7))"))
    return "alive-42\n" in obs


def test_fork_bomb_is_contained():
    env = _fresh_env(timeout_s=10, pids=64)
    try:
        _obs, _, _, _, _info = env.step(call("bash", command=":(){ :|:& };: ; sleep 2; echo done"))
        assert _alive(env)
    finally:
        env.close()


def test_huge_allocation_is_contained():
    env = _fresh_env(memory_mb=512, timeout_s=20)
    try:
        obs, _, _, _, info = env.step(
            call(
                "bash",
                command=("python3 -c 'b = bytearray(16 * 1024**3); print(\"ALLOCATED\", len(b))'"),
            )
        )
        assert "ALLOCATED" not in obs and info["exit_code"] != 0
        assert _alive(env)
    finally:
        env.close()


def test_huge_output_is_capped():
    env = _fresh_env(output_bytes=1 << 20)
    try:
        obs, _, _, _, _info = env.step(
            call("bash", command="head -c 50000000 /dev/zero | tr '\\0' a")
        )
        assert len(obs) < 40_000 and "output limit reached" in obs
        assert _alive(env)
    finally:
        env.close()


def _host_sleeps(marker: str = "sleep 9999") -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
    return [line for line in ps.splitlines() if marker in line]


def test_sleep_is_killed_and_background_processes_end_with_the_episode(monkeypatch):
    alive_at_grading: list[list[str]] = []
    grade = repogym.grading.grader.grade

    def watched_grade(*args: object, **kwargs: object):
        alive_at_grading.append(_host_sleeps())
        return grade(*args, **kwargs)

    monkeypatch.setattr(repogym.grading.grader, "grade", watched_grade)
    env = _fresh_env(timeout_s=2)
    try:
        obs, _, _, _, info = env.step(call("bash", command="cd /tmp; sleep 100000"))
        assert info["timed_out"] and "timed out" in obs
        env.step(call("bash", command="(setsid sleep 99999 &) ; nohup sleep 99998 & echo bg"))
        assert _alive(env)
        assert len(_host_sleeps()) == 2  # background jobs live on between steps, as in a
        obs, *_ = env.step(call("bash", command="pwd"))  # terminal, and so does the shell
        assert obs.startswith("/tmp\n")
        env.step(call("submit"))
    finally:
        env.close()
    assert alive_at_grading == [[]]  # ...but nothing of the episode runs while it is graded
    assert _host_sleeps() == [] and _host_sleeps("sleep 100000") == []


def test_fresh_shell_lets_nothing_outlive_a_command():
    env = gym.make(
        "repogym/retry-zero-v0", shell="fresh", limits=Limits(timeout_s=2), max_episode_steps=100
    )
    try:
        env.reset(seed=0)
        obs, _, _, _, info = env.step(call("bash", command="sleep 100000"))
        assert info["timed_out"] and "timed out" in obs
        env.step(
            call(
                "bash",
                command="cd /tmp; export X=1; (setsid sleep 99997 &) ; nohup sleep 99996 & echo bg",
            )
        )
        assert _host_sleeps("sleep 9999") == []
        obs, *_ = env.step(call("bash", command="pwd; echo X=${X:-unset}"))
        assert obs.startswith("/workspace\nX=unset\n")
    finally:
        env.close()


def test_nothing_left_after_close():
    env = gym.make("repogym/retry-zero-v0")
    env.reset(seed=0)
    env.step(call("bash", command="sleep 30 & echo started"))
    session = env.unwrapped.session
    sandbox = session.sandbox
    paths = [
        sandbox.workspace.path,
        sandbox.workspace.path.parent,
        session.template.parent,
        sandbox.workspace.lease_dir,
    ]
    cgroups = list(sandbox.cgroup.dirs) if sandbox.cgroup else []
    mounts = Path("/proc/mounts").read_text()
    assert os.geteuid() != 0 or str(sandbox.workspace.path) in mounts  # overlay as root
    env.step(call("submit"))
    env.close()
    env.close()
    mounts = Path("/proc/mounts").read_text()
    for p in paths:
        assert not p.exists() and not _mounted_under(p, mounts), p
    assert not any(d.exists() for d in cgroups)
    procs = subprocess.run(
        ["ps", "-u", str(sandbox.workspace.uid), "-o", "args="],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "sleep 30" not in procs.stdout


def test_symlinks_out_of_the_workspace_leak_nothing(make_env, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host-only-content-777")
    secret.chmod(0o644)
    tmp_path.chmod(0o755)
    env = make_env()
    env.reset(seed=0)
    env.step(call("bash", command=f"ln -s {secret} leak.txt; ln -s /etc/shadow shadow"))
    obs, *_ = env.step(call("read", path="leak.txt"))
    assert "host-only-content-777" not in obs
    obs, *_ = env.step(call("bash", command="cat leak.txt shadow 2>&1"))
    assert "host-only-content-777" not in obs and "root:" not in obs
    _, _, _, _, info = env.step(call("submit"))
    assert "host-only-content-777" not in info["diff"]
    assert f"+{secret}" in info["diff"] or str(secret) in info["diff"]  # the link, not the file


def test_workspace_writes_never_reach_the_template(make_env, retry_task):
    env = make_env()
    env.reset(seed=0)
    env.step(call("bash", command="echo CORRUPTED > retry.py; rm -rf .git"))
    template = env.unwrapped.session.template
    assert "CORRUPTED" not in (template / "retry.py").read_text()
    assert (template / ".git").is_dir()
    env.reset(seed=0)
    obs, *_ = env.step(call("bash", command="head -c 200 retry.py; git status --short"))
    assert "CORRUPTED" not in obs
    assert (
        retry_task.repo_dir.joinpath("retry.py")
        .read_text()
        .startswith((template / "retry.py").read_text()[:50])
    )


@pytest.mark.parametrize("backend", ["process"])
def test_process_backend_is_opt_in_and_warns(backend):
    with pytest.warns(RuntimeWarning, match="NO isolation"):
        env = gym.make("repogym/retry-zero-v0", sandbox=backend)
        env.reset(seed=0)
    try:
        obs, *_ = env.step(call("bash", command="echo hi"))
        assert "hi" in obs
    finally:
        env.close()
    assert gym.make("repogym/retry-zero-v0").unwrapped.sandbox_backend == "bwrap"


@pytest.mark.parametrize("shell", ["persistent", "fresh"])
def test_check_env_and_shell_argument(shell):
    from gymnasium.utils.env_checker import check_env

    env = gym.make("repogym/retry-zero-v0", shell=shell)
    try:
        check_env(env.unwrapped)
        _, info = env.reset(seed=0)
        assert info["shell"] == shell
    finally:
        env.close()
    with pytest.raises(ValueError, match="unknown shell 'tty'.*Fix"):
        gym.make("repogym/retry-zero-v0", shell="tty")


class _NoShellSandbox(ProcessSandbox):
    """A backend from before ``Sandbox.shell()`` (no persistent shell)."""

    shell = None


def test_a_backend_without_a_shell_says_to_use_fresh(monkeypatch):
    monkeypatch.setitem(BACKENDS, "noshell", f"{__name__}:_NoShellSandbox")
    env = gym.make("repogym/retry-zero-v0", sandbox="noshell")
    try:
        with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="shell='fresh'"):
            env.reset(seed=0)
    finally:
        env.close()
    env = gym.make("repogym/retry-zero-v0", sandbox="noshell", shell="fresh")
    try:
        with pytest.warns(RuntimeWarning):
            env.reset(seed=0)
        obs, *_ = env.step(call("bash", command="echo fresh-ok"))
        assert obs.startswith("fresh-ok")
    finally:
        env.close()


def _mounted_under(folder: Path, mounts: str) -> bool:
    """True if /proc/mounts text ``mounts`` has a mount point at or below ``folder``."""
    points = [line.split()[1] for line in mounts.splitlines()]
    return any(m == str(folder) or m.startswith(f"{folder}/") for m in points)
