"""The clean-up registry (:mod:`repogym.sandbox.cleanup`) under threads and forks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

# Threads register and run clean-ups in a tight loop (each takes the registry's lock) while
# the main thread starts children with a ``preexec_fn``, as every bwrap sandbox does. The
# fork hook of the registry then runs in a child forked at a moment another thread of the
# parent holds the lock.
_SCRIPT = textwrap.dedent(
    """
    import subprocess, threading
    from repogym.sandbox import cleanup

    class Res:
        pass

    stop = threading.Event()

    def churn():
        while not stop.is_set():
            r = Res()
            fin = cleanup.register(r, lambda: None)
            fin()

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(150):
        subprocess.run(["true"], preexec_fn=lambda: None, check=True)
    stop.set()
    for t in threads:
        t.join()
    print("forked 150 children")
    """
)


def test_a_fork_while_another_thread_holds_the_registry_lock_does_not_hang() -> None:
    # Before the fix, the child waited for a lock held by a thread it does not have: the
    # child never reached exec and the parent's Popen never returned.
    # Its own process group, so that a hung child (forked, never exec'd) goes with it.
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("starting children hung (a fork hook waited for a lock)") from None
    assert proc.returncode == 0, stderr[-2000:]
    assert "forked 150 children" in stdout
