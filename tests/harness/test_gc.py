"""``repogym gc`` with real processes: leftovers whose owner is dead, is a reused pid, or has
exec'd into another program are removed; those of a live repogym (Python) owner stay."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox.leases import temp_root
from repogym.sandbox.limits import CGROUP_ROOT

from .conftest import run_cli

ROOT = os.geteuid() == 0


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _spawn(started: list[subprocess.Popen], *argv: str) -> int:
    started.append(subprocess.Popen(list(argv)))
    return started[-1].pid


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _legacy(pid: int) -> Path:
    """A workspace folder as repogym wrote them before leases: named after its owner pid."""
    folder = temp_root().parent / f"repogym-ws-{pid}-rgtest{secrets.token_hex(3)}"
    (folder / "merged").mkdir(parents=True)
    return folder


def test_gc_reaps_leftovers_of_gone_owners_and_keeps_live_ones(
    processes: list[subprocess.Popen],
) -> None:
    python = [sys.executable, "-c", "import time; time.sleep(600)"]
    owner = _spawn(processes, *python)
    exec_d = _spawn(processes, "sleep", "600")  # alive, but no longer a Python process
    time.sleep(0.2)
    kept, gone = _legacy(owner), [_legacy(exec_d), _legacy(_dead_pid())]
    reused = _legacy(_spawn(processes, *python))
    hour_ago = time.time() - 3600  # made long before the process that has its pid now
    os.utime(reused, (hour_ago, hour_ago))
    gone.append(reused)
    if ROOT:
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(gone[0] / "merged")], check=True)
    groups = {}
    if ROOT and (CGROUP_ROOT / "pids" / "cgroup.procs").exists():
        for pid in (owner, exec_d):
            groups[pid] = CGROUP_ROOT / "pids" / f"repogym-{pid}-{secrets.token_hex(4)}"
            groups[pid].mkdir()
    try:
        proc = run_cli("gc", "--no-docker")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert kept.exists(), proc.stdout  # its live Python owner predates it
        for folder in gone:
            assert not folder.exists() and str(folder) in proc.stdout, folder
        assert f" {gone[0]}/merged " not in Path("/proc/mounts").read_text()
        if groups:
            assert groups[owner].exists() and not groups[exec_d].exists(), proc.stdout
    finally:
        subprocess.run(["rm", "-rf", str(kept)], check=False)
        for g in groups.values():
            if g.exists():
                g.rmdir()


@pytest.fixture
def engine() -> Iterator[object]:
    """The Docker engine, as the docker tests get it (skips without one)."""
    docker_setup = pytest.importorskip("repogym.sandbox.docker_setup")
    try:
        setup = docker_setup.ensure()
    except Exception as e:  # any set-up failure becomes the skip reason
        pytest.skip(f"no Docker engine could be started: {e}")
    yield setup
    if setup.started and not os.environ.get("REPOGYM_KEEP_DOCKER"):
        docker_setup.stop_daemon()


def test_gc_removes_containers_whose_owner_pid_is_not_the_owner(
    engine: object, processes: list[subprocess.Popen]
) -> None:
    import socket

    from repogym.sandbox.docker_setup import LABEL, client

    c = client(engine.base_url)
    exec_d = _spawn(processes, "sleep", "600")
    ids = {}
    try:
        for name, pid in (("live", os.getpid()), ("execd", exec_d), ("dead", _dead_pid())):
            labels = {
                LABEL: "1",
                f"{LABEL}.owner": f"{socket.gethostname()}:{pid}",
                f"{LABEL}.created": str(int(time.time())),
            }
            ids[name] = c.api.create_container(
                engine.image,
                ["true"],
                labels=labels,
                name=f"rgtest-gc-{name}-{secrets.token_hex(3)}",
            )["Id"]
        proc = run_cli("gc", "--docker-host", engine.base_url or "")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        left = {ctr["Id"] for ctr in c.api.containers(all=True, filters={"label": LABEL})}
        assert ids["live"] in left  # this test's own Python process
        assert ids["execd"] not in left and ids["dead"] not in left, proc.stdout
    finally:
        for cid in ids.values():
            try:
                c.api.remove_container(cid, force=True)
            except Exception:  # already removed by gc
                pass
        c.close()
