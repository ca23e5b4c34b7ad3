"""One episode's sandboxed repository: its tools, its diff and its grading.

:class:`RepoEnv` holds one :class:`Session` per episode (``env.session``); environments
built on top of it (the duel env) and servers drive episodes through this public seam.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import secrets
import shlex
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from repogym.envs import tools
from repogym.envs.actions import TOOL_HELP, TOOLS, ToolCall
from repogym.grading import grader
from repogym.grading.flags import HackFlag
from repogym.sandbox import Limits, Sandbox, SandboxError, SandboxSpec
from repogym.sandbox.base import ExecResult, Shell
from repogym.scenarios.task import Task

#: How ``bash`` commands run: one persistent shell per episode, or a new process each.
ShellMode = Literal["persistent", "fresh"]
SHELL_MODES: tuple[ShellMode, ...] = get_args(ShellMode)


@dataclasses.dataclass
class CachedGrade:
    """A grade cache's entry: a verdict, and whether a second grading confirmed it."""

    result: grader.GradeResult
    confirmed: bool


#: A grade cache's entry for a diff that is never cached (see :meth:`Session.grade`).
_NEVER = "never"


class Session:
    """A live episode: a sandbox over a task's template, and what can be done to it.

    Args:
        task: The episode's task.
        template: Its prepared template (:class:`repogym.sandbox.workspace.TemplateCache`).
        make_sandbox: Builds every sandbox of the episode (the episode's and the grader's).
        limits: Limits of every command.
        max_obs_chars: Observations are clipped to this many characters.
        shell: ``persistent``: ``bash`` commands share one shell (started at the first
            one; ``cd``, variables, functions and background jobs carry over);
            ``fresh``: each runs in a new process. The other tools always run on their own
            at the repository root, whatever the shell did.
        copy_of: Another session's sandbox whose files this one starts with (see
            :meth:`fork`); None starts from the template.
    """

    def __init__(
        self,
        task: Task,
        template: Path,
        make_sandbox: Callable[[SandboxSpec], Sandbox],
        limits: Limits,
        max_obs_chars: int = 16_000,
        shell: ShellMode = "persistent",
        copy_of: Sandbox | None = None,
    ) -> None:
        if shell not in SHELL_MODES:
            raise ValueError(f"unknown shell {shell!r}. Fix: use one of {SHELL_MODES}")
        self.task, self.template, self.limits = task, template, limits
        self.make_sandbox = make_sandbox
        self.max_obs_chars = max_obs_chars
        self.shell_mode = shell
        self._shell: Shell | None = None
        self._digest: str | None = None
        #: A script that gives the next shell a forked-from shell's state (see :meth:`fork`).
        self._replay: str | None = None
        workspace = copy_of.workspace if copy_of is not None else None
        if copy_of is not None and workspace is None:
            raise ValueError(
                f"the {copy_of.backend!r} sandbox cannot be "
                "forked (it has no host workspace). Fix: use bwrap, docker or "
                "process"
            )
        self.sandbox: Sandbox | None = make_sandbox(
            SandboxSpec(template=template, limits=limits, copy_of=workspace)
        )
        self._backend = self.sandbox.backend
        if shell == "persistent" and self.sandbox.shell is None:  # a backend may disable it
            self.close()
            raise ValueError(
                f"the {self._backend!r} sandbox has no "
                "persistent shell (Sandbox.shell()). Fix: pass shell='fresh', or "
                "give the backend a shell() method"
            )

    @property
    def closed(self) -> bool:
        return self.sandbox is None

    def prompt(self, tools: bool = True) -> str:
        """The statement and the repository's top-level files (and the tool help)."""
        names = sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in self.template.iterdir()
            if p.name != ".git"
        )
        listing = "\n".join(f"  {n}" for n in names[:60])
        text = (
            f"# Task: {self.task.id}\n\n{self.task.statement}\n"
            f"The repository is checked out at the current folder. Top-level files:\n"
            f"{listing}\n"
        )
        return f"{text}\n{TOOL_HELP}\n" if tools else text

    def _live(self) -> Sandbox:
        if self.sandbox is None:
            raise RuntimeError("the session is closed. Fix: call env.reset() first")
        return self.sandbox

    # -- tools (the Workbench the handlers of repogym.envs.tools act on) ------------------
    def run_tool(self, call: ToolCall) -> tools.ToolOutcome:
        """Run a validated non-submit call through its tool's handler (:data:`TOOLS`): what
        it did, for the env to report (:func:`repogym.envs.info.tool_info`).

        What the agent got wrong becomes the observation (``exit_code`` 1); only a
        :class:`~repogym.sandbox.SandboxError` (the infrastructure) propagates.
        """
        self._live()
        run = TOOLS[call.name].run
        if run is None:
            raise ValueError(f"{call.name} is not run by the session (the env handles it)")
        try:
            return run(self, call.args)
        except FileNotFoundError as e:
            path = call.args.get("path", "")
            is_dir = bool(path) and self._live().run(f"test -d {shlex.quote(path)}").exit_code == 0
            return tools.ToolOutcome(tools.not_a_file(path, e, is_dir, self.max_obs_chars), 1)
        except (OSError, ValueError) as e:  # ValueError: an argument the sandbox cannot take
            return tools.ToolOutcome(tools.clip_text(f"Error: {e}", self.max_obs_chars) + "\n", 1)

    def bash(self, command: str) -> ExecResult:
        """Run ``command`` in the persistent shell (started now if needed) or, with
        ``shell="fresh"``, in a new process."""
        sb = self._live()
        if self.shell_mode == "fresh":
            return sb.run(command, timeout_s=self.limits.timeout_s)
        if self._shell is None:
            self._shell = sb.shell()
            if self._replay is not None:  # a fork's first shell takes the original's state
                script, self._replay = self._replay, None
                self._shell.run(script, timeout_s=self.limits.timeout_s)
        return self._shell.run(command, timeout_s=self.limits.timeout_s)

    def write_file(self, path: str, content: str) -> None:
        self._live().write_file(path, content)

    def stop_shell(self) -> None:
        """Stop the persistent shell and everything it left running (files stay); a later
        ``bash`` command starts a new one. Idempotent."""
        if self._shell is not None:
            sh, self._shell = self._shell, None
            sh.close()

    def read_file(self, path: str) -> str:
        """A workspace file's text (raises FileNotFoundError)."""
        return self._live().read_file(path)

    def file_or_none(self, path: str) -> str | None:
        """A workspace file's text, or None when there is no such file."""
        try:
            return self.read_file(path)
        except FileNotFoundError:
            return None

    # -- forks ---------------------------------------------------------------------------
    def fork(self) -> Session:
        """A new session, with a sandbox of its own, in this one's state.

        The new sandbox's workspace and ``/tmp`` are a copy of this one's, taken while this
        sandbox is frozen (when its shell left jobs running that could change files); the
        persistent shell's working folder, exported variables, functions, aliases, umask
        and options are saved (:meth:`PersistentShell.save_state`) and given to the fork's
        shell at its first command. Background jobs and non-exported variables are not
        copied. Neither session sees what the other does afterwards.

        Raises:
            RuntimeError: the session is closed (the episode ended).
            SandboxError: the sandbox could not be copied.
        """
        sb = self._live()
        saved = self._save_shell()
        busy = self._shell is not None and self._shell.has_jobs()
        with sb.frozen() if busy else contextlib.nullcontext():
            replay = self._take_saved(sb, saved) if saved is not None else self._replay
            other = Session(
                self.task,
                self.template,
                self.make_sandbox,
                self.limits,
                self.max_obs_chars,
                shell=self.shell_mode,
                copy_of=sb,
            )
        other._replay = replay
        other._digest = self._digest
        return other

    def _save_shell(self) -> str | None:
        """Save the persistent shell's state to a file of the sandbox's ``/tmp``; its name,
        or None when no shell runs."""
        name = f".rg-shell-{secrets.token_hex(8)}"
        return name if self._shell is not None and self._shell.save_state(f"/tmp/{name}") else None

    def _take_saved(self, sb: Sandbox, name: str) -> str:
        """The script :meth:`_save_shell` saved (the file is removed)."""
        try:
            return sb.take_tmp_file(name)
        except FileNotFoundError as e:  # the agent's processes removed it meanwhile
            raise SandboxError(f"the shell's saved state vanished: {e}") from e

    # -- diff and grading ---------------------------------------------------------------
    def diff(self) -> tuple[str, list[HackFlag]]:
        """The workspace's diff, or ``("", ["diff_failed"])`` if the agent broke git.

        Taken when nothing of the agent runs: the persistent shell and what it left running
        are stopped first (:meth:`stop_shell`), so the diff is final and no process of the
        episode is alive while it is graded.
        """
        self.stop_shell()
        return grader.diff_or_flag(self._live())

    def current_diff(self) -> tuple[str, list[HackFlag]]:
        """The workspace's diff as it stands, like :meth:`diff` but with the shell left
        running (a process the agent left in the background may change it later)."""
        return grader.diff_or_flag(self._live())

    def grade(
        self,
        diff: str,
        flags: Sequence[HackFlag] = (),
        *,
        mode: grader.RewardMode,
        cache: MutableMapping[tuple, Any] | None = None,
    ) -> grader.GradeResult:
        """Grade ``diff`` in a fresh sandbox (``cache`` reuses results of identical diffs).

        A cached verdict is keyed by everything the grading depended on: the task's files
        (not only its id), the grading code, the sandbox backend and limits, the reward
        mode, the diff and the flags. It is reused only once two gradings of the same diff
        agreed, each with its own random names and check numbers: a verdict won by luck
        (a guessed sealed value) must win again before it is replayed, and a diff whose two
        gradings disagree, or that was ever untrusted or an ``infra_error``, is graded
        afresh every time.
        """
        key = (
            self.task.id,
            self.task.version,
            self._task_digest(),
            grader.code_digest(),
            self._backend,
            self.limits,
            mode,
            diff,
            tuple(flags),
        )
        cache = cache if cache is not None else {}
        entry = cache.get(key)
        if isinstance(entry, CachedGrade) and entry.confirmed:
            return copy.deepcopy(entry.result)  # a fresh object per call, as Gymnasium asks
        result = grader.grade(
            self.task,
            self.template,
            diff,
            mode=mode,
            make_sandbox=self.make_sandbox,
            limits=self.limits,
            extra_flags=list(flags),
        )
        if entry is _NEVER:
            return result
        if result.infra_error or result.untrusted:
            cache[key] = _NEVER
        elif entry is None:
            cache[key] = CachedGrade(copy.deepcopy(result), confirmed=False)
        elif entry.result.tests == result.tests and entry.result.reward == result.reward:
            cache[key] = CachedGrade(entry.result, confirmed=True)
        else:  # two gradings of the same diff disagreed: this diff is graded every time
            cache[key] = _NEVER
        return result

    def _task_digest(self) -> str:
        if self._digest is None:
            self._digest = self.task.digest()
        return self._digest

    def close(self) -> None:
        """Stop the episode's sandbox. Idempotent."""
        self._shell = None  # the sandbox closes its shells
        if self.sandbox is not None:
            sb, self.sandbox = self.sandbox, None
            sb.close()
