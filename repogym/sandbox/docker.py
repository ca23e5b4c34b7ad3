"""The docker backend: one container per sandbox, one ``exec`` per command.

The container runs a Debian-like image that has ``python`` (with pytest), ``bash`` and
``git`` (default ``repogym/python:bookworm``, built offline by
:mod:`repogym.sandbox.docker_setup`). It has no network (``network_mode="none"``), no
capabilities, no-new-privileges, the seccomp policy of :mod:`repogym.sandbox.seccomp` (the
same one bwrap applies), pids/memory/CPU limits and rlimits, a read-only root filesystem,
and the per-sandbox workspace and ``/tmp`` (the same overlay on a tmpfs capped in bytes and
inodes that bwrap uses) bind-mounted at ``/workspace`` and ``/tmp`` (and a task's
environment, read-only, at ``/opt/repogym/env``, first on ``PYTHONPATH``; its Python version
must be the image's). Commands run as the
lease's uid with an environment built here (no host variable reaches the container). PID 1
is docker's init reaping orphans, with an idle root-owned ``sleep`` the sandbox user cannot
signal.

As with bwrap, nothing outlives a ``run``: each one runs under a small bash wrapper that
SIGKILLs every process of the sandbox user (``kill -9 -1``, a builtin, so it works even
when the pids limit is reached) before and after it. A timeout or the output cap freezes
the container, kills the user's processes from the host and thaws it; if any survive the
container is restarted (the workspace survives, ``/tmp`` does not).

``shell()`` starts a persistent bash (:mod:`repogym.sandbox.persistent`) with one more
``exec`` as the sandbox user. Its standard input, output and control fd are FIFOs that the
host makes in a folder bound read-only into the container, opens, and deletes once the
shell has opened its ends: nothing else can reach them, and its output keeps its order
with its records (docker's own stream would not). The host lists the shell's processes in
the container's cgroup and signals them by pid. While a shell runs, ``run`` commands (the
file tools) skip the ``kill -9 -1`` wrapper; a ``run`` that times out still kills every
process of the user, the shell's included (its next command then starts a new one), and
so does a shell that ends.

Containers carry the label ``repogym.sandbox`` (and the owner's host and pid) and are
removed by ``close()``, on a failed start and on interrupt; ``repogym gc`` removes those
a crashed process left behind, and so does the next owner of its lease, at its first
container start. The engine must run on this machine (bind mounts).
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import stat
import struct
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from docker.types import Mount, Ulimit

from repogym.sandbox import cleanup, seccomp
from repogym.sandbox._exec import TIMEOUT_EXIT
from repogym.sandbox.base import (
    ENV_MOUNT,
    WORKSPACE,
    ExecResult,
    Interpreter,
    Sandbox,
    SandboxError,
    SandboxSpec,
)
from repogym.sandbox.docker_setup import DEFAULT_IMAGE, LABEL, client, default_base_url
from repogym.sandbox.leases import SANDBOX_GID, lease_of
from repogym.sandbox.owners import owner_gone
from repogym.sandbox.persistent import (
    CONTROL_FD,
    EXEC_BASH,
    START_TIMEOUT_S,
    ShellProcess,
)
from repogym.sandbox.workspace import Workspace

BIND_ROOT = "/run/repogym"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Runs the command ($1) with every other process of the sandbox user killed before and after.
WRAPPER = 'kill -9 -1 2>/dev/null; /bin/bash -c "$1"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'
#: The same without the kills, while a persistent shell (and its jobs) must live on.
PLAIN = '/bin/bash -c "$1"'
#: Starts the persistent shell on the FIFOs in folder $1.
SHELL_START = f'exec <"$1/in" >"$1/out" 2>&1 {CONTROL_FD}>"$1/ctl"; {EXEC_BASH}'
_SETUP_HINT = (
    "Fix: run `python -m repogym.sandbox.docker_setup up` (as root: starts a private "
    "dockerd and builds repogym/python:bookworm offline), or set REPOGYM_DOCKER_HOST "
    "to a running Docker engine"
)
_CHECK = (
    "command -v python >/dev/null && command -v git >/dev/null && python -c 'import pytest' "
    "&& python -c 'import platform; print(platform.python_version())'"
)
#: What a dead or unreachable engine raises through the SDK.
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
#: (engine, image) -> the image's Python version, once checked.
_checked: dict[tuple[str, str], str] = {}
_checked_lock = threading.Lock()


def container_env(environment: bool = False) -> dict[str, str]:
    """The whole environment a command starts with (docker adds only HOSTNAME);
    ``environment``: a task's packages are bound at :data:`ENV_MOUNT`."""
    env = {
        "PATH": f"{ENV_MOUNT}/bin:{PATH}" if environment else PATH,
        "HOME": "/tmp",
        "USER": "nobody",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }
    if environment:
        env["PYTHONPATH"] = ENV_MOUNT
    return env


def owner_label() -> str:
    """``host:pid`` of this process, stored on every container for ``repogym gc``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class DockerSandbox(Sandbox):
    """A Docker container over one workspace. See the module docstring.

    Args:
        spec: Template and limits.
        image: An image with ``python`` (+ pytest), ``bash`` and ``git``.
        base_url: The engine (default: :func:`~repogym.sandbox.docker_setup.default_base_url`).
        cpus: CPU quota in cores (``nano_cpus``).
    """

    backend = "docker"

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        image: str = DEFAULT_IMAGE,
        base_url: str | None = None,
        cpus: float = 1.0,
    ) -> None:
        self._open(spec)
        self.image = image
        self.base_url = base_url or default_base_url()
        self.interpreter = Interpreter("python3", (), {"path": PATH})
        self.dependencies = None
        self._client: Any = None
        self._xfer: dict[str, Path] | None = None
        self.name = f"repogym-{uuid.uuid4().hex[:12]}"
        self.container_id: str | None = None
        self._cleanup: Any = None
        try:
            self._client = self._connect()
            self.workspace = Workspace(
                spec.template, spec.limits.workspace_mb, spec.limits.inodes, spec.copy_of
            )
            self.uid = self.workspace.uid
            self.dependencies = self.workspace.dependencies
            if self.dependencies is not None:
                self.interpreter = Interpreter(
                    "python3", (ENV_MOUNT,), {"path": f"{ENV_MOUNT}/bin:{PATH}"}
                )
            self._xfer = self._make_xfer()
            remove_stale(lease_of(spec.template)[0], self._client)
            self._start_container(cpus)
            # Removed by close(), or at exit / on a fatal signal if close() never runs.
            self._cleanup = cleanup.register(self, _remove_container, self.base_url, self.name)
            self._check_image()
        except BaseException:
            self.close()
            raise

    # -- start-up ------------------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            c = client(self.base_url)
            c.ping()
        except _ENGINE_ERRORS as e:
            raise SandboxError(
                f"the Docker engine ({self.base_url or 'docker default'}) is "
                f"not reachable: {e}. {_SETUP_HINT}"
            ) from e
        return c

    def _make_xfer(self) -> dict[str, Path]:
        # In the lease (gc and close() see them). What the container writes (rw) lies on the
        # workspace's capped tmpfs; what the host copies in (ro) lies outside it, so an agent
        # that filled its workspace cannot make the grader's copies fail.
        assert self.workspace is not None
        xfer = {"ro": self.workspace.beside("ro"), "rw": self.workspace.scratch("xfer")}
        for d in xfer.values():
            os.chmod(d, 0o755)
        return xfer

    def _host_config(self, cpus: float) -> dict[str, Any]:
        lim = self.limits
        mem = f"{lim.memory_mb}m"
        fsize = lim.file_size_mb * 1024 * 1024
        # As in bwrap: the cgroup limit is exact; RLIMIT_AS is a generous backstop that
        # refuses absurd reservations (a 16 GB calloc) that the cgroup would never see.
        as_limit = max(lim.memory_mb * 4 << 20, 8 << 30)
        assert self.workspace is not None and self._xfer is not None
        mounts = [
            Mount(WORKSPACE, str(self.workspace.path), type="bind"),
            Mount("/tmp", str(self.workspace.tmp), type="bind"),
            Mount(f"{BIND_ROOT}/ro", str(self._xfer["ro"]), type="bind", read_only=True),
            Mount(f"{BIND_ROOT}/rw", str(self._xfer["rw"]), type="bind"),
        ]
        if self.dependencies is not None:
            mounts.append(
                Mount(ENV_MOUNT, str(self.dependencies.site), type="bind", read_only=True)
            )
        passwd = self.workspace.lease_dir / "passwd"
        if passwd.is_file():
            mounts.append(Mount("/etc/passwd", str(passwd), type="bind", read_only=True))
        return self._client.api.create_host_config(
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges", f"seccomp={seccomp.docker_profile()}"],
            read_only=True,
            init=True,
            pids_limit=lim.pids,
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(cpus * 1e9),
            ulimits=[
                Ulimit(name="fsize", soft=fsize, hard=fsize),
                Ulimit(name="cpu", soft=lim.cpu_s, hard=lim.cpu_s + 5),
                Ulimit(name="as", soft=as_limit, hard=as_limit),
                Ulimit(name="core", soft=0, hard=0),
            ],
            mounts=mounts,
        )

    def _start_container(self, cpus: float) -> None:
        api = self._client.api
        try:
            created = api.create_container(
                self.image,
                ["sleep", "infinity"],
                name=self.name,
                user="0:0",
                hostname="sandbox",
                working_dir=WORKSPACE,
                environment=container_env(self.dependencies is not None),
                labels={
                    LABEL: "1",
                    f"{LABEL}.owner": owner_label(),
                    f"{LABEL}.created": str(int(time.time())),
                },
                host_config=self._host_config(cpus),
                network_disabled=True,
            )
            self.container_id = created["Id"]
            api.start(self.container_id)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"docker image {self.image!r} not found. {_SETUP_HINT}; or "
                "give image= an image with python+pytest, bash and git"
            ) from e
        except _ENGINE_ERRORS as e:
            raise SandboxError(f"docker could not start the sandbox container: {e}") from e

    def _check_image(self) -> None:
        key = (self.base_url or "", self.image)
        with _checked_lock:
            version = _checked.get(key)
        if version is None:
            res = self.run(_CHECK, timeout_s=60)
            if res.exit_code != 0:
                raise SandboxError(
                    f"docker image {self.image!r} lacks python, pytest or git "
                    f"({res.output.strip()[:300]}). Fix: use an image with the "
                    f"task's Python, pytest, bash and git (see docs/sandboxes.md)"
                )
            version = res.stdout.strip().splitlines()[-1]
            with _checked_lock:
                _checked[key] = version
        if self.dependencies is not None:
            self.dependencies.check_python(version, f"docker image {self.image!r}")

    # -- running -------------------------------------------------------------------------
    def run(
        self, command: str, timeout_s: float | None = None, stdin: bytes | None = None
    ) -> ExecResult:
        return self._exec(command, timeout_s, stdin, {})

    def run_with_binds(
        self,
        command: str,
        *,
        ro: dict[str, Path] | None = None,
        rw: dict[str, Path] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        output_bytes: int | None = None,
    ) -> ExecResult:
        """Copy ``ro`` folders in (read-only inside), run, copy ``rw`` folders back out."""
        self.check_open()
        assert self._xfer is not None
        env: dict[str, str] = {}
        staged: list[Path] = []
        try:
            for kind, table in (("ro", ro or {}), ("rw", rw or {})):
                for name, host in table.items():
                    if not name.isidentifier():
                        raise ValueError(
                            f"bind name {name!r} must be an identifier (it becomes $RG_<NAME>)"
                        )
                    stage = self._xfer[kind] / name
                    staged.append(stage)
                    if kind == "ro":
                        shutil.copytree(host, stage, symlinks=True)
                    else:
                        stage.mkdir()
                        os.chmod(stage, 0o755)
                        if os.geteuid() == 0:
                            os.chown(stage, self.uid, SANDBOX_GID)
                    env[f"RG_{name.upper()}"] = f"{BIND_ROOT}/{kind}/{name}"
            res = self._exec(command, timeout_s, stdin, env, output_bytes)
            for name, host in (rw or {}).items():
                copy_back(self._xfer["rw"] / name, Path(host))
            return res
        finally:
            for stage in staged:
                shutil.rmtree(stage, ignore_errors=True)

    def _freeze(self) -> None:
        self.check_open()
        try:
            self._client.api.pause(self.container_id)  # the cgroup freezer, through dockerd
        except _ENGINE_ERRORS as e:
            raise SandboxError(f"could not pause the container: {e}") from e

    def _thaw(self) -> None:
        try:
            self._client.api.unpause(self.container_id)
        except _ENGINE_ERRORS:
            pass  # gone already: nothing left to run

    def _exec(
        self,
        command: str,
        timeout_s: float | None,
        stdin: bytes | None,
        env: dict[str, str],
        output_bytes: int | None = None,
    ) -> ExecResult:
        self.check_open()
        api = self._client.api
        start = time.monotonic()
        try:
            wrapper = PLAIN if any(sh.process for sh in self._shells) else WRAPPER
            ex = api.exec_create(
                self.container_id,
                ["/bin/bash", "-c", wrapper, "rg", command],
                stdin=stdin is not None,
                user=f"{self.uid}:{SANDBOX_GID}",
                environment=env or None,
                workdir=WORKSPACE,
            )["Id"]
            sock = api.exec_start(ex, socket=True)
        except _ENGINE_ERRORS as e:
            raise SandboxError(f"docker exec failed: {e}") from e
        raw = getattr(sock, "_sock", sock)
        done = False
        try:
            out, err, timed_out, truncated = _pump(
                raw,
                stdin,
                start + (timeout_s or self.limits.timeout_s),
                output_bytes or self.limits.output_bytes,
            )
            if timed_out or truncated:
                self._kill_all()
            code = TIMEOUT_EXIT if timed_out else self._exit_code(ex)
            done = True
        finally:
            if not done:  # interrupted: leave no process running in the container
                self._kill_all()
            sock.close()
            raw.close()
        return ExecResult(
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            exit_code=code,
            timed_out=timed_out,
            duration_s=time.monotonic() - start,
            output_truncated=truncated,
        )

    def _exit_code(self, exec_id: str) -> int:
        for _ in range(200):
            try:
                info = self._client.api.exec_inspect(exec_id)
            except _ENGINE_ERRORS as e:
                raise SandboxError(f"docker exec_inspect failed: {e}") from e
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            time.sleep(0.01)
        raise SandboxError("docker exec did not report an exit code")

    # -- killing ---------------------------------------------------------------------------
    def _user_pids(self) -> list[int]:
        """Host pids of the sandbox user's processes in the container (not init or sleep)."""
        top = self._client.api.top(self.container_id, ps_args="-eo pid,uid")
        titles = [t.upper() for t in top.get("Titles") or []]
        ip, iu = titles.index("PID"), titles.index("UID")
        return [int(p[ip]) for p in top.get("Processes") or [] if p[iu].strip() != "0"]

    def _kill_all(self) -> None:
        """SIGKILL every sandbox-user process; restart the container if any survive."""
        api = self._client.api
        local = (self.base_url or "unix://").startswith("unix://")
        try:
            api.pause(self.container_id)  # frozen: a fork bomb cannot outrun the kills
            try:
                for pid in self._user_pids() if local else []:
                    if self.container_id in _read(f"/proc/{pid}/cgroup"):
                        try:
                            os.kill(pid, 9)
                        except (ProcessLookupError, PermissionError):
                            pass
            finally:
                api.unpause(self.container_id)
            for _ in range(50):
                if not self._user_pids():
                    return
                time.sleep(0.02)
            api.restart(self.container_id, timeout=0)
        except _ENGINE_ERRORS as e:
            raise SandboxError(f"could not stop the command's processes: {e}") from e

    # -- the persistent shell --------------------------------------------------------------------
    def _start_shell(self) -> DockerShell:
        assert self._xfer is not None
        folder = self._xfer["ro"] / f".shell-{uuid.uuid4().hex[:12]}"
        folder.mkdir(mode=0o755)
        fds: list[int] = []
        try:
            for name in ("in", "out", "ctl"):
                os.mkfifo(folder / name, 0o600)
                if os.geteuid() == 0:
                    os.chown(folder / name, self.uid, SANDBOX_GID)
            fds = [
                os.open(folder / "in", os.O_RDWR | os.O_NONBLOCK),
                *(os.open(folder / n, os.O_RDONLY | os.O_NONBLOCK) for n in ("out", "ctl")),
            ]
            api = self._client.api
            ex = api.exec_create(
                self.container_id,
                ["/bin/bash", "-c", SHELL_START, "rg", f"{BIND_ROOT}/ro/{folder.name}"],
                user=f"{self.uid}:{SANDBOX_GID}",
                workdir=WORKSPACE,
            )["Id"]
            api.exec_start(ex, detach=True)
            self._await_shell(ex, fds[2])
        except BaseException as e:
            for fd in fds:
                os.close(fd)
            if isinstance(e, _ENGINE_ERRORS):
                raise SandboxError(f"docker could not start the shell: {e}") from e
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # the open ends stay connected
        return DockerShell(
            *fds,
            api=self._client.api,
            container_id=self.container_id,
            exec_id=ex,
            kill_all=self._kill_shell,
        )

    def _kill_shell(self) -> None:
        """A shell ends with every process of the user (a closing sandbox removes them all)."""
        if not self._closed:
            self._kill_all()

    def _await_shell(self, exec_id: str, control: int) -> None:
        """Wait until the shell has opened its FIFOs (its control FIFO gets a writer)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        checked = time.monotonic()
        while time.monotonic() < deadline:
            try:
                if os.read(control, 1) == b"":  # no writer yet
                    time.sleep(0.005)
                    if time.monotonic() - checked > 0.5:
                        checked = time.monotonic()
                        info = self._client.api.exec_inspect(exec_id)
                        if not info.get("Running") and info.get("ExitCode") is not None:
                            raise SandboxError(
                                "the persistent shell's exec ended at once "
                                f"(exit code {info['ExitCode']})"
                            )
                    continue
                raise SandboxError("the persistent shell wrote before it was ready")
            except BlockingIOError:
                return
        raise SandboxError("the persistent shell did not start in the container")

    # -- closing -----------------------------------------------------------------------------
    def _release(self) -> None:
        """Remove the container (the shells are closed first, the workspace after)."""
        if self._cleanup is not None:
            self._cleanup.detach()
        if self._client is None:
            return
        try:
            self._client.api.remove_container(self.container_id or self.name, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except _ENGINE_ERRORS as e:
            raise SandboxError(
                f"could not remove container {self.name} ({e}). Fix: "
                "`repogym gc --all` once the engine answers"
            ) from e
        finally:
            self._client.close()


class DockerShell(ShellProcess):
    """The persistent shell's ``exec``: processes are host pids in the container's cgroup."""

    def __init__(
        self,
        stdin: int,
        output: int,
        control: int,
        *,
        api: Any,
        container_id: str,
        exec_id: str,
        kill_all: Any,
    ) -> None:
        super().__init__(stdin, output, control)
        self._api, self._container, self._exec = api, container_id, exec_id
        self._kill_all = kill_all
        self._procs_file: str | None = None
        self._terminated = False

    def on_ready(self, shell_pid: int) -> None:
        try:  # $$ is the container's pid: name the shell by its host pid instead
            super().on_ready(int(self._api.exec_inspect(self._exec)["Pid"]))
        except _ENGINE_ERRORS as e:
            raise SandboxError(f"docker exec_inspect failed: {e}") from e
        self._procs_file = _cgroup_procs(self.shell_pid)

    def processes(self) -> set[int] | None:
        if self._procs_file is None:
            return None
        try:
            with open(self._procs_file) as f:
                return {int(p) for p in f.read().split()}
        except OSError:
            return set()

    def signal(self, ids: Iterable[int], sig: int) -> None:
        for pid in ids:
            if self._container in _read(f"/proc/{pid}/cgroup"):  # never a host process
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def returncode(self) -> int | None:
        try:
            info = self._api.exec_inspect(self._exec)
        except _ENGINE_ERRORS:
            return None
        return None if info.get("Running") else info.get("ExitCode")

    def terminate(self) -> None:
        if not self._terminated:
            self._terminated = True
            self._kill_all()


def _cgroup_procs(pid: int) -> str | None:
    """The ``cgroup.procs`` file of ``pid``'s cgroup (v1 pids controller, or v2), if readable."""
    for line in _read(f"/proc/{pid}/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        names = controllers.split(",") if controllers else []
        if names and "pids" not in names:
            continue
        procs = f"/sys/fs/cgroup{'/pids' if names else ''}{path}/cgroup.procs"
        if os.access(procs, os.R_OK):
            return procs
    return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _pump(
    sock: socket.socket, stdin: bytes | None, deadline: float, limit: int
) -> tuple[bytes, bytes, bool, bool]:
    """Feed stdin and demultiplex docker's framed stdout/stderr until EOF, deadline or cap.

    Returns:
        (stdout, stderr, timed_out, truncated).
    """
    sock.setblocking(False)
    pending = memoryview(stdin or b"")
    sel = selectors.DefaultSelector()
    events = selectors.EVENT_READ | (selectors.EVENT_WRITE if stdin is not None else 0)
    sel.register(sock, events)
    if stdin is not None and not pending:
        _close_write(sock)
        sel.modify(sock, selectors.EVENT_READ)
    buf = bytearray()
    outs = (bytearray(), bytearray())
    total = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(outs[0]), bytes(outs[1]), True, False
            for _key, mask in sel.select(min(remaining, 0.5)):
                if mask & selectors.EVENT_WRITE and pending:
                    try:
                        pending = pending[sock.send(pending[:65536]) :]
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:
                        pending = pending[:0]
                    if not pending:
                        _close_write(sock)
                        sel.modify(sock, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    try:
                        chunk = sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if not chunk:
                        return bytes(outs[0]), bytes(outs[1]), False, False
                    buf += chunk
                    total = _demux(buf, outs, total, limit)
                    if total > limit:
                        return bytes(outs[0]), bytes(outs[1]), False, True
    finally:
        sel.close()


def _close_write(sock: socket.socket) -> None:
    """End the command's stdin (the engine forwards the half-close as EOF)."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _demux(buf: bytearray, outs: tuple[bytearray, bytearray], total: int, limit: int) -> int:
    """Move complete frames from ``buf`` into stdout/stderr; returns bytes seen so far."""
    while len(buf) >= 8:
        kind, size = buf[0], struct.unpack(">I", buf[4:8])[0]
        if len(buf) < 8 + size:
            break
        payload = bytes(buf[8 : 8 + size])
        del buf[: 8 + size]
        keep = max(0, limit - total)
        outs[1 if kind == 2 else 0].extend(payload[:keep])
        total += size
    return total


def copy_back(src: Path, dst: Path) -> None:
    """Copy regular files and folders from ``src`` into ``dst``; never follow a link.

    What a sandboxed command wrote is untrusted: symlinks, fifos and devices are skipped.
    """
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                with open(dst / rel / name, "wb") as out:
                    shutil.copyfileobj(f, out)


def _remove_container(base_url: str | None, name: str) -> None:
    """Force-remove one container (the clean-up of a sandbox whose close() never ran)."""
    c = client(base_url)
    try:
        c.api.remove_container(name, force=True, v=True)
    except docker.errors.NotFound:
        pass
    finally:
        c.close()


#: Lease folders (by inode) this process has cleared of stale containers.
_swept: set[tuple[int, int]] = set()
_swept_lock = threading.Lock()


def remove_stale(folder: Path, c: Any) -> list[str]:
    """Remove the containers a dead previous holder of the lease at ``folder`` left.

    A killed owner cannot remove its containers; the next owner of its lease clears the
    folder those containers mount, so they are dead weight that only ``repogym gc`` would
    find. Run once per lease folder per process, at its first container start.

    Returns:
        The names of the containers removed.
    """
    st = folder.stat()
    with _swept_lock:
        if (st.st_dev, st.st_ino) in _swept:
            return []
        _swept.add((st.st_dev, st.st_ino))
    prefix = f"{folder}/"
    try:
        listed = c.api.containers(all=True, filters={"label": LABEL})
    except _ENGINE_ERRORS:
        return []  # the start that follows reports an engine that fails
    stale = [
        x
        for x in listed
        if any(str(m.get("Source", "")).startswith(prefix) for m in x.get("Mounts") or [])
        and _owner_gone(x.get("Labels") or {})
    ]
    return _remove_each(c, stale, _ENGINE_ERRORS)


def _owner_gone(labels: dict[str, str]) -> bool:
    """True when the container's owner is gone: dead, a reused pid, or exec'd away."""
    host, _, pid = labels.get(f"{LABEL}.owner", "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's container: only --all removes it
    created = labels.get(f"{LABEL}.created", "")
    return owner_gone(int(pid), float(created) if created.isdigit() else float("inf"))


def remove_leftovers(everything: bool = False, base_url: str | None = None) -> list[str]:
    """Remove repogym containers whose owning process is gone (all of them if ``everything``);
    a live pid that is not the owner any more counts as gone (:func:`owners.owner_gone`).

    Returns:
        The names of the containers removed.
    """
    c = client(base_url)
    try:
        listed = c.api.containers(all=True, filters={"label": LABEL})
        return _remove_each(
            c,
            [x for x in listed if everything or _owner_gone(x.get("Labels") or {})],
            docker.errors.NotFound,
        )
    finally:
        c.close()


def _remove_each(c: Any, listed: list[dict], skip: Any) -> list[str]:
    """Force-remove each listed container; one whose removal raises ``skip`` is left out
    of the names returned."""
    removed = []
    for ctr in listed:
        try:
            c.api.remove_container(ctr["Id"], force=True, v=True)
        except skip:
            continue
        removed.append((ctr.get("Names") or [ctr["Id"][:12]])[0].lstrip("/"))
    return removed
