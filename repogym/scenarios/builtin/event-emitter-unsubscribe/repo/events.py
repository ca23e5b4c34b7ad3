"""A minimal synchronous event emitter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Listener = Callable[..., Any]


class Emitter:
    """Calls listeners registered for named events.

    Listeners run synchronously, in registration order. During ``emit``:

    * a listener that unsubscribes itself (or is a ``once`` listener) does not
      affect which other listeners run;
    * a listener removed by an earlier listener is not called;
    * a listener added by a listener is not called until the next ``emit``.
    """

    def __init__(self) -> None:
        self._listeners: dict[str, list[Listener]] = {}

    def on(self, event: str, listener: Listener) -> Callable[[], None]:
        """Register ``listener`` for ``event``; return a function that unsubscribes it."""
        self._listeners.setdefault(event, []).append(listener)
        return lambda: self.off(event, listener)

    def once(self, event: str, listener: Listener) -> Callable[[], None]:
        """Register ``listener`` to run on the next ``event`` only."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.off(event, wrapper)
            return listener(*args, **kwargs)

        return self.on(event, wrapper)

    def off(self, event: str, listener: Listener) -> None:
        """Unsubscribe ``listener`` from ``event``; do nothing if it is not subscribed."""
        listeners = self._listeners.get(event, [])
        if listener in listeners:
            listeners.remove(listener)

    def listener_count(self, event: str) -> int:
        """Return the number of listeners registered for ``event``."""
        return len(self._listeners.get(event, []))

    def emit(self, event: str, *args: Any, **kwargs: Any) -> int:
        """Call every listener of ``event`` with the given arguments.

        Returns:
            The number of listeners that were called.
        """
        called = 0
        for listener in self._listeners.get(event, []):
            listener(*args, **kwargs)
            called += 1
        return called
