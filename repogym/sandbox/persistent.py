"""A persistent bash per episode: ``cd``, variables and functions survive between commands.

The shell is an interactive bash (``--norc --noprofile --noediting -i``, no terminal) that
a backend starts inside its sandbox, with the sandbox's isolation and limits. The host
writes one line per command on the shell's standard input::

    \\eval -- $'<command>' </dev/null 3>&-; \\printf '%s %s\\n' <nonce> "$?" >&3

The command is quoted byte by byte (``$'...'``), so no command can break that line. It
reads an empty standard input, and runs with fd 3 closed: fd 3 is the **control channel**,
a pipe only the shell itself holds, on which the line's end writes one record, the
command's random nonce and exit code. Output (stdout and stderr, interleaved as in a
terminal) travels on another pipe, so nothing a command prints can end it. A nonce is
drawn for each command and sent with it, so no earlier command (nor a process it left
running) can announce the end of a later one; records with another nonce, or malformed,
are ignored. A command that reads its own nonce can only misreport itself.

A command that runs past its timeout, or prints more than the output cap, is interrupted
as Ctrl-C would: SIGINT to the shell and to every process the command started (the shell
drops the rest of the command line and keeps its state); what has not exited half a
second later is killed. Processes started by earlier commands keep running. The host then
sends "sync" lines until the shell answers one. A shell that does not answer within a few
seconds (it ignores SIGINT, it ``exec``-ed into something else) is stopped. A shell that
ended (``exit``, ``exec``, a failing ``set -e``, a kill) is replaced by a new one at the
next command; the result of the command that ended it says so in ``shell_reset`` (and so
does the result of a command that found the shell gone, e.g. killed for memory by what a
background job did, and ran in a new one).

Backends provide a :class:`ShellProcess`: the three pipes and a view of the shell's
processes (see :mod:`repogym.sandbox.bwrap`, :mod:`repogym.sandbox.docker`,
:mod:`repogym.sandbox.process`).
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import os
import re
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from repogym.sandbox import cleanup
from repogym.sandbox._exec import TIMEOUT_EXIT
from repogym.sandbox.types import ExecResult, Limits, SandboxError

#: The shell's command line; it is an interactive shell without a terminal or job control.
BASH = ("/bin/bash", "--norc", "--noprofile", "--noediting", "-i")
#: How a launcher script starts it: with an empty ``HISTFILE`` an interactive bash opens no
#: history file (a FIFO the agent left at ``/tmp/.bash_history`` blocked every new shell),
#: and with ``--norc --noprofile --noediting`` it reads no other startup file.
EXEC_BASH = f"export HISTFILE=; exec {' '.join(BASH)}"
#: The fd the shell writes its records to.
CONTROL_FD = 3
#: Exit code reported for a command stopped by the output cap (as if SIGKILLed).
CAPPED_EXIT = 137
START_TIMEOUT_S = 30.0
#: After SIGINT, how long the command's processes have to exit before SIGKILL.
GRACE_S = 0.5
#: How long an interrupted shell has to answer before it is stopped.
RECOVER_S = 3.0
_SYNC_EVERY_S = 0.25
#: Reads of 64 KiB per look at the output pipe: its largest possible buffer (1 MiB).
_READS = 16
_FRESH = "workspace root (working folder, variables, functions and background jobs are reset)"
_SETUP = r"set +o history +H; unset HISTFILE PROMPT_COMMAND MAILCHECK; PS1= PS2= PS0=; "
_RECORD = re.compile(rb"([0-9a-f]{32}) (\d{1,10})")
_MAX_RECORD = 256
#: Interactive bash without a terminal reports a failed tcsetattr after a child dies of a
#: signal; that line is bash's own noise, not the command's output.
_TTY_NOISE = re.compile(rb"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: Inappropriate ioctl for device\n")
_PLAIN = frozenset(
    b'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+=.,:;/@%^&*()[]{}<>|?~#`"$'
)
_QUOTED = [chr(b) if b in _PLAIN else f"\\x{b:02x}" for b in range(256)]
#: Writes (in a subshell, so the shell's own state is untouched; with no other process) a
#: script that gives a new shell this one's state: exported variables (others unset), working
#: folder, functions, aliases, umask and options (last: ``errexit`` must not stop the script;
#: not the line editing ones: ``set +o emacs`` ends a shell without a terminal). ``{path}``
#: is where it goes.
_CAPTURE = r"""( __rg_o=$SHELLOPTS; builtin set +e +u
builtin printf '%s\n' 'for __rg_v in $(builtin compgen -e); do builtin unset -v "$__rg_v"; done'
builtin printf 'builtin cd -- %q\n' "$PWD"
builtin printf '%s\n' 'builtin unset -v OLDPWD'
builtin export -p; builtin declare -f; builtin alias -p; builtin umask -p; builtin shopt -p
builtin printf '__rg_o=%q\n' "$__rg_o"
builtin printf '%s\n' 'for __rg_v in ${SHELLOPTS//:/ }; do case $__rg_v in emacs|vi) ;;' \
  '*) case ":$__rg_o:" in *":$__rg_v:"*) ;; *) builtin set +o "$__rg_v";; esac;; esac; done' \
  'for __rg_v in ${__rg_o//:/ }; do case $__rg_v in errexit|emacs|vi) ;;' \
  '*) builtin set -o "$__rg_v";; esac; done; builtin unset -v __rg_o __rg_v'
case ":$__rg_o:" in *:errexit:*) builtin printf '%s\n' 'builtin set -e';; esac
) > {path} 2>/dev/null"""
NUL_ERROR = (
    "the command contains a NUL character, which bash cannot run. Fix: remove it "
    "(printf '\\0' writes one)"
)


def quote(text: str) -> str:
    """``text`` as a bash ``$'...'`` word whose value is exactly its UTF-8 bytes."""
    return "$'" + "".join(_QUOTED[b] for b in text.encode("utf-8", "replace")) + "'"


def command_line(command: str, nonce: str) -> bytes:
    """The line that runs ``command`` in the shell and reports its end with ``nonce``."""
    return (
        f"\\eval -- {quote(command)} </dev/null {CONTROL_FD}>&-; {_report(nonce, '$?')}\n"
    ).encode()


def _report(nonce: str, value: str) -> str:
    return f"\\printf '%s %s\\n' {nonce} \"{value}\" >&{CONTROL_FD}"


def spawn(
    wrap: Callable[[list[str]], list[str]], *, pass_fds: tuple[int, ...] = (), **popen: Any
) -> tuple[subprocess.Popen, int, int, int]:
    """Start a shell process with new pipes, in a session of its own.

    The process is forked by one thread that lives as long as this process
    (:func:`_spawner`), whichever thread asks: a sandbox may tie its processes' life to
    their parent's (bwrap ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when
    the *thread* that forked ends), and a shell must outlive the worker thread that
    happened to run its first command (a thread pool, a server's request thread).

    Args:
        wrap: Turns the shell's own command line into the full argv (e.g. bwrap's).
        pass_fds: More fds the process keeps.
        popen: More ``subprocess.Popen`` arguments (env, cwd, preexec_fn).

    Returns:
        (process, stdin, output, control): the host ends of the pipes.
    """
    try:
        future = _spawner().submit(_spawn, wrap, pass_fds, popen)
    except RuntimeError:  # the interpreter is shutting down: its threads are going anyway
        return _spawn(wrap, pass_fds, popen)
    try:
        return future.result()
    except BaseException:  # e.g. KeyboardInterrupt while waiting: leave nothing running
        future.add_done_callback(_discard)
        raise


def _spawn(
    wrap: Callable[[list[str]], list[str]], pass_fds: tuple[int, ...], popen: dict[str, Any]
) -> tuple[subprocess.Popen, int, int, int]:
    (in_r, in_w), (out_r, out_w), (ctl_r, ctl_w) = os.pipe(), os.pipe(), os.pipe()
    move = f"exec {CONTROL_FD}>&{ctl_w} {ctl_w}>&-; " if ctl_w != CONTROL_FD else ""
    try:
        proc = subprocess.Popen(
            wrap(["/bin/bash", "-c", f"{move}{EXEC_BASH}"]),
            stdin=in_r,
            stdout=out_w,
            stderr=out_w,
            close_fds=True,
            pass_fds=(ctl_w, *pass_fds),
            start_new_session=True,
            **popen,
        )
    except BaseException:
        for fd in (in_w, out_r, ctl_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, ctl_w):
            os.close(fd)
    return proc, in_w, out_r, ctl_r


def _discard(future: concurrent.futures.Future) -> None:
    """Kill and close a shell whose caller stopped waiting for it."""
    if future.cancelled() or future.exception() is not None:
        return
    proc, *fds = future.result()
    _kill_session(proc.pid)
    proc.wait()
    for fd in fds:
        os.close(fd)


_SPAWNER: concurrent.futures.ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that forks shells (started at first use, made anew after a fork)."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="repogym-shell-spawner"
            )
        return _SPAWNER


def _after_fork_in_child() -> None:
    """The child has no spawner thread (only the forking thread survives a fork)."""
    global _SPAWNER, _SPAWNER_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ShellProcess(abc.ABC):
    """A started shell as a backend runs it: its pipes and its processes.

    Attributes:
        stdin: Host end the command lines are written to.
        output: Host end of the shell's stdout and stderr.
        control: Host end of the shell's fd 3.
        shell_pid: The shell's own id among :meth:`processes` (set once it is ready).
    """

    def __init__(self, stdin: int, output: int, control: int) -> None:
        self.stdin, self.output, self.control = stdin, output, control
        for fd in (stdin, output, control):
            os.set_blocking(fd, False)
        self.shell_pid: int | None = None
        self._fds_open = True

    def on_ready(self, shell_pid: int) -> None:
        """Called once the shell has answered its first line."""
        self.shell_pid = shell_pid

    @abc.abstractmethod
    def processes(self) -> set[int] | None:
        """Ids of the shell's live processes (the shell's own among them; None: unknown)."""

    @abc.abstractmethod
    def signal(self, ids: Iterable[int], sig: int) -> None:
        """Send ``sig`` to the processes ``ids`` (as :meth:`processes` names them)."""

    @abc.abstractmethod
    def returncode(self) -> int | None:
        """The shell's exit status once it has ended (128 + N if killed by signal N)."""

    @abc.abstractmethod
    def terminate(self) -> None:
        """Kill every process of the shell and wait for them. Idempotent."""

    def interrupt(self, started: set[int]) -> None:
        """Ctrl-C: SIGINT to the shell, then to the processes the command ``started``.

        The shell first: a foreground child that died of SIGINT before the shell had its
        own would let the shell go on to the rest of the command line (``sleep; echo``).
        """
        if self.shell_pid:
            self.signal([self.shell_pid], signal.SIGINT)
        self.signal(started - {self.shell_pid}, signal.SIGINT)

    def start_failed(self, output: str) -> ExecResult:
        """The shell ended or hung before its first answer: explain (or raise)."""
        raise SandboxError(f"the persistent shell did not start: {output.strip()[-2000:]}")

    def close(self) -> None:
        """Terminate, then close the pipes. Idempotent."""
        try:
            self.terminate()
        finally:
            if self._fds_open:
                self._fds_open = False
                for fd in (self.stdin, self.output, self.control):
                    os.close(fd)


class PopenShell(ShellProcess):
    """A shell that is (a descendant of) a host subprocess in its own session.

    It cannot outlive this process: a terminating signal, interpreter exit or garbage
    collection kills its session (:mod:`repogym.sandbox.cleanup`), and if this process is
    SIGKILLed, the shell reads the end of its standard input and exits once idle.
    """

    def __init__(self, popen: subprocess.Popen, stdin: int, output: int, control: int) -> None:
        super().__init__(stdin, output, control)
        self.popen = popen
        self._kill_session = cleanup.register(self, _kill_session, popen.pid)

    def returncode(self) -> int | None:
        rc = self.popen.poll()
        if rc is None:
            return None
        self._kill_session.detach()  # reaped: the pid may belong to someone else now
        return 128 - rc if rc < 0 else rc

    def terminate(self) -> None:
        if self.popen.poll() is None:
            _kill_session(self.popen.pid)
        self.popen.wait()
        self._kill_session.detach()


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclasses.dataclass
class _Output:
    """A command's output, kept up to ``limit`` bytes."""

    limit: int
    data: bytearray = dataclasses.field(default_factory=bytearray)
    seen: int = 0

    @property
    def truncated(self) -> bool:
        return self.seen > self.limit

    def add(self, chunk: bytes) -> None:
        self.data += chunk[: max(0, self.limit - self.seen)]
        self.seen += len(chunk)

    def text(self) -> str:
        return _TTY_NOISE.sub(b"", bytes(self.data)).decode("utf-8", "replace")


@dataclasses.dataclass(frozen=True)
class _Event:
    kind: str  # record | eof | deadline | cap
    value: int = 0


class PersistentShell:
    """A bash that keeps its working folder, variables, functions and background jobs.

    Not thread-safe: one command at a time. Start one with ``sandbox.shell()``; the sandbox
    closes it when it closes. ``close()`` is explicit and idempotent.

    Args:
        start: Starts a new shell process in the sandbox (or explains, as an
            ``ExecResult``, why the sandbox's own limits leave no room for one).
        limits: Timeout and output cap per command.
        oom_kills: The sandbox's count of processes killed for memory (to set
            ``resource_exhausted``), if the backend keeps one.
    """

    def __init__(
        self,
        start: Callable[[], ShellProcess | ExecResult],
        limits: Limits,
        *,
        oom_kills: Callable[[], int] | None = None,
    ) -> None:
        self._start = start
        self.limits = limits
        self._oom_kills = oom_kills
        self._proc: ShellProcess | None = None
        self._records = bytearray()
        self._closed = False

    @property
    def process(self) -> ShellProcess | None:
        """The running shell process, if one is running."""
        return self._proc

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, command: str, timeout_s: float | None = None) -> ExecResult:
        """Run ``command`` in the shell; never raises for what the command does.

        Returns:
            stdout and stderr interleaved in ``stdout``; ``timed_out``/``output_truncated``
            when the command was interrupted; ``shell_reset`` when the shell ended or was
            stopped (the next command starts a new one).
        """
        if self._closed:
            raise SandboxError("the shell is closed. Fix: start a new one with sandbox.shell()")
        start = time.monotonic()
        if "\x00" in command:
            return ExecResult(stdout="", stderr=NUL_ERROR + "\n", exit_code=2)
        gone = (
            self._ended(self._proc)[1]
            if self._proc is not None and self._gone(self._proc)
            else None
        )
        if self._proc is None and (failed := self._launch()) is not None:
            return failed
        kills = self._oom_kills() if self._oom_kills else 0
        try:
            res = self._execute(command, timeout_s or self.limits.timeout_s, start)
        except BaseException:  # e.g. KeyboardInterrupt: leave nothing running
            self._drop()
            raise
        if self._oom_kills and self._oom_kills() > kills:
            res.resource_exhausted = "memory"
        if gone and res.shell_reset is None:
            res.shell_reset = (
                f"the shell had ended since the last command ({gone}), so "
                f"this command ran in a new shell at the {_FRESH}"
            )
        return res

    def close(self) -> None:
        """Kill the shell and everything it started. Idempotent."""
        self._closed = True
        self._drop()

    def has_jobs(self) -> bool:
        """True unless the shell is known to run nothing besides itself (and its sandbox's
        PID 1): no background job that could still change files. Unknown counts as True."""
        proc = self._proc
        if proc is None:
            return False
        now = proc.processes()
        return now is None or bool(now - {1, proc.shell_pid})

    def save_state(self, path: str) -> bool:
        """Write to ``path`` (a file in the sandbox) a bash script that gives a new shell
        this one's state: working folder, exported variables (and no others), functions,
        aliases, umask and shell options. Non-exported variables, the history and
        background jobs are not saved. Run the script as a new shell's first command to
        restore the state (:meth:`repogym.envs.session.Session.fork` does).

        The shell keeps its state; what background jobs print meanwhile is dropped. A
        function the agent named like a builtin (``builtin``) can spoil the script, never
        anything outside the sandbox.

        Returns:
            False when no shell is running (the next command would start a fresh one).
        """
        if self._closed or self._proc is None or self._gone(self._proc):
            return False
        res = self._execute(
            _CAPTURE.replace("{path}", quote(path)), self.limits.timeout_s, time.monotonic()
        )
        if res.exit_code != 0 or res.shell_reset:
            raise SandboxError(
                f"could not save the shell's state: {res.output.strip()[-500:]}"
                f"{res.shell_reset or ''}"
            )
        return True

    # -- one command -------------------------------------------------------------------
    def _execute(self, command: str, timeout_s: float, start: float) -> ExecResult:
        proc = self._proc
        assert proc is not None
        before = proc.processes()
        nonce = secrets.token_hex(16)
        out = _Output(self.limits.output_bytes)
        event = self._pump(proc, {nonce}, start + timeout_s, out, command_line(command, nonce))
        reset = None
        if event.kind == "record":
            code = event.value
        elif event.kind == "eof":
            code, reset = self._ended(proc)
        else:
            code = TIMEOUT_EXIT if event.kind == "deadline" else CAPPED_EXIT
            reset = self._recover(proc, before, out)
        note = f"{reset}; the next command runs in a new shell at the {_FRESH}" if reset else None
        return ExecResult(
            stdout=out.text(),
            stderr="",
            exit_code=code,
            timed_out=event.kind == "deadline",
            duration_s=time.monotonic() - start,
            output_truncated=out.truncated,
            shell_reset=note,
        )

    def _recover(self, proc: ShellProcess, before: set[int] | None, out: _Output) -> str | None:
        """Interrupt the running command; returns why the shell had to go, or None."""

        def started() -> set[int]:
            now = proc.processes()
            return set() if now is None else now - (before or set()) - {proc.shell_pid or -1}

        proc.interrupt(started())
        t0 = time.monotonic()
        syncs: set[str] = set()
        while (now := time.monotonic()) < t0 + RECOVER_S:
            if now >= t0 + GRACE_S:
                proc.signal(started(), signal.SIGKILL)
            nonce = secrets.token_hex(16)
            syncs.add(nonce)
            event = self._pump(
                proc,
                syncs,
                min(now + _SYNC_EVERY_S, t0 + RECOVER_S),
                out,
                f"{_report(nonce, '$?')}\n".encode(),
                stop_on_cap=False,
            )
            if event.kind == "record":
                proc.signal(started(), signal.SIGKILL)  # what the command left in the background
                return None
            if event.kind == "eof":
                return self._ended(proc)[1]
        self._drop()
        return "the shell did not answer after the command was interrupted, so it was stopped"

    def _ended(self, proc: ShellProcess) -> tuple[int, str]:
        for _ in range(100):
            if (code := proc.returncode()) is not None:
                break
            time.sleep(0.01)
        self._drop()
        if code is None:
            return 137, "the shell stopped answering, so it was stopped"
        if code > 128:
            return code, f"the shell was killed (signal {code - 128})"
        return code, f"the shell exited (exit code {code})"

    def _gone(self, proc: ShellProcess) -> bool:
        """True if the shell ended since its last command (its control pipe is at EOF)."""
        while True:
            try:
                chunk = os.read(proc.control, 4096)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            self._records += chunk  # stale records: parsed (and ignored) with the next ones

    # -- start and stop ---------------------------------------------------------------------
    def _launch(self) -> ExecResult | None:
        started = self._start()
        if isinstance(started, ExecResult):
            return started
        nonce = secrets.token_hex(16)
        out = _Output(1 << 16)
        try:
            line = f"{_SETUP}{_report(nonce, '$$')}\n".encode()
            event = self._pump(
                started, {nonce}, time.monotonic() + START_TIMEOUT_S, out, line, stop_on_cap=False
            )
            if event.kind != "record":
                started.close()
                return started.start_failed(out.text())
            started.on_ready(event.value)
        except BaseException:
            started.close()
            raise
        self._proc = started
        return None

    def _drop(self) -> None:
        proc, self._proc = self._proc, None
        self._records.clear()
        if proc is not None:
            proc.close()

    # -- the pipes ----------------------------------------------------------------------------
    def _pump(
        self,
        proc: ShellProcess,
        want: set[str],
        deadline: float,
        out: _Output,
        send: bytes = b"",
        *,
        stop_on_cap: bool = True,
    ) -> _Event:
        """Write ``send``, collect output, until a record with a nonce in ``want`` arrives."""
        sel = selectors.DefaultSelector()
        sel.register(proc.output, selectors.EVENT_READ, "out")
        sel.register(proc.control, selectors.EVENT_READ, "ctl")
        pending = memoryview(send)
        if pending:
            sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                for key, _ in sel.select(min(remaining, 0.5)):
                    if key.data == "in":
                        try:
                            pending = pending[os.write(proc.stdin, pending[:65536]) :]
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            return self._eof(proc, out)
                        if not pending:
                            sel.unregister(proc.stdin)
                    elif key.data == "out":
                        if not self._read_output(proc, out):
                            sel.unregister(proc.output)
                        elif stop_on_cap and out.truncated:
                            return _Event("cap")
                    elif (event := self._read_control(proc, want, out)) is not None:
                        return event
            return _Event("deadline")
        finally:
            sel.close()

    @staticmethod
    def _read_output(proc: ShellProcess, out: _Output) -> bool:
        """Read what the output pipe holds now (at most a full pipe's worth, so that a
        flood cannot keep this loop from its deadline); False at end of file."""
        for _ in range(_READS):
            try:
                chunk = os.read(proc.output, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            out.add(chunk)
        return True

    def _read_control(self, proc: ShellProcess, want: set[str], out: _Output) -> _Event | None:
        try:
            chunk = os.read(proc.control, 4096)
        except BlockingIOError:
            return None
        if not chunk:
            return self._eof(proc, out)
        self._records += chunk
        *lines, rest = self._records.split(b"\n")
        self._records[:] = rest if len(rest) <= _MAX_RECORD else b""
        for line in lines:
            m = _RECORD.fullmatch(line)
            if m and m[1].decode() in want:
                self._read_output(proc, out)  # it was written before the record: it is there
                return _Event("record", int(m[2]))
        return None

    def _eof(self, proc: ShellProcess, out: _Output) -> _Event:
        self._read_output(proc, out)
        return _Event("eof")
