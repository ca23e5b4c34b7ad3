"""Hidden verifier tests for events.py."""

from events import Emitter


def test_once_listener_does_not_skip_the_next_one():
    emitter = Emitter()
    calls = []
    emitter.once("ready", lambda: calls.append("once"))
    emitter.on("ready", lambda: calls.append("always"))
    assert emitter.emit("ready") == 2
    assert emitter.emit("ready") == 1
    assert calls == ["once", "always", "always"]


def test_listener_unsubscribing_itself_during_emit():
    emitter = Emitter()
    calls = []
    unsubscribe = None

    def first():
        calls.append("first")
        unsubscribe()

    unsubscribe = emitter.on("tick", first)
    emitter.on("tick", lambda: calls.append("second"))
    emitter.on("tick", lambda: calls.append("third"))
    assert emitter.emit("tick") == 3
    assert calls == ["first", "second", "third"]
    assert emitter.listener_count("tick") == 2


def test_several_once_listeners_all_run():
    emitter = Emitter()
    calls = []
    for i in range(4):
        emitter.once("go", lambda i=i: calls.append(i))
    assert emitter.emit("go") == 4
    assert calls == [0, 1, 2, 3]
    assert emitter.listener_count("go") == 0


def test_listener_added_during_emit_waits_for_next_emit():
    emitter = Emitter()
    calls = []

    def adder():
        calls.append("adder")
        if calls.count("adder") == 1:
            emitter.on("ping", lambda: calls.append("late"))

    emitter.on("ping", adder)
    assert emitter.emit("ping") == 1
    assert calls == ["adder"]
    assert emitter.emit("ping") == 2
    assert calls == ["adder", "adder", "late"]


def test_listener_removed_by_earlier_listener_is_not_called():
    emitter = Emitter()
    calls = []

    def victim():
        calls.append("victim")

    def remover():
        calls.append("remover")
        emitter.off("save", victim)

    emitter.on("save", remover)
    emitter.on("save", victim)
    emitter.on("save", lambda: calls.append("last"))
    assert emitter.emit("save") == 2
    assert calls == ["remover", "last"]


def test_registration_order_and_arguments():
    emitter = Emitter()
    seen = []
    emitter.on("save", lambda name, size=0: seen.append(("a", name, size)))
    emitter.on("save", lambda name, size=0: seen.append(("b", name, size)))
    assert emitter.emit("save", "x.txt", size=3) == 2
    assert seen == [("a", "x.txt", 3), ("b", "x.txt", 3)]


def test_off_for_unknown_listener_is_a_no_op():
    emitter = Emitter()
    emitter.off("nothing", print)
    emitter.on("thing", len)
    emitter.off("thing", print)
    assert emitter.listener_count("thing") == 1
    assert emitter.emit("nothing") == 0


def test_unsubscribe_outside_emit():
    emitter = Emitter()
    calls = []
    unsubscribe = emitter.on("x", lambda: calls.append(1))
    unsubscribe()
    assert emitter.emit("x") == 0
    assert calls == []


def test_listener_registered_twice_runs_once_per_registration():
    emitter = Emitter()
    calls = []

    def handler():
        calls.append("h")

    emitter.on("e", handler)
    emitter.on("e", handler)
    assert emitter.listener_count("e") == 2
    assert emitter.emit("e") == 2
    assert calls == ["h", "h"]
    emitter.off("e", handler)
    assert emitter.listener_count("e") == 1
    assert emitter.emit("e") == 1
