"""A real ``repogym serve`` process per test module (loopback only), and leak checks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox.leases import temp_root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(
    url: str, method: str = "GET", body: object = None, headers: dict[str, str] | None = None
) -> tuple[int, dict, dict]:
    """(status, JSON body, headers) of one request; never raises on 4xx/5xx."""
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


class Server:
    """A ``repogym serve`` subprocess on a free loopback port."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "repogym.cli", "serve", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.proc.stdout.read()}")
            with contextlib.suppress(OSError):
                if http(self.url + "/health")[0] == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not come up within 60s")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def health(self) -> dict:
        return http(self.url + "/health")[1]

    def wait_sessions(self, n: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.health()["sessions"] != n:
            assert time.monotonic() < deadline, f"sessions stayed {self.health()}, not {n}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def leftovers(pid: int) -> list[str]:
    """Sandbox folders (leases) process ``pid`` holds or left, and the mounts inside them."""
    root = temp_root()
    folders = []
    for lock in (root / ".locks").glob("u*"):
        with contextlib.suppress(OSError):
            if lock.read_text().strip() == str(pid) and (root / lock.name).exists():
                folders.append(str(root / lock.name))
    mounts = [
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if any(line.split()[1].startswith(f + "/") for f in folders)
    ]
    return folders + mounts


def alive(pids: set[int]) -> set[int]:
    out = set()
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, 0)
            out.add(p)
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A server of every built-in task with room for 8 sessions."""
    srv = Server("--max-sessions", "8")
    yield srv
    srv.stop()
    assert leftovers(srv.pid) == []
