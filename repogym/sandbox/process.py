"""The ``process`` backend: commands run as plain host processes. NO ISOLATION.

For debugging the environment itself (and as the baseline in ``bench/``). The agent can
read and write anything the host user can, including the hidden tests. It is used only
when asked for by name, and it warns every time.

Its persistent shell (``shell()``) is a plain host bash: on a timeout it gets SIGINT as a
terminal's Ctrl-C would send it (to its whole process group), but the host cannot tell the
command's processes from the shell's background jobs, so a command that ignores SIGINT
gets the shell stopped; processes that left the group (``setsid``) are not tracked.
"""

from __future__ import annotations

import os
import platform
import signal
import site
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path

from repogym.sandbox._exec import run_process
from repogym.sandbox.base import ExecResult, Interpreter, Sandbox, SandboxSpec
from repogym.sandbox.limits import rlimit_preexec
from repogym.sandbox.persistent import PopenShell, spawn
from repogym.sandbox.workspace import Workspace

_UNSAFE = (
    "the 'process' sandbox has NO isolation: commands run as host processes with "
    "full access to this machine. Use it only to debug; the default is 'bwrap'."
)


class ProcessSandbox(Sandbox):
    """Runs ``bash -c`` at the workspace with a clean environment and rlimits, nothing more."""

    backend = "process"
    tmp_is_workspace_tmp = False  # commands see the host's /tmp

    def __init__(self, spec: SandboxSpec) -> None:
        warnings.warn(_UNSAFE, RuntimeWarning, stacklevel=3)
        self._open(spec)
        self.workspace = Workspace(
            spec.template, spec.limits.workspace_mb, spec.limits.inodes, spec.copy_of
        )
        self.dependencies = self.workspace.dependencies
        self._path = os.environ.get("PATH", "/usr/bin:/bin")
        self._sites = tuple(site.getsitepackages())
        if self.dependencies is not None:
            self.dependencies.check_python(platform.python_version(), "this interpreter")
            self._path = f"{self.dependencies.site}/bin:{self._path}"
            self._sites = (str(self.dependencies.site), *self._sites)
        self.interpreter = Interpreter(sys.executable, self._sites, {"path": self._path})

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": self._path,
            "HOME": str(self.workspace.path),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PAGER": "cat",
            "TERM": "dumb",
        }
        if self.dependencies is not None:
            env["PYTHONPATH"] = str(self.dependencies.site)
        return env

    def run(
        self, command: str, timeout_s: float | None = None, stdin: bytes | None = None
    ) -> ExecResult:
        return self.run_with_binds(command, timeout_s=timeout_s, stdin=stdin)

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
        self.check_open()
        env = self._env()
        for name, host in {**(ro or {}), **(rw or {})}.items():
            env[f"RG_{name.upper()}"] = str(host)
        return run_process(
            ["/bin/bash", "-c", command],
            env=env,
            cwd=str(self.workspace.path),
            timeout_s=timeout_s or self.limits.timeout_s,
            output_bytes=output_bytes or self.limits.output_bytes,
            stdin=stdin,
            preexec_fn=rlimit_preexec(self.limits, cgroup=None),
        )

    def _start_shell(self) -> _ProcessShell:
        popen, stdin, output, control = spawn(
            lambda inner: inner,
            env=self._env(),
            cwd=str(self.workspace.path),
            preexec_fn=rlimit_preexec(self.limits, cgroup=None),
        )
        return _ProcessShell(popen, stdin, output, control)


class _ProcessShell(PopenShell):
    """A host bash; its processes are known only as its process group."""

    def processes(self) -> None:
        return None

    def signal(self, ids: Iterable[int], sig: int) -> None:
        for pid in ids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def interrupt(self, started: set[int]) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass
