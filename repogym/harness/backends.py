"""Where a run's episodes execute: in-process, a process pool, or Ray actors.

Each backend is a generator ``(cfg, task_refs, todo) -> rows``, yielding one results row per
finished episode, in completion order. Each worker (the calling process, a ``spawn`` pool
process, a Ray actor) owns one :class:`~repogym.harness.worker.EpisodeWorker`. Whatever ends
the generator (the last row, an exception, ``close()`` of the generator on Ctrl-C) stops the
workers, closes every env and leaves no worker process behind.
"""

from __future__ import annotations

import atexit
import signal
import time
from collections.abc import Iterator
from typing import Any

from repogym.harness.agents import Agent
from repogym.harness.config import RunConfig
from repogym.harness.worker import Episode, EpisodeWorker


def run_inline(cfg: RunConfig, refs: list[str], todo: list[Episode],
               agent: Agent | None = None) -> Iterator[dict[str, Any]]:
    """Episodes one after another in this process (``workers=1``), reusing ``agent``."""
    worker = EpisodeWorker(cfg, refs, agent)
    try:
        for task_id, sample in todo:
            yield worker.run(task_id, sample)
    finally:
        worker.close()


# -- process pool --------------------------------------------------------------------------
_WORKER: EpisodeWorker | None = None


def _raise_interrupt(signum: int, frame: Any) -> None:
    """First SIGINT/SIGTERM: refuse new episodes and interrupt this one; later signals are
    ignored so that the clean-up the first one started (closing the env) is not itself
    interrupted."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _ignore_signal)
    if _WORKER is not None:
        _WORKER.stop()
    raise KeyboardInterrupt(f"signal {signum}")


def _ignore_signal(signum: int, frame: Any) -> None:
    """A Python-level no-op (SIG_IGN would race with a signal already pending)."""


def _pool_init(cfg: RunConfig, refs: list[str]) -> None:
    global _WORKER
    _WORKER = EpisodeWorker(cfg, refs)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    atexit.register(_WORKER.close)
    from multiprocessing import util

    util.Finalize(None, _WORKER.close, exitpriority=100)


def _pool_run(task_id: str, sample: int) -> dict[str, Any]:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.run(task_id, sample)


def run_pool(cfg: RunConfig, refs: list[str], todo: list[Episode]) -> Iterator[dict[str, Any]]:
    """Episodes on ``cfg.workers`` spawned processes, each owning an env and an agent."""
    import concurrent.futures as cf
    import multiprocessing as mp

    pool = cf.ProcessPoolExecutor(max_workers=min(cfg.workers, len(todo)),
                                  mp_context=mp.get_context("spawn"),
                                  initializer=_pool_init, initargs=(cfg, refs))
    futures = [pool.submit(_pool_run, t, s) for t, s in todo]
    try:
        for fut in cf.as_completed(futures):
            yield fut.result()
        pool.shutdown(wait=True)
    finally:
        _stop_pool(pool, futures)


def _stop_pool(pool: Any, futures: list[Any]) -> None:
    """Cancel queued episodes; SIGTERM the workers (their handler closes the env), then kill."""
    for fut in futures:
        fut.cancel()
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 30
    killed = False
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
            killed = True
    if killed:
        _collect_garbage()


def _collect_garbage() -> None:
    """Remove sandbox folders of killed processes (they carry the dead owner's pid)."""
    from repogym.sandbox.workspace import collect_garbage

    collect_garbage()


# -- Ray -------------------------------------------------------------------------------------
def run_ray(cfg: RunConfig, refs: list[str], todo: list[Episode]) -> Iterator[dict[str, Any]]:
    """Episodes on ``cfg.workers`` Ray actors (a local Ray, or the cluster at ``cfg.ray``)."""
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("--ray needs Ray. Fix: pip install 'repogym[ray]'") from e
    started = not ray.is_initialized()
    if started:
        if cfg.ray == "local":
            ray.init(num_cpus=cfg.workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=cfg.ray, log_to_driver=False)
    actor_cls = ray.remote(num_cpus=1, max_concurrency=2)(EpisodeWorker)
    actors = [actor_cls.remote(cfg, refs) for _ in range(min(cfg.workers, len(todo)))]
    queue, pending = list(todo), {}
    try:
        for actor in actors:
            if queue:
                pending[actor.run.remote(*queue.pop(0))] = actor
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            actor = pending.pop(ref)
            yield ray.get(ref)
            if queue:
                pending[actor.run.remote(*queue.pop(0))] = actor
    finally:
        _stop_ray(ray, actors, list(pending), started)


def _stop_ray(ray: Any, actors: list[Any], pending: list[Any], started: bool) -> None:
    """Stop running episodes, close every actor's env, then release the actors."""
    for actor in actors:
        actor.stop.remote()
    if pending:
        ray.wait(pending, num_returns=len(pending), timeout=60)
    closing = [actor.close.remote() for actor in actors]
    ray.wait(closing, num_returns=len(closing), timeout=60)
    for actor in actors:
        ray.kill(actor)
    if started:
        ray.shutdown()
        _collect_garbage()  # local actors that had to be killed left their folders


def iter_episodes(cfg: RunConfig, refs: list[str], todo: list[Episode],
                  agent: Agent | None = None) -> Iterator[dict[str, Any]]:
    """Run ``todo`` on the backend ``cfg`` asks for, yielding rows as episodes finish.

    Args:
        cfg: The run.
        refs: The tasks, as :func:`~repogym.harness.worker.task_ref` strings.
        todo: The episodes to run.
        agent: An agent already built (reused by the in-process backend).
    """
    if not todo:
        return iter(())
    if cfg.ray:
        return run_ray(cfg, refs, todo)
    if cfg.workers == 1:
        return run_inline(cfg, refs, todo, agent)
    return run_pool(cfg, refs, todo)
