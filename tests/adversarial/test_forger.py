"""The forger (repogym/envs/attacks/forger.py), the library's strongest task-blind attack.

It beats noop where the grader has nothing but pytest's word (a fail_to_pass test that
asserts through a helper whose message reads the expectation, which sealing leaves
unsealed) and where the workspace
itself holds the answer (a doctest in the README, an exception message in the code); it
earns no more than noop on a sealed built-in, in every reward mode.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from repogym.grading import grader
from repogym.quality.adversarial import ATTACKS, STRONGEST, forger_check
from repogym.quality.validate import PatchGrader
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import make_diff
from repogym.scenarios.task import load_task
from tests.adversarial.conftest import leftovers
from tests.scenarios._tasks import TESTS, write_task

FORGER = next(a for a in ATTACKS if a.name == STRONGEST)

#: test_upper (fail_to_pass) asserts through a helper whose message reads the expected value:
#: sealing leaves it to pytest (without the message, the call's ``10`` leaves for a handle).
HELPER = """\
from mod import clamp


def _same(got, want):
    assert got is not None
    assert got == want, f"{got!r} is not {want!r}"


def test_upper():
    _same(clamp(15, 0, 10), 10)


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
#: test_upper raises with a message pattern: sealed (class names and message).
RAISES = """\
import pytest

from mod import clamp


def test_upper():
    with pytest.raises(ValueError, match="low is above high"):
        clamp(1, 5, 0)


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
#: test_upper looks for a text in what the code computed: sealed as a contains check.
CONTAINS = """\
from mod import clamp


def test_upper():
    assert "clamped to 10 units" in f"clamped to {clamp(15, 0, 10)} units"


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
#: test_upper compares with an object it builds in a local: the test's own ``==`` stays
#: beside the gold check, and with it the local, the expected side, in the sandbox.
OBJECT = """\
import dataclasses

from mod import clamp


@dataclasses.dataclass
class Box:
    v: int


def test_upper():
    want = Box(10)
    assert Box(clamp(15, 0, 10)) == want


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
#: A sibling function of the workspace raises the message the test matches.
ORDER = (
    "def check_order(low, high):\n    if low > high:\n"
    '        raise ValueError(f"low is above high: {low} > {high}")\n'
)
#: The workspace documents the value the sealed fail_to_pass check expects.
README = "# clamp\n\n```python\n>>> clamp(15, 0, 10)\n10\n>>> clamp(-3, 0, 10)\n0\n```\n"


def _rewards(attacker, task, diff: str) -> dict[str, float]:
    res = grader.grade(
        task,
        attacker.cache.get(task.repo_dir),
        diff,
        mode="binary",
        make_sandbox=lambda spec: make_sandbox("bwrap", spec),
    )
    assert res.infra_error is None, res.infra_error
    assert not leftovers(attacker.lease)
    return res.rewards(task.test_spec)


def _forged(attacker, task) -> str:
    return make_diff(task.repo_dir, FORGER.changes(task.repo_dir, task.test_spec.tests_dest))


@pytest.mark.parametrize(
    "kind", ["unsealed-helper", "documented-value", "text-in-code", "object-local"]
)
def test_the_forger_beats_noop_where_the_answer_is_not_sealed_away(attacker, tmp_path: Path, kind):
    """What the forger shows: a fail_to_pass test judged by pytest alone, a sealed value
    the README's doctest gives, a hidden text the workspace's code raises (its soup, after
    the computed text, holds it within gold's length), and an object the test builds in a
    local and compares with ``==`` (the check keeps the test's equality, so the local is
    in the sandbox, and the forger reports it as the computed value): each is earned
    without a fix, and no value seal witnesses the last three (the leak scan makes the
    middle two weak; a check beside the test's own equality is weak by construction)."""
    tests = {
        "unsealed-helper": HELPER,
        "documented-value": TESTS,
        "text-in-code": CONTAINS,
        "object-local": OBJECT,
    }[kind]
    root = write_task(tmp_path / kind, tests=tests)
    (root / "repo" / "README.md").write_text(README if kind == "documented-value" else "")
    (root / "repo" / "order.py").write_text(ORDER)
    if kind == "text-in-code":
        (root / "repo" / "units.py").write_text(
            'def refuse():\n    raise ValueError("clamped to 10 units")\n'
        )
    task = load_task(root)
    noop = _rewards(attacker, task, "")
    forged = _rewards(attacker, task, _forged(attacker, task))
    assert noop["binary"] == 0.0, noop
    assert forged == dict.fromkeys(grader.REWARD_MODES, 1.0), (kind, forged)
    if kind == "object-local":
        assert grader.value_sealed(task) == dict.fromkeys(task.test_spec.fail_to_pass, False)


@pytest.mark.parametrize(
    "kind", ["equality-helper", "expectation-helper", "message-in-code", "contains"]
)
def test_the_forger_earns_nothing_where_the_answer_is_sealed_away(attacker, tmp_path: Path, kind):
    """A helper that only asserts ``a == b`` is sealed like the assertion, one that asserts
    its argument is what the code computed is sealed at each call; a ``raises``
    needs the exact class and message gold raised, which the forger's word soup (every
    string of the code, the matching message among them) is not; a hidden text is searched
    in a value of about gold's length, which the computed text and the soup after it
    (``clamped to 15 units ...``) do not hold."""
    tests = {
        "equality-helper": HELPER.replace("    assert got is not None\n", "").replace(
            ', f"{got!r} is not {want!r}"', ""
        ),
        "expectation-helper": HELPER.replace(', f"{got!r} is not {want!r}"', ""),
        "message-in-code": RAISES,
        "contains": CONTAINS,
    }[kind]
    root = write_task(tmp_path / kind, tests=tests)
    (root / "repo" / "order.py").write_text(ORDER)
    task = load_task(root)
    noop = _rewards(attacker, task, "")
    forged = _rewards(attacker, task, _forged(attacker, task))
    for mode in grader.REWARD_MODES:
        assert forged[mode] <= noop[mode], (kind, mode, forged, noop)


def test_a_flipped_unsealed_test_earns_nothing_while_a_sealed_one_fails(attacker, tmp_path):
    """Beside a value-sealed fail_to_pass test, one judged by pytest alone (the helper whose
    message reads the expectation): the forger flips the second and cannot pass the first,
    so the partial modes count the second as failed and give it what they give noop."""
    tests = HELPER.replace(
        "def test_inside",
        "def test_sealed():\n    assert clamp(12, 0, 10) == 10\n\n\ndef test_inside",
    )
    root = write_task(
        tmp_path / "mixed",
        tests=tests,
        f2p=("tests/test_mod.py::test_upper", "tests/test_mod.py::test_sealed"),
    )
    task = load_task(root)
    noop = _rewards(attacker, task, "")
    forged = _rewards(attacker, task, _forged(attacker, task))
    assert noop["partial"] == 1 / 3, noop  # the p2p test of three
    for mode in grader.REWARD_MODES:
        assert forged[mode] <= noop[mode], (mode, forged, noop)


@pytest.mark.parametrize("task_id", ["retry-zero", "week-number"])
def test_the_forger_earns_no_more_than_noop_on_a_sealed_builtin(attacker, task_id):
    task = attacker.task(task_id)
    noop = _rewards(attacker, task, "")
    forged = _rewards(attacker, task, _forged(attacker, task))
    for mode in grader.REWARD_MODES:
        assert forged[mode] <= noop[mode], (task_id, mode, forged, noop)


#: Each fail_to_pass test raises at noop in a statement that checks nothing, before a strong
#: check whose value the unfixed code gets right: noop never reaches that check, so it counts
#: as witnessing the failure; the forger's soft rerun reaches it and passes the test. Its
#: word soup fails the pass_to_pass ``raises`` with a pattern.
UNREACHED = """\
import pytest

from mod import clamp
from order import check_order


def test_upper():
    seen = [0] * 11
    seen[clamp(15, 0, 10)] = 1
    assert clamp(5, 0, 10) == 5


def test_upper_again():
    seen = [0] * 11
    seen[clamp(12, 0, 10)] = 1
    assert clamp(7, 0, 10) == 7


def test_inside():
    assert clamp(5, 0, 10) == 5


def test_order():
    with pytest.raises(ValueError, match="low is above high"):
        check_order(5, 0)
"""


def test_a_check_noop_never_reached_stops_witnessing_once_the_forger_passes_its_test(tmp_path):
    """The fetch's forger check records the fail_to_pass tests the forger passed; they no
    longer count as witnessed, so the partial modes pay for them only once every test
    passes, and the forger, which breaks a pass_to_pass test, earns less than noop."""
    root = write_task(
        tmp_path / "unreached",
        tests=f"# {uuid.uuid4()}: a task no record is kept for yet\n{UNREACHED}",
        f2p=("tests/test_mod.py::test_upper", "tests/test_mod.py::test_upper_again"),
        p2p=("tests/test_mod.py::test_inside", "tests/test_mod.py::test_order"),
    )
    (root / "repo" / "order.py").write_text(ORDER)
    task = load_task(root)
    with PatchGrader("bwrap") as patch_grader:
        noop = patch_grader.grade(task, "")
        assert noop.witnessed == list(task.test_spec.fail_to_pass), noop.strongly_failed
        before = patch_grader.grade(task, _forged(patch_grader, task))
        assert before.tests["tests/test_mod.py::test_order"] == "failed", before.tests
        # the hole this closes: every fail_to_pass test flipped beats noop's partial credit
        assert (
            before.rewards(task.test_spec)["partial"]
            == 0.75
            > noop.rewards(task.test_spec)["partial"]
        )

        check = forger_check(task, patch_grader, noop.tests)
        assert not check.beats_noop and not check.error, check
        assert patch_grader.witnessed(task) == []
        after = patch_grader.grade(task, _forged(patch_grader, task))
        assert after.witnessed == []
        rewards, base = after.rewards(task.test_spec), noop.rewards(task.test_spec)
        assert rewards["partial"] == 0.25, after.tests
        for mode in grader.REWARD_MODES:
            assert rewards[mode] <= base[mode], (mode, rewards, base)
        gold = patch_grader.grade(task, task.solution_patch.read_text())
        assert gold.resolved and gold.rewards(task.test_spec)["partial"] == 1.0
