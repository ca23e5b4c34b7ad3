"""The sandbox contract: :class:`Sandbox`, the one class every backend subclasses.

A sandbox owns one workspace (a copy of a task's repository, one git commit) and runs
untrusted commands against it. ``run`` never raises on a timeout: it kills the whole
process tree and reports ``timed_out``. ``shell`` starts a persistent shell in the same
sandbox, whose state survives between commands. ``close`` is explicit and idempotent; no
backend relies on ``__del__``.

:class:`Sandbox` holds every method and attribute grading and the environments use, with
their full signatures. A backend implements the abstract ones (``run``,
``run_with_binds``, ``_start_shell``) and sets ``backend`` and ``interpreter``; the
lifecycle (an open/closed state every call checks, persistent shells started and closed
with the sandbox, an idempotent ``close`` and ``with`` support), files and the diff are
shared here. ``tests/test_architecture.py`` checks that every backend in
:data:`repogym.sandbox.BACKENDS` implements it with the same signatures.

The host never opens a workspace path itself: the agent controls the workspace and could
have planted symlinks to host files. Reads, writes and the diff run inside the sandbox,
where a symlink can only reach what the sandbox can already see.

The values the contract takes and returns (:class:`Limits`, :class:`ExecResult`,
:class:`SandboxSpec`, ...) live in :mod:`repogym.sandbox.types` and are importable from
here too.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Self

from repogym.sandbox.persistent import PersistentShell, ShellProcess
from repogym.sandbox.types import (
    ENV_MOUNT,
    WORKSPACE,
    ExecResult,
    Interpreter,
    Limits,
    PackageSite,
    SandboxError,
    SandboxSpec,
    Shell,
)
from repogym.sandbox.workspace import Workspace

_NOT_FOUND = 3
_DIFF_EXCLUDES = "':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/*.pyc'"


class DiffError(RuntimeError):
    """The workspace's state (not the sandbox) kept git from computing a diff."""


def _check_rel(path: str) -> str:
    if not path or "\x00" in path:
        raise ValueError("path is empty. Fix: give a path relative to the repository root")
    return path


class Sandbox(abc.ABC):
    """A running, isolated workspace. Paths given to its methods are workspace-relative.

    A backend's ``__init__`` calls :meth:`_open` first, then sets ``workspace``,
    ``dependencies`` and ``interpreter``; it implements :meth:`run`, :meth:`run_with_binds`
    and :meth:`_start_shell` (one persistent shell's process), and may implement
    :meth:`_release` (what ``close`` frees besides the shells and the workspace) and
    :meth:`_freeze`/:meth:`_thaw`. The diff is taken against the template's untouched
    ``.git`` (bound for that command only), so an agent that rewrites or deletes the
    workspace's ``.git`` cannot change the diff's base. A backend without a persistent
    shell sets ``shell = None``; episodes on it need ``shell="fresh"``.

    Attributes:
        backend: The backend's name in :data:`repogym.sandbox.BACKENDS`.
        spec: What the sandbox was built from.
        template: The template the workspace was copied from.
        limits: The limits of every command.
        workspace: The host-side workspace (None while starting, or for a backend without
            one: such a sandbox cannot be forked).
        dependencies: The task's installed packages, bound at ``ENV_MOUNT`` (None: none).
        interpreter: The Python the sandbox offers its grading runs.
        tmp_is_workspace_tmp: The sandbox's ``/tmp`` is its workspace's ``tmp`` folder
            (bwrap, docker), so :meth:`take_tmp_file` reads it from the host.
    """

    backend: ClassVar[str]
    tmp_is_workspace_tmp: ClassVar[bool] = True
    spec: SandboxSpec
    template: Path
    limits: Limits
    workspace: Workspace | None
    dependencies: PackageSite | None
    interpreter: Interpreter

    # -- what a backend implements -------------------------------------------------------
    @abc.abstractmethod
    def run(
        self, command: str, timeout_s: float | None = None, stdin: bytes | None = None
    ) -> ExecResult:
        """Run ``command`` with ``bash -c`` at the workspace root.

        Args:
            command: The bash command line.
            timeout_s: Wall-clock limit (default: ``limits.timeout_s``); past it the whole
                process tree is killed and the result says ``timed_out``.
            stdin: Bytes fed to the command's standard input.
        """

    @abc.abstractmethod
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
        """Run with host folders made visible for this command only (the grader's tool).

        Each ``NAME -> host folder`` is visible at the path in ``$RG_NAME`` (upper-cased),
        read-only for ``ro``; for ``rw``, what the command writes there is in the host
        folder afterwards. Agents' commands never see these folders. ``output_bytes``
        replaces the limits' output cap for this command.
        """

    @abc.abstractmethod
    def _start_shell(self) -> ShellProcess:
        """Start one persistent shell's process."""

    def _release(self) -> None:
        """Free what the backend holds besides its shells and workspace (default: nothing)."""
        return

    def _freeze(self) -> None:
        """Stop the sandbox's processes (default: nothing to stop)."""
        return

    def _thaw(self) -> None:
        """Let them run again (default: nothing to do)."""
        return

    def _shell_options(self) -> dict:
        """More ``PersistentShell`` options (the bwrap backend's OOM-kill counter)."""
        return {}

    # -- the lifecycle -------------------------------------------------------------------
    def _open(self, spec: SandboxSpec) -> None:
        self.spec, self.template, self.limits = spec, spec.template, spec.limits
        self.workspace = None
        self.dependencies = None
        self._closed = False
        self._shells: list[PersistentShell] = []

    def check_open(self) -> None:
        """Raises SandboxError once the sandbox is closed."""
        if self._closed:
            raise SandboxError("the sandbox is closed. Fix: call env.reset() first")

    def shell(self) -> Shell:
        """Start a persistent shell at the workspace root (its process starts at its first
        command), with the same isolation and limits as ``run`` (the timeout and output cap
        apply per command). The sandbox closes its shells when it closes."""
        self.check_open()
        self._shells = [sh for sh in self._shells if not sh.closed]
        sh = PersistentShell(self._guarded_start, self.limits, **self._shell_options())
        self._shells.append(sh)
        return sh

    def _guarded_start(self) -> ShellProcess:
        self.check_open()
        return self._start_shell()

    def close(self) -> None:
        """Stop the shells and every process, remove the workspace. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for sh in self._shells:
                sh.close()
            self._release()
        finally:
            if self.workspace is not None:
                self.workspace.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Every process of the sandbox stopped for the block (its persistent shell and
        whatever it left running): nothing of it can run, fork or watch while, for example,
        a check that sees the gold patch runs beside it. Backends without a way to freeze
        (the unsafe ``process`` one) run the block as is.

        Raises:
            SandboxError: the sandbox could not be frozen.
        """
        self._freeze()
        try:
            yield
        finally:
            self._thaw()

    # -- files and the diff --------------------------------------------------------------
    def take_tmp_file(self, name: str, limit: int = 16 << 20) -> str:
        """The text of ``/tmp/<name>`` (a plain file a command of this sandbox wrote), which
        is deleted. Read from the host without a sandboxed command where ``/tmp`` is the
        workspace's ``tmp`` folder: opened without following a link or blocking on a FIFO,
        and only if it is a regular file of at most ``limit`` bytes.

        Raises:
            FileNotFoundError: no such plain file.
            SandboxError: it could not be read.
        """
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"{name!r} is not a file name")
        if not self.tmp_is_workspace_tmp or self.workspace is None:
            p = shlex.quote(f"/tmp/{name}")
            res = self.run(f"[ -f {p} ] || exit {_NOT_FOUND}; cat -- {p}; rm -f -- {p}")
            if res.exit_code == _NOT_FOUND:
                raise FileNotFoundError(f"/tmp/{name}: no such file in the sandbox")
            if res.exit_code != 0 or res.output_truncated:
                raise SandboxError(f"/tmp/{name} could not be read: {res.stderr[-500:]}")
            return res.stdout
        folder = os.open(self.workspace.tmp, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except FileNotFoundError:
                raise FileNotFoundError(f"/tmp/{name}: no such file in the sandbox") from None
            except OSError as e:  # ELOOP: a link planted at the name
                raise SandboxError(f"/tmp/{name} could not be read: {e}") from e
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                    raise SandboxError(f"/tmp/{name} is not a plain file of at most {limit} bytes")
                data = os.read(fd, limit + 1)
            finally:
                os.close(fd)
            os.unlink(name, dir_fd=folder)
        finally:
            os.close(folder)
        return data.decode("utf-8", "replace")

    def read_file(self, path: str) -> str:
        """Read a workspace file; raises ``FileNotFoundError`` with a clear message."""
        p = shlex.quote(_check_rel(path))
        res = self.run(f"if [ -f {p} ]; then cat -- {p}; else exit {_NOT_FOUND}; fi")
        if res.exit_code == _NOT_FOUND:
            raise FileNotFoundError(f"{path}: no such file in the workspace")
        if res.exit_code != 0:
            raise OSError(f"{path}: could not be read: {res.output.strip()}")
        return res.stdout

    def write_file(self, path: str, content: str) -> None:
        """Write a workspace file, creating parent folders."""
        p = shlex.quote(_check_rel(path))
        res = self.run(f'mkdir -p -- "$(dirname -- {p})" && cat > {p}', stdin=content.encode())
        if res.exit_code != 0:
            raise OSError(f"{path}: could not be written: {res.output.strip()}")

    def diff(self) -> str:
        """The workspace's changes against its single commit, as a ``git apply`` patch.

        Raises:
            DiffError: the workspace's state kept git from computing it (or it is too large).
        """
        g = '"$RG_GIT"'
        script = (
            f'export GIT_DIR={g} GIT_WORK_TREE="$PWD" GIT_INDEX_FILE=/tmp/.rg-index '
            f"GIT_OBJECT_DIRECTORY=/tmp/.rg-objects GIT_ALTERNATE_OBJECT_DIRECTORIES={g}/objects "
            "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null; "
            f"mkdir -p /tmp/.rg-objects; cp {g}/index /tmp/.rg-index 2>/dev/null; "
            "G='git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c safe.directory=*'; "
            f"$G add -A -- . {_DIFF_EXCLUDES} >/dev/null && "
            "$G diff --cached --binary --no-color --no-ext-diff --no-renames HEAD; "
            "rc=$?; rm -rf /tmp/.rg-index /tmp/.rg-objects; exit $rc"
        )
        res = self.run_with_binds(script, ro={"git": self.template / ".git"})
        if res.exit_code != 0 or res.output_truncated:
            why = "diff too large" if res.output_truncated else res.stderr.strip()[-2000:]
            raise DiffError(f"could not compute the workspace diff: {why}")
        return res.stdout


__all__ = [
    "ENV_MOUNT",
    "WORKSPACE",
    "DiffError",
    "ExecResult",
    "Interpreter",
    "Limits",
    "PackageSite",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "Shell",
]
