"""The harness's executors: where a run's episodes execute (in-process, a process pool, or
Ray actors).

Each executor is a generator ``(cfg, task_refs, todo) -> rows``, yielding one results row per
finished episode, in completion order. Each worker (the calling process, a ``spawn`` pool
process, a Ray actor) owns one :class:`~repogym.harness.worker.EpisodeWorker`. Whatever ends
the generator (the last row, an exception, ``close()`` of the generator on Ctrl-C or
SIGTERM) stops the workers within :data:`STOP_GRACE_S`, closes every env and leaves no
worker process behind; episodes it interrupted are not recorded (a resume runs them).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from repogym.harness.baselines import Agent, AgentConfigError
from repogym.harness.config import RunConfig
from repogym.harness.results import ResultRow, new_row
from repogym.harness.worker import EpisodeRef, EpisodeWorker
from repogym.sandbox import cleanup


def run_inline(
    cfg: RunConfig, refs: list[str], todo: list[EpisodeRef], agent: Agent | None = None
) -> Iterator[ResultRow]:
    """Episodes one after another in this process (``workers=1``), reusing ``agent``."""
    worker = EpisodeWorker(cfg, refs, agent)
    try:
        for task_id, sample in todo:
            yield worker.run(task_id, sample)
    finally:
        worker.close()


# -- process pool --------------------------------------------------------------------------
#: Seconds the workers get to close their envs after the driver asks them to stop.
STOP_GRACE_S = 5.0
#: Seconds busy workers get to stop by themselves when a signal is stopping the run.
SELF_STOP_S = 1.0


def _worker_main(cfg: RunConfig, refs: list[str], conn: Connection) -> None:
    """A pool process: run the episodes the driver sends, one at a time, until told to stop.

    The first SIGTERM/SIGINT/SIGHUP interrupts the episode (its env is closed) and ends the
    process; a second one forces the exit, still removing every sandbox first.
    """
    with cleanup.graceful_signals():
        _serve_episodes(EpisodeWorker(cfg, refs), conn)


def _serve_episodes(worker: EpisodeWorker, conn: Connection) -> None:
    try:
        while not cleanup.stopping():
            try:
                job = conn.recv()
            except EOFError:
                break
            if job is None:
                break
            try:
                conn.send(("row", worker.run(*job)))
            except AgentConfigError as e:
                conn.send(("fatal", e))
                break
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()
        conn.close()


class _Worker:
    """The driver's handle on one pool process and the episode it is running."""

    def __init__(self, ctx: Any, cfg: RunConfig, refs: list[str]) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_worker_main, args=(cfg, refs, child), daemon=True, name="repogym-worker"
        )
        self.proc.start()
        child.close()
        self.episode: EpisodeRef | None = None

    def send(self, episode: EpisodeRef | None) -> None:
        self.episode = episode
        self.conn.send(episode)


def _died_row(cfg: RunConfig, episode: EpisodeRef, exitcode: int | None) -> ResultRow:
    """The row of an episode whose worker process died under it (an infrastructure fault)."""
    return new_row(
        agent=cfg.label,
        task=episode[0],
        sample=episode[1],
        infra_error=f"the worker process died (exit code {exitcode})",
    )


class _Pool:
    """The worker processes of one run, registered with :mod:`repogym.sandbox.cleanup` so a
    forced exit of the driver still stops them and removes what they leave behind."""

    def __init__(self, cfg: RunConfig, refs: list[str], n: int) -> None:
        import multiprocessing as mp

        self.ctx, self.cfg, self.refs = mp.get_context("spawn"), cfg, refs
        self.procs: list[Any] = []  # every process ever started (shared with the clean-up)
        self.workers: list[_Worker] = []
        self.forced_stop = cleanup.register(self, _reap, self.procs)
        for _ in range(n):
            self.add()

    def add(self) -> _Worker:
        w = _Worker(self.ctx, self.cfg, self.refs)
        self.procs.append(w.proc)
        self.workers.append(w)
        return w

    def stop(self) -> None:
        """Idle workers get a stop message and exit after closing their env; busy ones get
        :data:`SELF_STOP_S` if a signal is stopping the run (a Ctrl-C in the terminal reaches
        them too, and a SIGTERM on top would turn their graceful stop into a forced one),
        then SIGTERM. What outlasts :data:`STOP_GRACE_S` is killed and its leftovers reaped.
        """
        busy = [w for w in self.workers if w.episode is not None]
        for w in self.workers:
            if w.proc.is_alive() and w.episode is None:
                with contextlib.suppress(OSError):
                    w.conn.send(None)
        deadline = time.monotonic() + (SELF_STOP_S if cleanup.stopping() else 0.0)
        for w in busy:
            w.proc.join(max(0.0, deadline - time.monotonic()))
        _reap([w.proc for w in busy], [w.proc for w in self.workers])
        self.forced_stop.detach()
        for w in self.workers:
            w.conn.close()


def _reap(terminate: list[Any], wait: list[Any] | None = None) -> None:
    """SIGTERM the live ``terminate`` processes (they close their envs), give them and the
    ``wait`` ones :data:`STOP_GRACE_S` to exit, kill the rest and remove their leftovers."""
    for p in terminate:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    killed = False
    for p in [*terminate, *(wait or [])]:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
            killed = True
    if killed:
        _collect_garbage()


def run_pool(cfg: RunConfig, refs: list[str], todo: list[EpisodeRef]) -> Iterator[ResultRow]:
    """Episodes on ``cfg.workers`` spawned processes, each owning an env and an agent.

    The driver hands out one episode at a time to an idle worker, so nothing is queued in a
    worker: once the driver stops (the last row, an error, Ctrl-C/SIGTERM), no episode
    starts anywhere. A worker that dies mid-episode yields an ``infra_error`` row for it and
    is replaced.
    """
    from multiprocessing.connection import wait

    queue = list(todo)
    pool = _Pool(cfg, refs, min(cfg.workers, len(todo)))
    try:
        for w in pool.workers:
            w.send(queue.pop(0))
        while any(w.episode is not None for w in pool.workers):
            busy = {w.conn: w for w in pool.workers if w.episode is not None}
            sentinels = {w.proc.sentinel: w for w in busy.values()}
            for ready in wait([*busy, *sentinels]):
                w = busy.get(ready) or sentinels[ready]
                if w.episode is None:
                    continue
                row = _receive(w, cfg)
                if w.proc.is_alive():
                    w.send(queue.pop(0) if queue else None)
                else:
                    pool.workers.remove(w)
                    _collect_garbage()  # what the dead process left behind
                    if queue:
                        pool.add().send(queue.pop(0))
                yield row
    finally:
        pool.stop()


def _receive(w: _Worker, cfg: RunConfig) -> ResultRow:
    """The finished episode's row (raising the worker's fatal error), or a died row."""
    assert w.episode is not None
    try:
        if w.conn.poll():
            kind, value = w.conn.recv()
            if kind == "fatal":
                raise value
            return value
    except (EOFError, OSError):
        pass
    w.proc.join(5.0)
    return _died_row(cfg, w.episode, w.proc.exitcode)


def _collect_garbage() -> None:
    """Remove what killed worker processes left behind (their leases: workspaces, templates,
    cgroups)."""
    from repogym.sandbox.leases import collect_garbage

    collect_garbage()


# -- Ray -------------------------------------------------------------------------------------
def run_ray(cfg: RunConfig, refs: list[str], todo: list[EpisodeRef]) -> Iterator[ResultRow]:
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
    token = _RayToken()
    if started:  # a forced exit must still stop the Ray we started (and its actors)
        token.shutdown = cleanup.register(token, _shutdown_ray, ray)
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
        _stop_ray(ray, actors, list(pending), token)


class _RayToken:
    """Holds the clean-up of a Ray instance this run started (None when it did not)."""

    shutdown: Any = None


def _shutdown_ray(ray: Any) -> None:
    ray.shutdown()
    _collect_garbage()  # local actors that had to be killed left their folders


def _stop_ray(ray: Any, actors: list[Any], pending: list[Any], token: _RayToken) -> None:
    """Stop running episodes, close every actor's env, then release the actors."""
    for actor in actors:
        actor.stop.remote()
    if pending:
        ray.wait(pending, num_returns=len(pending), timeout=STOP_GRACE_S)
    closing = [actor.close.remote() for actor in actors]
    ray.wait(closing, num_returns=len(closing), timeout=STOP_GRACE_S)
    for actor in actors:
        ray.kill(actor)
    if token.shutdown is not None:
        token.shutdown()


def iter_episodes(
    cfg: RunConfig, refs: list[str], todo: list[EpisodeRef], agent: Agent | None = None
) -> Iterator[ResultRow]:
    """Run ``todo`` on the executor ``cfg`` asks for, yielding rows as episodes finish.

    Args:
        cfg: The run.
        refs: The tasks, as :func:`~repogym.harness.worker.task_ref` strings.
        todo: The episodes to run.
        agent: An agent already built (reused by the in-process executor).
    """
    if not todo:
        return iter(())
    if cfg.ray:
        return run_ray(cfg, refs, todo)
    if cfg.workers == 1:
        return run_inline(cfg, refs, todo, agent)
    return run_pool(cfg, refs, todo)
