"""The default backend: bubblewrap, one fresh namespace set per command.

Each command runs in new PID, network, IPC, UTS and cgroup namespaces (loopback only, no
internet, no host loopback), with the system folders bound read-only, only the workspace
writable, a size-capped ``/tmp``, an empty host environment, and (as root) uid 65534 with
no capabilities and no-new-privs. The host's Python is visible at ``/opt/python`` with its
site-packages replaced by a pytest-only folder, and every folder holding repogym's own
code and task data is masked. When the command's first process exits, bwrap's PID 1 exits
and the kernel kills everything else in the namespace: nothing outlives a step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Self

from repogym.sandbox._exec import run_process
from repogym.sandbox.base import WORKSPACE, ExecResult, SandboxError, SandboxSpec
from repogym.sandbox.limits import Cgroup, rlimit_preexec
from repogym.sandbox.runtime import PYTHON_MOUNT, Runtime, package_data_dirs, runtime
from repogym.sandbox.shell import ShellSandbox
from repogym.sandbox.workspace import SANDBOX_UID, Workspace

SITE_MOUNT = "/opt/repogym/site"
BIND_ROOT = "/run/repogym"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FROM_HOST = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
                  "mime.types")
INSTALL_HINT = ("bubblewrap (bwrap) is not installed. Fix: `apt-get install -y bubblewrap` "
                "(Debian/Ubuntu), `dnf install bubblewrap` (Fedora), or run `make setup`")


def bwrap_path() -> str:
    """The bwrap executable, or a SandboxError that says how to install it."""
    path = shutil.which("bwrap", path=os.environ.get("PATH", "") + ":/usr/bin:/bin")
    if not path:
        raise SandboxError(INSTALL_HINT)
    return path


def sandbox_env(rt: Runtime) -> dict[str, str]:
    """The whole environment a sandboxed command starts with."""
    return {
        "PATH": f"{PYTHON_MOUNT}/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": "/tmp",
        "USER": "nobody",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONPATH": SITE_MOUNT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "LD_LIBRARY_PATH": f"{PYTHON_MOUNT}/lib",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class BwrapSandbox(ShellSandbox):
    """A bubblewrap sandbox over one workspace. See the module docstring."""

    backend = "bwrap"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.template = spec.template
        self.limits = spec.limits
        self._bwrap = bwrap_path()
        self._rt = runtime()
        self._closed = False
        self.workspace = Workspace(spec.template, spec.limits.workspace_mb)
        self.cgroup = Cgroup.create(spec.limits)
        self._argv = self._base_argv()

    # -- argv ------------------------------------------------------------------------
    def _base_argv(self) -> list[str]:
        rt = self._rt
        root = os.geteuid() == 0
        a = [self._bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
             "--hostname", "sandbox"]
        if not root:
            a += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        bound: list[tuple[Path, str]] = []
        for d in _SYSTEM_DIRS:
            p = Path(d)
            if p.is_symlink():
                a += ["--symlink", os.readlink(p), d]
            elif p.is_dir():
                a += ["--ro-bind", d, d]
                bound.append((p, d))
        # Folders bwrap makes for nested binds would be 0700: make the parents first.
        for d in ("/opt", "/opt/repogym", "/run", "/run/repogym"):
            a += ["--perms", "0755", "--dir", d]
        if not any(_under(rt.prefix, src) for src, _ in bound):
            a += ["--ro-bind", str(rt.prefix), PYTHON_MOUNT]
            bound.append((rt.prefix, PYTHON_MOUNT))
        a += ["--perms", "0755", "--dir", "/etc"]
        for name in os.listdir(rt.etc):
            a += ["--ro-bind", str(rt.etc / name), f"/etc/{name}"]
        for name in _ETC_FROM_HOST:
            if os.path.exists(f"/etc/{name}"):
                a += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        # Hide every host site-packages and repogym's own folders that a bind exposed.
        hidden = [rt.site_packages, *package_data_dirs()]
        for host in hidden:
            for src, dst in bound:
                if _under(host, src) and host.exists():
                    a += ["--tmpfs", dst + str(host)[len(str(src)):]]
        a += ["--ro-bind", str(rt.sandbox_site), SITE_MOUNT]
        a += ["--proc", "/proc", "--dev", "/dev",
              "--bind", str(self.workspace.tmp), "/tmp",
              "--bind", str(self.workspace.path), WORKSPACE, "--chdir", WORKSPACE]
        for k, v in sandbox_env(rt).items():
            a += ["--setenv", k, v]
        return a

    def _argv_for(self, command: str, status_fd: int, binds: list[str]) -> list[str]:
        argv = self._argv + binds
        if os.geteuid() == 0:
            argv += ["/usr/bin/setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}",
                     "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                     "--no-new-privs"]
        # The shell reports that the sandbox is set up by writing to status_fd, then closes
        # it before the command runs, so a command cannot fake (or hide) a launch failure.
        starter = f'printf started >&{status_fd}; exec {status_fd}>&-; eval "$1"'
        return argv + ["/bin/bash", "-c", starter, "bash", command]

    # -- running -----------------------------------------------------------------------
    def run(self, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> ExecResult:
        return self._run(command, timeout_s, stdin, [])

    def run_with_binds(self, command: str, *, ro: dict[str, Path] | None = None,
                       rw: dict[str, Path] | None = None, timeout_s: float | None = None,
                       stdin: bytes | None = None) -> ExecResult:
        binds: list[str] = []
        for kind, table in (("--ro-bind", ro or {}), ("--bind", rw or {})):
            for name, host in table.items():
                dst = f"{BIND_ROOT}/{name}"
                binds += [kind, str(host), dst, "--setenv", f"RG_{name.upper()}", dst]
        return self._run(command, timeout_s, stdin, binds)

    def _run(self, command: str, timeout_s: float | None, stdin: bytes | None,
             binds: list[str]) -> ExecResult:
        if self._closed:
            raise SandboxError("the sandbox is closed. Fix: call env.reset() first")
        r, w = os.pipe()
        try:
            res = self._launch(command, timeout_s, stdin, binds, w)
            os.close(w)
            w = -1
            status = _read_all(r)
        finally:
            if w >= 0:
                os.close(w)
            os.close(r)
        if not res.timed_out and not _started(status):
            raise SandboxError(f"bwrap failed to start the sandbox: {res.stderr.strip()}")
        return res

    def _launch(self, command: str, timeout_s: float | None, stdin: bytes | None,
                binds: list[str], status_fd: int) -> ExecResult:
        try:
            return run_process(
                self._argv_for(command, status_fd, binds), env={},
                timeout_s=timeout_s or self.limits.timeout_s,
                output_bytes=self.limits.output_bytes, stdin=stdin, pass_fds=(status_fd,),
                preexec_fn=rlimit_preexec(self.limits, cgroup=self.cgroup),
                on_kill=self.cgroup.kill if self.cgroup else None,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise SandboxError(f"could not launch bwrap: {e}") from e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.cgroup:
                self.cgroup.remove()
        finally:
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _started(status: bytes) -> bool:
    return status == b"started"
