"""Tests for events.py."""

from events import Emitter


def test_listeners_receive_arguments():
    emitter = Emitter()
    seen = []
    emitter.on("save", lambda name, size=0: seen.append((name, size)))
    assert emitter.emit("save", "a.txt", size=3) == 1
    assert seen == [("a.txt", 3)]
