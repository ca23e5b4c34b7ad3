"""A thread pool for grading runs that an interrupt empties at once.

``with ThreadPoolExecutor() as pool`` waits, on the way out, for every job submitted, so a
Ctrl-C or SIGTERM in ``repogym validate`` or ``repogym suite fetch`` used to run every
queued grading first (hours for a suite). Here the jobs not started are cancelled; the
runs in flight end within their grading-run timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor


@contextlib.contextmanager
def grading_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``max(1, workers)`` threads; leaving it early cancels what has not started."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
