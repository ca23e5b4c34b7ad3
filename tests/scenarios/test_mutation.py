"""The mutation library (formatting kept, stable ids, equivalence). The mutation check that
grades the mutants is tested in tests/quality/test_validate_mutation.py."""

from __future__ import annotations

import ast
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from repogym.scenarios.mutation import (
    OPERATORS,
    callers,
    changed_lines,
    equivalence,
    file_diff,
    mutants,
    reviewed_equivalents,
    touched_functions,
)
from repogym.scenarios.task import TaskError

from ._tasks import git

DATA = Path(__file__).parent / "data"

SOURCE = '''\
"""A module written in its own style."""


class Box:
    def __init__(self, items=None, limit=10, sep='-'):
        self.items = items
        self.limit = limit

    def add(self, item):
        if item is None:
            raise ValueError('no item')
        self.items.append(item)   # keep order
        total = len(self.items)
        total  +=  1
        return total


def pick(xs, lo, hi, strict=False):
    out = []
    for x in xs:
        if x<lo  or  x >= hi:   # out of range
            continue
        if strict and x in out:
            break
        out.append(clip(x, lo))
    try:
        key = sorted(out)[0] * 2
    except IndexError:
        key = 0
    return key if out else lo - 1


def clip(x, lo):
    return max(x, lo)
'''


def _changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) between two texts."""
    import difflib

    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def test_every_operator_is_made_and_keeps_the_file_formatting():
    made = mutants(SOURCE, "box.py")
    assert {m.operator for m in made} == set(OPERATORS)
    assert len({m.id for m in made}) == len(made)
    for m in made:
        ast.parse(m.source)
        assert m.source != SOURCE
        removed, added = _changed(SOURCE, m.source)
        assert len(added) <= 1, m.id  # one line edited in place, or lines dropped
        assert not any(line.strip() == "pass" for line in added), m.id
        if added:  # the edited line keeps its comment, quotes and spacing elsewhere
            [before] = removed
            assert before.split("#")[1:] == added[0].split("#")[1:], m.id
            indent = len(before) - len(before.lstrip())
            assert added[0][: indent + 1] == before[: indent + 1], m.id


@pytest.mark.parametrize(
    ("mid", "line"),
    [
        ("box.py::pick::compare(<=)@3:12", "        if x<=lo  or  x >= hi:   # out of range"),
        ("box.py::pick::bool_op(and)@3:17", "        if x<lo  and  x >= hi:   # out of range"),
        ("box.py::pick::drop_condition(keep_left)@3:17", "        if x<lo:   # out of range"),
        (
            "box.py::pick::invert_condition(not)@3:11",
            "        if not (x<lo  or  x >= hi):   # out of range",
        ),
        ("box.py::Box.add::arith_op(-=)@5:15", "        total  -=  1"),
        (
            "box.py::Box.add::exception_type(TypeError)@2:18",
            "            raise TypeError('no item')",
        ),
        (
            "box.py::Box.__init__::wrong_default(empty)@0:49",
            "    def __init__(self, items=None, limit=10, sep=''):",
        ),
        (
            "box.py::Box.__init__::wrong_default(+1)@0:41",
            "    def __init__(self, items=None, limit=11, sep='-'):",
        ),
        ("box.py::pick::swap_args(0-1)@7:24", "        out.append(clip(lo, x))"),
        ("box.py::pick::remove_call(arg)@9:21", "        key = out[0] * 2"),
        ("box.py::pick::exception_type(KeyError)@10:11", "    except KeyError:"),
        ("box.py::pick::constant(+1)@11:14", "        key = 1"),
        ("box.py::pick::wrong_default(True)@0:28", "def pick(xs, lo, hi, strict=True):"),
        ("box.py::pick::invert_condition(not)@12:18", "    return key if not out else lo - 1"),
        ("box.py::clip::return_value(None)@1:11", "    return None"),
    ],
)
def test_edits_in_place(mid, line):
    [m] = [m for m in mutants(SOURCE, "box.py") if m.id == mid]
    _, added = _changed(SOURCE, m.source)
    assert added == [line]


def test_dropped_statements_leave_no_trace_and_keep_bindings():
    made = {m.id: m for m in mutants(SOURCE, "box.py")}
    dropped = made["box.py::Box.add::remove_call(statement)@3:8"]
    assert _changed(SOURCE, dropped.source) == (
        ["        self.items.append(item)   # keep order"],
        [],
    )
    assert "box.py::Box.add::drop_guard(removed)@1:8" in made
    # `total = len(...)` binds total for the first time: dropping it would only raise
    # NameError, so it is not a mutant; `total += 1` is.
    drops = {i for i in made if "drop_statement" in i}
    assert drops == {
        "box.py::Box.__init__::drop_statement(removed)@1:8",
        "box.py::Box.__init__::drop_statement(removed)@2:8",
        "box.py::Box.add::drop_statement(removed)@5:8",
    }
    # the only statement of a block (`continue`, `break`, clip's return) is never dropped:
    # that would need a bare `pass`
    assert not any(i.startswith("box.py::clip::") and "drop" in i for i in made)


def test_ids_are_stable_and_local_to_their_function():
    first = [m.id for m in mutants(SOURCE, "box.py")]
    assert first == [m.id for m in mutants(SOURCE, "box.py")]
    shifted = SOURCE.replace(
        '"""A module written in its own style."""',
        '"""A module."""\n\nimport os\n\n\ndef other(a):\n    return a + 1\n',
    )
    again = [m.id for m in mutants(shifted, "box.py")]
    assert [i for i in again if "::other::" not in i] == first


def test_selected_functions_only():
    made = mutants(SOURCE, "box.py", functions={"clip"})
    assert made and {m.function for m in made} == {"clip"}
    assert {m.operator for m in mutants(SOURCE, "box.py", operators=["compare"])} == {"compare"}


def test_trivial_equivalence():
    dead = "def f(x):\n    return x\n    y = x + 1\n"
    [m] = [m for m in mutants(dead, "d.py") if m.operator == "arith_op"]
    assert equivalence(dead, m.source) == "same bytecode"
    assert equivalence("x = 1\n", "x = (1)  # same\n") == "same AST"
    assert equivalence("x = 1\n", "x = 2\n") is None


def test_touched_functions_and_callers():
    diff = textwrap.dedent("""\
        diff --git a/box.py b/box.py
        --- a/box.py
        +++ b/box.py
        @@ -34,2 +34,3 @@ def clip(x, lo):
         def clip(x, lo):
        -    return max(x, lo)
        +    low = lo
        +    return max(x, low)
        """)
    lines = changed_lines(diff)
    assert lines == {"box.py": {34, 35, 36}}
    fixed = SOURCE.replace("    return max(x, lo)\n", "    low = lo\n    return max(x, low)\n")
    assert touched_functions(fixed, lines["box.py"]) == {"clip"}
    assert callers(fixed, {"clip"}) == {"pick"}
    assert touched_functions(fixed, {5}) == {"Box.__init__"}
    # a module-level change selects the functions that read the name it binds
    assert touched_functions(
        "LIMIT = 3\n\ndef f():\n    return LIMIT\n\ndef g():\n    return 1\n", {1}
    ) == {"f"}


def test_file_diff_applies_with_git(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 2")  # no newline at the end
    git("init", "-q", cwd=tmp_path)
    patch = file_diff("a.py", "x = 1\ny = 2", "x = 1\ny = 3") + file_diff("new.py", None, "z = 0\n")
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=patch.encode(), check=True)
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 3"
    assert (tmp_path / "new.py").read_text() == "z = 0\n"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("mutation = 3", "'mutation'"),
        ('[mutation]\nequivalent = "x"', "'mutation.equivalent'"),
        ('[mutation]\nequivalent = [{ mutant = "a" }]', "'mutation.equivalent[0]'"),
        ('[mutation]\nequivalent = [{ mutant = "a", why = " " }]', "'mutation.equivalent[0]'"),
        (
            '[mutation]\nequivalent = [{ mutant = "a", why = "b" }, { mutant = "a", why = "c" }]',
            "'mutation.equivalent[1]'",
        ),
        ("[mutation]\nequivalents = []", "'mutation.equivalents'"),
    ],
)
def test_malformed_equivalent_list_names_file_and_key(tmp_path, table, key):
    (tmp_path / "task.toml").write_text(f'id = "t"\n{table}\n')
    with pytest.raises(TaskError, match=f"task.toml: key {re.escape(key)}.*Fix: "):
        reviewed_equivalents(tmp_path)


def test_function_names_list_a_property_once():
    """A getter and its setter share a name; synthesis keeps one bug per function, so the
    name once (listed twice, semver's ``Version.patch`` gave the same task twice)."""
    from repogym.scenarios.mutation import function_names

    src = (
        "class V:\n    @property\n    def patch(self):\n        return self._p\n\n"
        "    @patch.setter\n    def patch(self, value):\n        raise AttributeError('ro')\n"
    )
    assert function_names(src) == ["V.patch"]
