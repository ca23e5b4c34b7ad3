"""The clean-up registry (:mod:`repogym.sandbox.cleanup`) under threads and forks."""

from __future__ import annotations

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
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "forked 150 children" in out.stdout
