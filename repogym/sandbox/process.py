"""The ``process`` backend: commands run as plain host processes. NO ISOLATION.

For debugging the environment itself (and as the baseline in ``bench/``). The agent can
read and write anything the host user can, including the hidden tests. It is used only
when asked for by name, and it warns every time.
"""

from __future__ import annotations

import os
import site
import sys
import warnings
from pathlib import Path
from typing import Self

from repogym.sandbox._exec import run_process
from repogym.sandbox.base import ExecResult, Interpreter, SandboxError, SandboxSpec
from repogym.sandbox.limits import rlimit_preexec
from repogym.sandbox.shell import ShellSandbox
from repogym.sandbox.workspace import Workspace

_UNSAFE = ("the 'process' sandbox has NO isolation: commands run as host processes with "
           "full access to this machine. Use it only to debug; the default is 'bwrap'.")


class ProcessSandbox(ShellSandbox):
    """Runs ``bash -c`` at the workspace with a clean environment and rlimits, nothing more."""

    backend = "process"

    def __init__(self, spec: SandboxSpec) -> None:
        warnings.warn(_UNSAFE, RuntimeWarning, stacklevel=3)
        self.spec = spec
        self.template = spec.template
        self.limits = spec.limits
        self._closed = False
        self.workspace = Workspace(spec.template, spec.limits.workspace_mb, spec.limits.inodes)
        self.interpreter = Interpreter(sys.executable, tuple(site.getsitepackages()),
                                       {"path": os.environ.get("PATH", "/usr/bin:/bin")})

    def _env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workspace.path),
                "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat", "TERM": "dumb"}

    def run(self, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> ExecResult:
        return self.run_with_binds(command, timeout_s=timeout_s, stdin=stdin)

    def run_with_binds(self, command: str, *, ro: dict[str, Path] | None = None,
                       rw: dict[str, Path] | None = None, timeout_s: float | None = None,
                       stdin: bytes | None = None,
                       output_bytes: int | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("the sandbox is closed. Fix: call env.reset() first")
        env = self._env()
        for name, host in {**(ro or {}), **(rw or {})}.items():
            env[f"RG_{name.upper()}"] = str(host)
        return run_process(
            ["/bin/bash", "-c", command], env=env, cwd=str(self.workspace.path),
            timeout_s=timeout_s or self.limits.timeout_s,
            output_bytes=output_bytes or self.limits.output_bytes,
            stdin=stdin, preexec_fn=rlimit_preexec(self.limits, cgroup=None),
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
