"""Retry a flaky call a bounded number of times."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_RETRIES = 3


def retry(
    fn: Callable[[], T],
    retries: int = DEFAULT_RETRIES,
    exceptions: tuple[type[BaseException], ...] = (Exception,),
    delay: float = 0.0,
    backoff: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` and retry it when it raises.

    Args:
        fn: The callable to run; it takes no arguments.
        retries: How many times to retry after the first attempt fails. ``0`` disables
            retrying, so ``fn`` runs exactly once.
        exceptions: Exception types that trigger a retry; anything else propagates at once.
        delay: Seconds to wait before the first retry.
        backoff: Factor applied to the wait before each further retry.
        sleep: Function used to wait (injectable for tests).

    Returns:
        Whatever ``fn`` returns on its first successful attempt.

    Raises:
        ValueError: If ``retries`` is negative.
        Exception: The last exception raised by ``fn`` once all attempts have failed.
    """
    last_error: BaseException | None = None
    # Always allow at least one retry so a single transient error never surfaces.
    attempts = max(retries, 1) + 1
    for attempt in range(attempts):
        if attempt:
            sleep(delay * backoff ** (attempt - 1))
        try:
            return fn()
        except exceptions as exc:
            last_error = exc
    assert last_error is not None
    raise last_error
