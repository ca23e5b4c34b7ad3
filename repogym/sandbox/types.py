"""The values every sandbox backend shares: limits, results, the spec, the shell protocol.

The contract a backend implements is :class:`repogym.sandbox.base.Sandbox`; this module
holds what it takes and returns, and what the modules it builds on (workspaces, leases,
limits, persistent shells) need without importing the contract itself.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

#: Where the workspace appears inside every backend.
WORKSPACE = "/workspace"
#: Where a task's environment (its installed packages) appears inside every backend.
ENV_MOUNT = "/opt/repogym/env"


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the command it ran). Reported as ``infra_error``."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits applied to every command run in a sandbox.

    Attributes:
        timeout_s: Wall-clock limit per command; the whole process tree is killed after it.
        cpu_s: CPU seconds per command (RLIMIT_CPU).
        memory_mb: Memory per command (cgroup memory limit, else RLIMIT_AS).
        pids: Processes per command (cgroup pids limit, else RLIMIT_NPROC).
        file_size_mb: Largest file a command may write (RLIMIT_FSIZE).
        output_bytes: Bytes of stdout+stderr kept; a command producing more is killed.
        workspace_mb: Size cap of the writable workspace layer and of /tmp (together);
            default: half of ``memory_mb``, at most 1024.
        inodes: Files and folders the workspace layer and /tmp may hold (together).

    Files a sandbox writes stay charged to its memory limit after the command that wrote
    them ends, so ``workspace_mb`` must stay below ``memory_mb``: then no sequence of
    commands can leave the sandbox without memory to start the next one.
    """

    timeout_s: float = 60.0
    cpu_s: int = 120
    memory_mb: int = 2048
    pids: int = 256
    file_size_mb: int = 256
    output_bytes: int = 4 * 1024 * 1024
    workspace_mb: int | None = None
    inodes: int = 65536

    def __post_init__(self) -> None:
        if self.workspace_mb is None:
            object.__setattr__(self, "workspace_mb", min(1024, self.memory_mb // 2))
        for name in (
            "timeout_s",
            "cpu_s",
            "memory_mb",
            "pids",
            "file_size_mb",
            "output_bytes",
            "workspace_mb",
            "inodes",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")
        if self.workspace_mb + 64 > self.memory_mb:
            raise ValueError(
                f"Limits.workspace_mb ({self.workspace_mb}) must be at least 64 "
                f"below memory_mb ({self.memory_mb}): files a sandbox writes stay "
                "charged to its memory. Fix: raise memory_mb or lower workspace_mb"
            )


@dataclasses.dataclass
class ExecResult:
    """What one command did."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    duration_s: float = 0.0
    output_truncated: bool = False
    #: ``memory`` or ``pids`` when the sandbox's own limit stopped the command (its doing).
    resource_exhausted: str | None = None
    #: Set by a persistent shell when its state was lost: the shell ended or was stopped
    #: during this command (the next one starts a new shell), or had ended before it (this
    #: one ran in a new shell). A note for the agent that says which and why.
    shell_reset: str | None = None

    @property
    def output(self) -> str:
        """stdout and stderr joined the way a terminal would show them."""
        if self.stderr and self.stdout:
            return self.stdout.rstrip("\n") + "\n" + self.stderr
        return self.stdout or self.stderr


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """The Python a sandbox offers its grading runs (paths as the sandbox sees them).

    Attributes:
        executable: The interpreter.
        sites: Site folders a grading run trusts besides the interpreter's own (e.g. the
            folder holding pytest); they come before the workspace and cannot be shadowed.
        env: ``path`` (PATH) and ``ld_library_path`` the interpreter needs.
    """

    executable: str
    sites: tuple[str, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class PackageSite:
    """A folder of installed packages that a sandbox binds read-only at :data:`ENV_MOUNT`.

    It comes before the sandbox's own pytest-only site on ``PYTHONPATH`` and among the
    grading run's trusted sites (so a task that pins its own pytest gets it); its ``bin/``
    (console scripts) comes first on ``PATH``. Nothing is copied per sandbox.

    Attributes:
        site: The host folder (``pip install --target`` layout).
        python: ``major.minor`` of the interpreter it was built for.
    """

    site: Path
    python: str

    def check_python(self, version: str, where: str) -> None:
        """Raise :class:`SandboxError` unless ``version`` (``major.minor[.micro]``) is the one
        this environment was built for."""
        if ".".join(version.split(".")[:2]) != self.python:
            raise SandboxError(
                f"the task's environment ({self.site}) was built for Python {self.python}, "
                f"but {where} has Python {version}. Fix: rebuild it with `repogym env build` "
                f"under a Python {self.python} interpreter, or use a sandbox whose Python is "
                f"{self.python}"
            )


class Shell(Protocol):
    """A persistent shell in a sandbox: the working folder, variables, functions and
    background jobs carry over from one command to the next, as in a terminal."""

    def run(self, command: str, timeout_s: float | None = None) -> ExecResult:
        """Run ``command``; output is stdout and stderr interleaved, in ``stdout``."""
        ...

    def close(self) -> None:
        """Kill the shell and everything it started. Idempotent."""
        ...

    def has_jobs(self) -> bool:
        """True unless the shell is known to run nothing besides itself: no background job
        that could still change files. Unknown counts as True."""
        ...

    def save_state(self, path: str) -> bool:
        """Write to ``path`` (a sandbox file) a bash script that gives a new shell this one's
        state; False when no shell is running."""
        ...


@dataclasses.dataclass(frozen=True)
class SandboxSpec:
    """How to build a sandbox for one episode.

    Attributes:
        template: A prepared repository folder (files + a one-commit ``.git``) to copy from.
            A template made for a task with an environment carries it
            (:meth:`repogym.sandbox.workspace.TemplateCache.get`): every sandbox started from
            it, the agent's and the grader's alike, binds the same packages.
        limits: Resource limits for every command.
        copy_of: A live :class:`~repogym.sandbox.workspace.Workspace` (another sandbox's,
            of the same template) whose files and ``/tmp`` the new sandbox starts with
            instead of the template's: a fork of that sandbox's files (its processes are
            not copied). The other sandbox should be
            :meth:`~repogym.sandbox.base.Sandbox.frozen` while it is copied.
    """

    template: Path
    limits: Limits = Limits()
    copy_of: Any = None  # a Workspace (not imported here: workspace.py imports this)
