"""Run one process with a wall-clock limit and an output cap, killing its whole group."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from repogym.sandbox.types import ExecResult

TIMEOUT_EXIT = 124


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(  # noqa: C901 - one select loop over two pipes, a deadline and a cap
    argv: Sequence[str],
    *,
    env: dict[str, str],
    timeout_s: float,
    output_bytes: int,
    stdin: bytes | None = None,
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
    preexec_fn: Callable[[], None] | None = None,
    on_kill: Callable[[], None] | None = None,
) -> ExecResult:
    """Run ``argv`` in its own session; never raises on a timeout.

    Args:
        argv: The command line.
        env: The complete environment (nothing is inherited).
        timeout_s: Wall-clock limit; past it the whole process group is killed.
        output_bytes: stdout+stderr bytes kept; past it the group is killed and the
            result is marked ``output_truncated``.
        stdin: Bytes written to the process's standard input (then closed).
        cwd: Working folder.
        pass_fds: File descriptors the child keeps.
        preexec_fn: Runs in the child before exec (limits, cgroup membership).
        on_kill: Extra clean-up called when the group is killed (e.g. a cgroup kill).
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=pass_fds,
        preexec_fn=preexec_fn,
        close_fds=True,
    )
    bufs: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    pending = memoryview(stdin or b"")
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
    else:
        proc.stdin.close()
    timed_out = truncated = False
    total = 0
    deadline = start + timeout_s
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(min(remaining, 0.5)):
                if key.data == "stdin":
                    try:
                        n = os.write(key.fd, pending[:65536])
                    except BrokenPipeError:
                        n = len(pending)
                    pending = pending[n:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                keep = max(0, output_bytes - total)
                bufs[key.data] += chunk[:keep]
                total += len(chunk)
                if total > output_bytes:
                    truncated = True
            if truncated:
                break
        if timed_out or truncated:
            _kill_group(proc)
            if on_kill:
                on_kill()
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()) if not timed_out else 5)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            if on_kill:
                on_kill()
            proc.wait()
    finally:
        sel.close()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f and not f.closed:
                f.close()
        if proc.poll() is None:  # interrupted (e.g. KeyboardInterrupt): leave nothing behind
            _kill_group(proc)
            if on_kill:
                on_kill()
            proc.wait()
    code = proc.returncode
    if timed_out:
        code = TIMEOUT_EXIT
    elif code < 0:
        code = 128 - code
    return ExecResult(
        stdout=bufs["stdout"].decode("utf-8", "replace"),
        stderr=bufs["stderr"].decode("utf-8", "replace"),
        exit_code=code,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        output_truncated=truncated,
    )
