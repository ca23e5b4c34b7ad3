"""The default backend: bubblewrap, one fresh namespace set per command.

Each command runs in new PID, network, IPC, UTS and cgroup namespaces (loopback only, no
internet, no host loopback), under the seccomp policy of :mod:`repogym.sandbox.seccomp`
(no keyrings, no new namespaces, no bpf/perf/mount/module calls), with the system folders
bound read-only, only the workspace writable, a ``/tmp`` capped in bytes and inodes, an
empty host environment, and (as root) the lease's own uid with no capabilities and
no-new-privs. The system folders come from the sandbox's own minimal root file system
(:mod:`repogym.sandbox.rootfs`, Debian minbase: nothing the host installed is visible), and
the host's Python is visible at ``/opt/python`` as a copy without its site-packages
(:mod:`repogym.sandbox.runtime`), with a pytest-only site folder (preceded, for a task
with an environment, by that environment's packages, bound read-only at
``/opt/repogym/env``). When the command's first process exits, bwrap's PID 1 exits and
the kernel kills
everything else in the namespace: nothing outlives a ``run``.

``shell()`` starts a persistent bash (:mod:`repogym.sandbox.persistent`) in one more bwrap
of the same kind (same binds, seccomp policy, uid, cgroup and rlimits): its processes share
one PID namespace that lives until the shell ends or the sandbox closes. The host lists
them through that namespace's own ``/proc`` and signals them with pidfds, so it never
touches a process outside the sandbox.

A launch that fails because the sandbox's own memory or pids limit is used up (by what
earlier commands of the same sandbox left charged to it) is reported as an ``ExecResult``
with ``resource_exhausted`` set: the agent's doing, never ``SandboxError``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

from repogym.sandbox import rootfs, seccomp
from repogym.sandbox._exec import run_process
from repogym.sandbox.base import (
    ENV_MOUNT,
    WORKSPACE,
    ExecResult,
    Interpreter,
    Sandbox,
    SandboxError,
    SandboxSpec,
)
from repogym.sandbox.leases import SANDBOX_GID
from repogym.sandbox.limits import Cgroup, rlimit_preexec
from repogym.sandbox.persistent import PopenShell, spawn
from repogym.sandbox.runtime import PYTHON_MOUNT, Runtime, package_data_dirs, runtime
from repogym.sandbox.workspace import Workspace

SITE_MOUNT = "/opt/repogym/site"
BIND_ROOT = "/run/repogym"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FROM_SYSTEM = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "mime.types",
)
_warned_host = False
INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed. Fix: `apt-get install -y bubblewrap` "
    "(Debian/Ubuntu), `dnf install bubblewrap` (Fedora), or run `make setup`"
)


def bwrap_path() -> str:
    """The bwrap executable, or a SandboxError that says how to install it."""
    path = shutil.which("bwrap", path=os.environ.get("PATH", "") + ":/usr/bin:/bin")
    if not path:
        raise SandboxError(INSTALL_HINT)
    return path


def sandbox_env(rt: Runtime, environment: bool = False) -> dict[str, str]:
    """The whole environment a sandboxed command starts with (``environment``: a task's
    packages are bound at :data:`ENV_MOUNT`, ahead of the pytest-only site)."""
    first = f"{ENV_MOUNT}/bin:" if environment else ""
    return {
        "PATH": f"{first}{PYTHON_MOUNT}/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": "/tmp",
        "USER": "nobody",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONPATH": ":".join(_sites(environment)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "LD_LIBRARY_PATH": f"{PYTHON_MOUNT}/lib",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }


def _sites(environment: bool) -> tuple[str, ...]:
    return (ENV_MOUNT, SITE_MOUNT) if environment else (SITE_MOUNT,)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _system_binds(root: Path | None) -> list[str]:
    """bwrap arguments for ``/usr`` and its merged links: from ``root`` (the sandbox's own
    root file system, :mod:`repogym.sandbox.rootfs`), or, with None, from the host (a
    debugging fallback that warns: the host's ``/usr`` can hold copies of a task's code;
    repogym's own folders and the host interpreter's site-packages are masked there)."""
    a: list[str] = []
    base = root or Path("/")
    bound: list[tuple[Path, str]] = []
    for d in _SYSTEM_DIRS:
        p = base / d.lstrip("/")
        if p.is_symlink():
            a += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            a += ["--ro-bind", str(p), d]
            bound.append((Path(d), d))
    if root is not None:
        return a
    global _warned_host
    if not _warned_host:
        _warned_host = True
        warnings.warn(
            "the bwrap sandbox binds the host's /usr (no sandbox root file system "
            "is built): host files, such as vendored or Debian-packaged copies of a "
            "task's package, are visible to the agent. Fix: `python -m "
            "repogym.sandbox.rootfs build` as root (needs debootstrap), or "
            "`make setup`",
            stacklevel=3,
        )
    rt = runtime()
    for host in (rt.site_packages, *package_data_dirs()):
        for src, dst in bound:
            if _under(host, src) and host.exists():
                a += ["--tmpfs", dst + str(host)[len(str(src)) :]]
    return a


class BwrapSandbox(Sandbox):
    """A bubblewrap sandbox over one workspace. See the module docstring."""

    backend = "bwrap"

    def __init__(self, spec: SandboxSpec) -> None:
        self._open(spec)
        self._bwrap = bwrap_path()
        self._rt = runtime()
        seccomp.bpf_program()  # fail here, with the fix, if libseccomp is missing
        self.workspace = Workspace(
            spec.template, spec.limits.workspace_mb, spec.limits.inodes, spec.copy_of
        )
        self.dependencies = self.workspace.dependencies
        env = sandbox_env(self._rt, self.dependencies is not None)
        self.interpreter = Interpreter(
            f"{PYTHON_MOUNT}/bin/{self._rt.python}",
            _sites(self.dependencies is not None),
            {"path": env["PATH"], "ld_library_path": env["LD_LIBRARY_PATH"]},
        )
        try:
            if self.dependencies is not None:
                self.dependencies.check_python(
                    self._rt.python.removeprefix("python"), "the bwrap sandbox's interpreter"
                )
            self.cgroup = Cgroup.create(spec.limits, self.workspace.lease_dir.name)
            self._argv = self._base_argv()
        except BaseException:
            self.workspace.close()
            raise

    # -- argv ------------------------------------------------------------------------
    def _base_argv(self) -> list[str]:
        rt = self._rt
        a = [
            self._bwrap,
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
        ]
        if os.geteuid() != 0:
            a += ["--unshare-user", "--uid", "65534", "--gid", str(SANDBOX_GID)]
        root = rootfs.find()
        a += _system_binds(root)
        # Folders bwrap makes for nested binds would be 0700: make the parents first.
        for d in ("/opt", "/opt/repogym", "/run", "/run/repogym"):
            a += ["--perms", "0755", "--dir", d]
        a += ["--ro-bind", str(rt.python_copy), PYTHON_MOUNT]
        a += ["--perms", "0755", "--dir", "/etc"]
        passwd = self.workspace.lease_dir / "passwd"
        etc = {name: rt.etc / name for name in os.listdir(rt.etc)}
        if os.geteuid() == 0 and passwd.is_file():
            etc["passwd"] = passwd  # names the lease's uid
        for name, src in sorted(etc.items()):
            a += ["--ro-bind", str(src), f"/etc/{name}"]
        system_etc = (root or Path("/")) / "etc"
        for name in _ETC_FROM_SYSTEM:
            path = system_etc / name
            if path.is_symlink():  # resolved inside the sandbox, never on the host
                a += ["--symlink", os.readlink(path), f"/etc/{name}"]
            elif path.exists():
                a += ["--ro-bind", str(path), f"/etc/{name}"]
        a += ["--ro-bind", str(rt.sandbox_site), SITE_MOUNT]
        if self.dependencies is not None:
            a += ["--ro-bind", str(self.dependencies.site), ENV_MOUNT]
        a += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            str(self.workspace.tmp),
            "/tmp",
            "--bind",
            str(self.workspace.path),
            WORKSPACE,
            "--chdir",
            WORKSPACE,
        ]
        for k, v in sandbox_env(rt, self.dependencies is not None).items():
            a += ["--setenv", k, v]
        return a

    def _argv_for(self, inner: list[str], seccomp_fd: int, extra: list[str]) -> list[str]:
        argv = self._argv + extra + ["--seccomp", str(seccomp_fd)]
        if os.geteuid() == 0:
            argv += [
                "/usr/bin/setpriv",
                f"--reuid={self.workspace.uid}",
                f"--regid={SANDBOX_GID}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
            ]
        return argv + inner

    @staticmethod
    def _command(command: str, status_fd: int) -> list[str]:
        # The shell reports that the sandbox is set up by writing to status_fd, then closes
        # it before the command runs, so a command cannot fake (or hide) a launch failure.
        starter = f'printf started >&{status_fd}; exec {status_fd}>&-; eval "$1"'
        return ["/bin/bash", "-c", starter, "bash", command]

    # -- running -----------------------------------------------------------------------
    def run(
        self, command: str, timeout_s: float | None = None, stdin: bytes | None = None
    ) -> ExecResult:
        return self._run(command, timeout_s, stdin, [], None)

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
        binds: list[str] = []
        for kind, table in (("--ro-bind", ro or {}), ("--bind", rw or {})):
            for name, host in table.items():
                dst = f"{BIND_ROOT}/{name}"
                binds += [kind, str(host), dst, "--setenv", f"RG_{name.upper()}", dst]
        return self._run(command, timeout_s, stdin, binds, output_bytes)

    def _run(
        self,
        command: str,
        timeout_s: float | None,
        stdin: bytes | None,
        binds: list[str],
        output_bytes: int | None,
    ) -> ExecResult:
        self.check_open()
        r, w = os.pipe()
        filt = seccomp.bpf_fd()
        kills = self.cgroup.oom_kills() if self.cgroup else 0
        try:
            res = self._launch(command, timeout_s, stdin, binds, w, filt, output_bytes)
            os.close(w)
            w = -1
            status = _read_all(r)
        finally:
            if w >= 0:
                os.close(w)
            os.close(r)
            os.close(filt)
        if not res.timed_out and not _started(status):
            if exhausted := self.cgroup.exhausted() if self.cgroup else None:
                return ExecResult(
                    stdout="",
                    exit_code=137,
                    resource_exhausted=exhausted,
                    stderr=f"the sandbox's {exhausted} limit is used up "
                    "(by files or processes this sandbox left); the "
                    "command could not start",
                    duration_s=res.duration_s,
                )
            raise SandboxError(f"bwrap failed to start the sandbox: {res.stderr.strip()}")
        if self.cgroup and self.cgroup.oom_kills() > kills:
            res.resource_exhausted = "memory"
        return res

    def _launch(
        self,
        command: str,
        timeout_s: float | None,
        stdin: bytes | None,
        binds: list[str],
        status_fd: int,
        seccomp_fd: int,
        output_bytes: int | None,
    ) -> ExecResult:
        try:
            return run_process(
                self._argv_for(self._command(command, status_fd), seccomp_fd, binds),
                env={},
                timeout_s=timeout_s or self.limits.timeout_s,
                output_bytes=output_bytes or self.limits.output_bytes,
                stdin=stdin,
                pass_fds=(status_fd, seccomp_fd),
                preexec_fn=rlimit_preexec(self.limits, cgroup=self.cgroup),
                on_kill=self._kill_commands if self.cgroup else None,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise SandboxError(f"could not launch bwrap: {e}") from e

    def _freeze(self) -> None:
        if self.cgroup is None:
            raise SandboxError(
                "this bwrap sandbox has no cgroup (not root, or cgroup v1 not "
                "writable): it cannot be frozen. Fix: run as root"
            )
        try:
            self.cgroup.freeze()
        except OSError as e:
            raise SandboxError(f"could not freeze the sandbox: {e}") from e

    def _thaw(self) -> None:
        if self.cgroup is not None:
            self.cgroup.thaw()

    def _kill_commands(self) -> None:
        """SIGKILL every process of the sandbox's cgroup except its persistent shells'."""
        assert self.cgroup is not None
        shells = [sh.process for sh in self._shells if isinstance(sh.process, _BwrapShell)]
        self.cgroup.kill(spare=lambda pid: any(sh.owns(pid) for sh in shells))

    # -- the persistent shell ------------------------------------------------------------------
    def _shell_options(self) -> dict:
        return {"oom_kills": self.cgroup.oom_kills if self.cgroup else None}

    def _start_shell(self) -> _BwrapShell:
        info_r, info_w = os.pipe()
        filt = seccomp.bpf_fd()
        try:
            popen, stdin, output, control = spawn(
                lambda inner: self._argv_for(inner, filt, ["--info-fd", str(info_w)]),
                pass_fds=(info_w, filt),
                env={},
                preexec_fn=rlimit_preexec(self.limits, cgroup=self.cgroup),
            )
        except (OSError, subprocess.SubprocessError) as e:
            os.close(info_r)
            raise SandboxError(f"could not launch bwrap: {e}") from e
        finally:
            os.close(info_w)
            os.close(filt)
        try:
            info = _read_all_blocking(info_r)
        finally:
            os.close(info_r)
        return _BwrapShell(popen, stdin, output, control, info, self.cgroup)

    def _release(self) -> None:
        if self.cgroup:
            self.cgroup.remove()


class _BwrapShell(PopenShell):
    """A persistent shell's bwrap: processes are named by their pid in its PID namespace."""

    def __init__(
        self,
        popen: subprocess.Popen,
        stdin: int,
        output: int,
        control: int,
        info: bytes,
        cgroup: Cgroup | None,
    ) -> None:
        super().__init__(popen, stdin, output, control)
        self.cgroup = cgroup
        self._proc_fd: int | None = None
        try:
            meta = json.loads(info or b"{}")
        except ValueError:
            meta = {}
        self.child_pid: int | None = meta.get("child-pid")
        self.pid_ns: int | None = meta.get("pid-namespace")

    def on_ready(self, shell_pid: int) -> None:
        super().on_ready(shell_pid)
        # The namespace's own /proc, opened while its PID 1 surely lives: the fd keeps
        # naming that namespace, whatever happens to the host pid later.
        try:
            fd = os.open(f"/proc/{self.child_pid}/root/proc", os.O_RDONLY | os.O_DIRECTORY)
        except (OSError, TypeError) as e:
            raise SandboxError(
                f"cannot see the shell's processes ({e}). Fix: bubblewrap "
                "with --info-fd, and /proc readable by this user"
            ) from e
        if _pid_ns(self.child_pid) != self.pid_ns:  # not the namespace bwrap reported
            os.close(fd)
            raise SandboxError("the persistent shell's PID namespace vanished at start")
        self._proc_fd = fd

    def owns(self, pid: int) -> bool:
        """True if host ``pid`` is this shell's bwrap or a process in its namespace."""
        return pid == self.popen.pid or (self.pid_ns is not None and _pid_ns(pid) == self.pid_ns)

    def processes(self) -> set[int]:
        if self._proc_fd is None:
            return set()
        return {
            int(d) for d in os.listdir(self._proc_fd) if d.isdigit() and _alive(self._proc_fd, d)
        }

    def signal(self, ids: Iterable[int], sig: int) -> None:
        if self._proc_fd is None:
            return
        for pid in ids:
            try:
                fd = os.open(str(pid), os.O_RDONLY | os.O_DIRECTORY, dir_fd=self._proc_fd)
            except OSError:
                continue  # gone already
            try:
                signal.pidfd_send_signal(fd, sig)
            except OSError:
                pass
            finally:
                os.close(fd)

    def start_failed(self, output: str) -> ExecResult:
        if exhausted := self.cgroup.exhausted() if self.cgroup else None:
            return ExecResult(
                stdout="",
                exit_code=137,
                resource_exhausted=exhausted,
                stderr=f"the sandbox's {exhausted} limit is used up (by files or "
                "processes this sandbox left); the shell could not start",
            )
        return super().start_failed(output)

    def terminate(self) -> None:
        if self.popen.poll() is None:
            # Kill the namespace's PID 1: the kernel kills the rest, and bwrap reaps it and
            # exits (no orphan is left for the host's init). bwrap itself if that fails.
            self.signal({1}, signal.SIGKILL)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        super().terminate()
        for _ in range(200):  # every process of the namespace: wait until they are gone
            if not (left := self.processes()):
                break
            self.signal(left, signal.SIGKILL)
            time.sleep(0.005)
        if self._proc_fd is not None:
            os.close(self._proc_fd)
            self._proc_fd = None


def _alive(proc_fd: int, pid: str) -> bool:
    """True unless ``pid`` (in the /proc opened as ``proc_fd``) is gone or a zombie."""
    try:
        fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=proc_fd)
    except OSError:
        return False
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X", b"")


def _pid_ns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _read_all_blocking(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


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
