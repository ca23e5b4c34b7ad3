"""Packages spread over Ray: one remote call per package, results as each one finishes.

``repogym suite fetch --ray local|ADDRESS``, ``repogym suite build --ray ...``, ``repogym
history`` and ``repogym synth --pypi`` hand each package to :func:`ray_map` (the last two
through :func:`each_job`, which runs them in turn without ``--ray``): with ``local`` it
starts Ray on this machine, else it joins the cluster at ``ADDRESS``. Every call writes
where it would without Ray (a suite's root, a manifests folder), so on a cluster those
paths must be on a file system every node sees (the callers check what came back and say
so when a node wrote elsewhere). An interrupt cancels the calls still running; a Ray this
process started is shut down on the way out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class RayMapError(RuntimeError):
    """Ray is missing or could not be reached (the message names the fix)."""


def ray_map(
    fn: Callable[[Item], Result],
    items: Iterable[Item],
    *,
    address: str,
    cpus_each: int = 1,
) -> Iterator[tuple[Item, Result]]:
    """``(item, fn(item))`` for each item, in the order the calls finish, each call run as a
    Ray task that reserves ``cpus_each`` CPUs. An exception raised by ``fn`` is raised here,
    as itself, after the calls still running are cancelled.

    Raises:
        RayMapError: Ray is not installed, or the cluster at ``address`` cannot be reached.
    """
    try:
        import ray
    except ImportError as e:
        raise RayMapError("--ray needs Ray. Fix: pip install 'repogym[ray]'") from e
    todo = list(items)
    started = not ray.is_initialized()
    if address == "local":  # a call may not reserve more than the machine has
        cpus_each = max(1, min(cpus_each, os.cpu_count() or 1))
    if started:
        try:
            if address == "local":
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise RayMapError(
                f"cannot reach the Ray cluster at {address!r}: {e}. Fix: `ray start --head` "
                "there and pass its address, or --ray local"
            ) from e
    env = {k: v for k, v in os.environ.items() if k.startswith("REPOGYM_")}  # e.g. the cache
    task = ray.remote(num_cpus=cpus_each, max_retries=0, runtime_env={"env_vars": env})(fn)
    pending: dict[Any, Item] = {task.remote(item): item for item in todo}
    try:
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            item = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as e:
                cause = e.cause if isinstance(e.cause, BaseException) else None
                raise (cause or e) from None
            yield item, result
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def each_job(
    fn: Callable[..., Result],
    jobs: Iterable[Item],
    *,
    ray: str | None = None,
    cpus_each: int = 1,
    say: Callable[[str], None] | None = None,
) -> Iterator[tuple[Item, Result]]:
    """``(job, fn(job, say))`` for each job in turn, or, with ``ray`` (``local`` or a
    cluster address), ``(job, fn(job))`` as each Ray task finishes (:func:`ray_map`: a job
    on another machine has no console to speak on). The one loop of the commands that take
    several packages with or without ``--ray``.

    Raises:
        RayMapError: as :func:`ray_map`.
    """
    if ray:
        yield from ray_map(fn, jobs, address=ray, cpus_each=cpus_each)
    else:
        for job in jobs:
            yield job, fn(job, say)
