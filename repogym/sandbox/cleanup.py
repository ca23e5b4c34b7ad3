"""Process-wide clean-up of sandbox resources: on close, garbage collection, exit and signals.

Every resource that must not outlive its process registers a clean-up function when it is
created: a sandbox lease (its templates, workspaces, mounts and cgroups), a Docker
container, the worker pool of a run, a Ray instance a run started::

    self._release = cleanup.register(self, release_fn, *args)  # a weakref.finalize
    ...
    def release(self):
        self._release()                                          # runs release_fn once

The function then runs once, whichever comes first: the explicit ``close()``, the object
being garbage-collected, interpreter exit (``atexit``), or a terminating signal when the
program installed the handlers below. It must not
hold a reference to the object itself (it would never be collected), and it must be
idempotent: a forced exit that interrupts it half-way runs it again from the start.

Signals. Library code never installs a signal handler, at import or when it creates a
resource: a program that embeds repogym (a trainer inside Ray or verl, a notebook) keeps its
own. A program's entry point calls :func:`install_signal_handlers` (the ``repogym`` command
and the other ``python -m`` entry points that hold sandboxes do): then SIGTERM and SIGHUP,
where the program has no handler of its own, remove every live resource of this process,
stop the daemonic worker processes it started, and then die of the same signal, as the
program would have without them. A program with handlers of its own calls
:func:`close_all` from them. SIGINT keeps Python's behaviour (KeyboardInterrupt): ``with``
blocks and ``finally`` clauses close what they hold and the rest is removed at exit.

Commands that want a graceful stop (``repogym run``, ``train``, ``serve``) call
:func:`graceful_signals` instead: the first SIGTERM, SIGINT or SIGHUP raises
KeyboardInterrupt in the main thread (the command stops starting new work, closes what it
holds, then :func:`die_of` the signal); a second one forces the exit, still removing every
live resource first.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

TERMINATING = (signal.SIGTERM, signal.SIGHUP)
GRACEFUL = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_lock = threading.RLock()
_live: dict[int, weakref.finalize] = {}
_running: dict[int, tuple[Callable[..., Any], tuple]] = {}
_unfinished: list[tuple[Callable[..., Any], tuple]] = []
_next_id = 0
_stopping = threading.Event()
_first_signal: int | None = None


def register(obj: object, fn: Callable[..., Any], *args: Any) -> weakref.finalize:
    """Run ``fn(*args)`` once: when called, when ``obj`` is collected, at exit or on a signal.

    Returns:
        The finalizer: call it to clean up now (later calls do nothing); ``.alive`` says
        whether it has run.
    """
    global _next_id
    with _lock:
        key = _next_id
        _next_id += 1
        fin = weakref.finalize(obj, _run_and_forget, key, fn, args)
        _live[key] = fin
    return fin


def _run_and_forget(key: int, fn: Callable[..., Any], args: tuple) -> None:
    with _lock:
        _live.pop(key, None)
        _running[key] = (fn, args)
    try:
        fn(*args)
    except BaseException:  # a signal interrupted it: finish it at exit or on a forced exit
        with _lock:
            _unfinished.append((fn, args))
        raise
    finally:
        with _lock:
            _running.pop(key, None)


def _finish_unfinished() -> None:
    with _lock:
        todo = list(_unfinished)
        _unfinished.clear()
    for fn, args in todo:
        try:
            fn(*args)
        except Exception as e:
            print(f"repogym: clean-up failed: {type(e).__name__}: {e}", file=sys.stderr)


atexit.register(_finish_unfinished)


def live_count() -> int:
    """How many registered resources of this process are still alive."""
    with _lock:
        return sum(f.alive for f in _live.values())


def close_all(*, interrupted: bool = False) -> None:
    """Clean up every live resource of this process, newest first; errors do not stop it.

    Args:
        interrupted: Also run again the clean-ups that were in progress when a signal
            interrupted them (a forced exit would otherwise leave them half done).
    """
    with _lock:
        redo = [*_running.values(), *_unfinished] if interrupted else []
        if interrupted:
            _unfinished.clear()
        pending = [_live[k] for k in sorted(_live, reverse=True)]
    for step in [*(lambda f=f, a=a: f(*a) for f, a in redo), *pending]:
        try:
            step()
        except Exception as e:
            print(f"repogym: clean-up failed: {type(e).__name__}: {e}", file=sys.stderr)


def stop_children(timeout_s: float = 5.0) -> None:
    """Terminate the daemonic multiprocessing children of this process, then kill them."""
    children = [p for p in multiprocessing.active_children() if p.daemon]
    for p in children:
        p.terminate()
    for p in children:
        p.join(timeout_s)
        if p.is_alive():
            p.kill()
            p.join(1.0)


def stopping() -> bool:
    """True once a terminating signal arrived (work in progress should not start more)."""
    return _stopping.is_set()


def _after_fork_in_child() -> None:
    """A forked child owns none of its parent's resources: forget them (never clean them).

    The child has one thread, and the lock and the event may have been held by a thread
    of the parent that does not exist here: they are made anew, never waited for (a
    ``subprocess`` child with a ``preexec_fn`` runs this hook, and waiting hung it and its
    parent's ``Popen`` for good).
    """
    global _lock, _stopping
    _lock = threading.RLock()
    _stopping = threading.Event()
    for fin in list(_live.values()):
        fin.detach()
    _live.clear()
    _running.clear()
    _unfinished.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def install_signal_handlers() -> None:
    """For a program's entry point: SIGTERM and SIGHUP clean up, then kill the process.

    Each of :data:`TERMINATING` that still has its default handler gets one that removes
    every live resource of this process, stops the daemonic worker processes it started,
    and then dies of the signal as by default (the parent sees the signal). A handler the
    program installed is kept. Idempotent; outside the main thread (where handlers cannot
    be set) it does nothing. Library code never calls it (see the module docstring).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in TERMINATING:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _terminate)


def _terminate(signum: int, frame: Any) -> None:
    _stopping.set()
    die_of(signum)


def die_of(signum: int, children_s: float = 5.0) -> None:
    """Remove every resource, stop worker children (waiting ``children_s``), then die of
    ``signum`` as by default (so the parent sees the signal, as it would without repogym)."""
    close_all(interrupted=True)
    stop_children(children_s)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def graceful_signals() -> Iterator[None]:
    """First SIGTERM/SIGINT/SIGHUP: KeyboardInterrupt in the main thread; second: force exit.

    For long-running commands, around the whole command; the previous handlers come back
    afterwards. Outside the main thread (where handlers cannot be set) it does nothing.
    """
    global _first_signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in GRACEFUL}
    for sig in GRACEFUL:
        signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stopping.clear()
        _first_signal = None


def _interrupt(signum: int, frame: Any) -> None:
    global _first_signal
    if _stopping.is_set():
        force_exit(signum)
    _stopping.set()
    _first_signal = signum
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def stop_signal() -> int | None:
    """The signal that started a graceful stop (None when none arrived)."""
    return _first_signal


def force_exit(signum: int) -> None:
    """Remove every resource and worker child, then die of ``signum`` at once."""
    for sig in GRACEFUL:  # a third signal must not interrupt the clean-up itself
        signal.signal(sig, signal.SIG_IGN)
    print(
        f"repogym: {signal.Signals(signum).name} again: cleaning up and exiting now",
        file=sys.stderr,
    )
    die_of(signum, children_s=2.0)
