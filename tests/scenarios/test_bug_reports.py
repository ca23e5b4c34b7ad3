"""Bug reports from the failing behaviour: recorded calls, checks, scripts, leak checks.

The calls are recorded by the real probe (a pytest plugin) on a small package, with and
without a bug, and every script is run for real, on both versions.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repogym.scenarios import bug_reports
from repogym.scenarios.synth import HostRunner

CODE = """\
import datetime


class Version:
    def __init__(self, major, minor=0):
        self.major, self.minor = major, minor

    def __repr__(self):
        return f"Version({self.major}, {self.minor})"

    def bump(self, step=1):
        return Version(self.major + step)

    @property
    def text(self):
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text):
        a, b = text.split(".")
        return cls(int(a), int(b))


class Money:
    def __init__(self, cents):
        self.cents = cents

    def __eq__(self, other):
        return isinstance(other, Money) and other.cents == self.cents

    def __repr__(self):
        return f"Money({self.cents})"


def add(a, b=1, *, scale=1):
    return (a + b) * scale


def fmt(x, sep=",", end="!"):
    return f"{x}{sep}{end}"


def price(euros):
    return Money(euros * 100)


def later(day):
    if day.year < 2000:
        raise ValueError("too old")
    return day + datetime.timedelta(days=1)
"""
TESTS = """\
import datetime

from pkg.core import Version, add, fmt, later, price


def test_fmt():
    assert fmt(1, end="?") == "1,?"


def test_add():
    assert add(2) == 3
    assert add(2, 5, scale=2) == 14


def test_bump():
    v = Version.parse("1.2")
    w = v.bump()
    assert w.text == "2.0"


def test_price():
    assert price(3) == price(3)
    assert price(2).cents == 200


def test_later():
    assert later(datetime.date(2020, 1, 1)) == datetime.date(2020, 1, 2)
    try:
        later(datetime.date(1990, 1, 1))
    except ValueError:
        pass
    else:
        raise AssertionError("no error")


def test_later_with_a_lambda():
    pick = lambda d: later(d)  # noqa: E731
    assert pick(datetime.date(2020, 1, 1)).day == 2
"""
BUGS = {
    "test_add": ("return (a + b) * scale", "return (a + b) * scale + 1"),
    "test_bump": ("return Version(self.major + step)", "return Version(self.major + step + 1)"),
    "test_price": ("return Money(euros * 100)", "return Money(euros * 10)"),
    "test_later": ("if day.year < 2000:", "if day.year < 1900:"),
}


def _package(root: Path, code: str) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "core.py").write_text(code)
    (root / "tests" / "test_core.py").write_text(TESTS)
    return root


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Test -> (calls without the bug, calls with it, the two package folders)."""
    base = tmp_path_factory.mktemp("reports")
    gold = _package(base / "gold", CODE)
    runner = HostRunner()
    hidden = ["tests/test_core.py"]
    ids = [f"tests/test_core.py::{t}" for t in [*BUGS, "test_fmt"]]
    good = runner.calls(gold, ids, hidden, 120)
    out = {"test_fmt": (good["tests/test_core.py::test_fmt"], [], gold, gold)}
    for test, (old, new) in BUGS.items():
        assert old in CODE
        buggy = _package(base / test, CODE.replace(old, new))
        node = f"tests/test_core.py::{test}"
        out[test] = (good[node], runner.calls(buggy, [node], hidden, 120)[node], gold, buggy)
    return out


def _run(script: str, root: Path) -> tuple[int, str]:
    (root / "reproduction.py").write_text(script)
    res = subprocess.run(
        [sys.executable, "reproduction.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return res.returncode, res.stdout + res.stderr


def test_the_probe_records_calls_with_inputs_and_outcomes(recorded):
    gold, _, _, _ = recorded["test_bump"]
    assert [c["text"] for c in gold] == ["Version.parse('1.2')", "_v0.bump()", "_v1.text"]
    assert gold[0]["outcome"] == {
        "returned": "Version(1, 2)",
        "imports": [["pkg.core", "Version"]],
        "type": "Version",
        "repr": "Version(1, 2)",
        "ref": 0,
    }
    add, _, _, _ = recorded["test_add"]
    assert [c["text"] for c in add] == ["add(2)", "add(2, 5, scale=2)"]  # defaults left out
    fmt, _, _, _ = recorded["test_fmt"]
    assert [c["text"] for c in fmt] == ["fmt(1, end='?')"]  # after a default: by name
    later, _, _, _ = recorded["test_later"]
    assert later[1]["outcome"]["raised"] == "ValueError"
    assert later[1]["outcome"]["import"] == ["builtins", "ValueError"]


@pytest.mark.parametrize("test", sorted(BUGS))
def test_each_check_fails_with_the_bug_and_passes_without_it(recorded, test):
    gold_calls, buggy_calls, gold, buggy = recorded[test]
    checks = bug_reports.replay_checks(buggy_calls, gold_calls)
    assert checks
    verified = []
    for check in checks:
        script = bug_reports.script([check])
        code, out = _run(script, buggy)
        if code != 0 and "AssertionError" in out and _run(script, gold)[0] == 0:
            verified.append((check, out))
    assert verified, [bug_reports.script([c]) for c in checks]
    check, out = verified[0]
    expected = {
        "test_add": "add(2) returned 4, expected 3",
        "test_bump": "version.bump() returned Version(3, 0), expected Version(2, 0)",
        "test_price": "price(3) returned Money(30), expected Money(300)",
        "test_later": "later(datetime.date(1990, 1, 1)) returned datetime.date(1990, "
        "1, 2), expected ValueError",
    }[test]
    assert expected in out, out


def test_a_type_without_equality_is_compared_by_its_repr(recorded):
    gold_calls, buggy_calls, gold, _ = recorded["test_bump"]
    first, by_repr = bug_reports.replay_checks(buggy_calls, gold_calls)
    assert _run(bug_reports.script([first]), gold)[0] != 0  # Version has no __eq__
    assert _run(bug_reports.script([by_repr]), gold)[0] == 0
    assert "repr(result) == expected" in by_repr.body[-1]


def test_several_checks_report_every_problem(recorded):
    checks = []
    for test in ("test_add", "test_later"):
        gold_calls, buggy_calls, _, _ = recorded[test]
        checks.append(bug_reports.replay_checks(buggy_calls, gold_calls)[0])
    script = bug_reports.script(checks)
    _, _, gold, _ = recorded["test_add"]
    both = _package(
        gold.parent / "both", CODE.replace(*BUGS["test_add"]).replace(*BUGS["test_later"])
    )
    code, out = _run(script, both)
    assert code != 0 and "add(2) returned 4" in out and "expected ValueError" in out
    assert _run(script, gold)[0] == 0


def test_no_check_from_calls_that_cannot_be_written():
    lam = [
        {
            "text": "later(...)",
            "opaque": "an argument of type function",
            "kind": "call",
            "outcome": {"returned": "1"},
        }
    ]
    assert bug_reports.replay_checks(lam, [{**lam[0], "outcome": {"returned": "2"}}]) == []
    same = [{"text": "f(1)", "kind": "call", "imports": [], "outcome": {"returned": "1"}}]
    assert bug_reports.replay_checks(same, same) == []  # nothing differs


def test_a_test_body_becomes_a_check_when_its_calls_cannot_be_replayed(tmp_path):
    code = CODE.replace(
        "return day + datetime.timedelta(days=1)", "return day + datetime.timedelta(days=2)"
    )
    buggy = _package(tmp_path / "buggy", code)
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(TESTS, "tests/test_core.py::test_later_with_a_lambda")
    assert check is not None and check.source == "test"
    script = bug_reports.script([check])
    assert "pick = lambda d: later(d)" in script and "from pkg.core import" in script
    code_, out = _run(script, buggy)
    assert code_ != 0 and "pick(datetime.date(2020, 1, 1)).day gave 3, expected 2" in out
    assert _run(script, gold)[0] == 0
    assert (
        bug_reports.inline_check(
            "import pytest\n\ndef test_f(tmp_path):\n    assert 1\n", "t.py::test_f"
        )
        is None
    )  # a fixture: not inlined


#: colorama's layout: the tests inside the package, importing it relatively, and a module-level
#: ``try`` of imports binding what a test uses.
INNER = """\
import datetime

try:
    from unittest.mock import Mock
except ImportError:
    from mock import Mock

from ..core import later as shift


def test_later_inside():
    today = Mock(return_value=datetime.date(2020, 1, 1))
    assert shift(today()).day == 2
"""


def test_a_test_inside_the_package_becomes_a_check(tmp_path):
    """Its relative import is written from the repository's root (``from pkg.core import
    later as shift``), and the ``try`` of imports that binds ``Mock`` is written whole: the
    script runs at the repository's root and fails by its own assertion with the bug."""
    code = CODE.replace(
        "return day + datetime.timedelta(days=1)", "return day + datetime.timedelta(days=2)"
    )
    buggy = _package(tmp_path / "buggy", code)
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(INNER, "pkg/tests/test_inner.py::test_later_inside")
    assert check is not None
    script = bug_reports.script([check])
    assert "from pkg.core import later as shift" in script and "from .." not in script
    assert "except ImportError:" in script
    code_, out = _run(script, buggy)
    assert code_ != 0 and bug_reports.fails_itself(out), out
    assert _run(script, gold)[0] == 0
    climbing = INNER.replace("from ..core", "from ...core")  # above the repository's root
    assert bug_reports.inline_check(climbing, "pkg/tests/test_inner.py::test_later_inside") is None


def test_a_test_whose_code_raises_with_the_bug_states_the_error_as_its_own_failure(tmp_path):
    """The bug makes the library raise inside the test's code (astor's code generator
    crashing): the inlined script fails by the library's error, which is no statement of
    the bug; wrapped (`synth.asserting_check`), it fails by its own AssertionError naming
    the error, and passes at the gold code."""
    from repogym.scenarios.synth import asserting_check

    code = CODE.replace("if day.year < 2000:", "if day.year < 2100:")  # raises "too old"
    buggy = _package(tmp_path / "buggy", code)
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(INNER, "pkg/tests/test_inner.py::test_later_inside")
    code_, out = _run(bug_reports.script([check]), buggy)
    assert code_ != 0 and not bug_reports.fails_itself(out) and "ValueError: too old" in out
    wrapped = asserting_check(check)
    assert wrapped is not None and "raise AssertionError" in "\n".join(wrapped.body)
    script = bug_reports.script([wrapped])
    code_, out = _run(script, buggy)
    assert code_ != 0 and bug_reports.fails_itself(out), out
    assert out.rstrip().endswith("AssertionError: ValueError: too old")
    assert _run(script, gold)[0] == 0
    # several checks in one script: each body runs inside a function of its own
    assert _run(bug_reports.script([wrapped, wrapped]), gold)[0] == 0


#: cssselect's layout: one unittest method that runs dozens of checks in a row.
LONG = (
    "import unittest\n\nfrom pkg.core import add, fmt\n\n\n"
    "class TestMany(unittest.TestCase):\n"
    "    def test_many(self):\n"
    "        self.assertEqual(fmt(1), '1,!')\n"
    "        self.assertEqual(add(2, 3, scale=2), 10)\n"
    + "".join(f"        self.assertEqual(fmt({n}, sep=';'), '{n};!')\n" for n in range(80))
)


def test_a_long_test_is_cut_after_a_check_that_fits(tmp_path):
    """A test whose inlined body is longer than a statement may hold is cut after the
    last of its checks that fits: the check that fails with the bug comes early, and the
    cut script fails by its own assertion with the bug and passes without it."""
    buggy = _package(tmp_path / "buggy", CODE.replace("(a + b) * scale", "(a + b) * scale + 1"))
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(LONG, "tests/test_long.py::TestMany::test_many")
    assert check is not None
    limit = bug_reports.MAX_CHARS - 600
    assert len(bug_reports.script([check])) > limit
    cut = bug_reports.shortened(check, limit)
    assert cut is not None
    script = bug_reports.script([cut])
    assert len(script) <= limit and script.rstrip().splitlines()[-1].strip().startswith(
        "self.assertEqual"
    )
    code_, out = _run(script, buggy)
    assert code_ != 0 and bug_reports.fails_itself(out), out
    assert _run(script, gold)[0] == 0
    # nothing of the test fits: no cut
    assert bug_reports.shortened(check, 150) is None


#: The same layout with the check that fails with the bug last, after 80 that hold.
LATE = (
    "import unittest\n\nfrom pkg.core import add, fmt\n\n\n"
    "class TestMany(unittest.TestCase):\n"
    "    def test_many(self):\n"
    "        self.assertEqual(fmt(1), '1,!')\n"
    "        total = add(1, 1)\n"
    + "".join(f"        self.assertEqual(fmt({n}, sep=';'), '{n};!')\n" for n in range(80))
    + "        self.assertEqual(add(2, 3, scale=total), 10)\n"
)


def test_a_long_test_is_cut_after_the_check_that_fails_with_the_bug(tmp_path):
    """Where the failing check comes after all that fits, the whole script run once with
    the bug names it (its traceback): the body is cut after it, and the checks before it
    that bind nothing are left out, earliest first, until it fits; what they bind stays
    (``total``). The cut fails by its own assertion with the bug and passes without it."""
    buggy = _package(tmp_path / "buggy", CODE.replace("(a + b) * scale", "(a + b) * scale + 1"))
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(LATE, "tests/test_long.py::TestMany::test_many")
    assert check is not None
    limit = bug_reports.MAX_CHARS - 600
    whole = bug_reports.script([check])
    assert len(whole) > limit
    # the checks that fit all hold with the bug: the old cut does not reproduce it
    early = bug_reports.shortened(check, limit)
    assert early is not None and _run(bug_reports.script([early]), buggy)[0] == 0
    code_, out = _run(whole, buggy)
    assert code_ != 0
    cut = bug_reports.cut_at_failure(check, out, limit)
    assert cut is not None and cut.call == "self.assertEqual(add(2, 3, scale=total), 10)"
    assert cut.function == "add"  # what the failing check calls, not the test's last call
    script = bug_reports.script([cut])
    assert len(script) <= limit and "total = add(1, 1)" in script
    assert script.rstrip().endswith("self.assertEqual(add(2, 3, scale=total), 10)")
    assert "fmt(0, sep=';')" not in script and "fmt(79, sep=';')" in script  # earliest out
    code_, out = _run(script, buggy)
    assert code_ != 0 and bug_reports.fails_itself(out), out
    assert _run(script, gold)[0] == 0
    # no traceback of the script, or a limit nothing fits: no cut
    assert bug_reports.cut_at_failure(check, "AssertionError", limit) is None
    assert bug_reports.cut_at_failure(check, _run(whole, buggy)[1], 150) is None


MIXIN = {  # cachetools' layout: test methods in a mixin of the tests package
    "tests/__init__.py": textwrap.dedent("""\
        import datetime

        DAY = datetime.date(2020, 1, 1)


        class Lock:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False


        class LaterMixin:
            Pick = None

            def day(self):
                with Lock():
                    return DAY

            def test_next_day(self):
                self.assertEqual(self.Pick(self.day()).day, 2)
        """),
    "tests/test_later.py": textwrap.dedent("""\
        import unittest

        from pkg.core import later

        from . import LaterMixin


        class LaterTest(unittest.TestCase, LaterMixin):
            Pick = staticmethod(later)

            def setUp(self):
                self.base = 1

            def test_base(self):
                self.assertEqual(later(self.day()).day, self.base + 1)
        """),
}


@pytest.mark.parametrize(
    "node",
    ["tests/test_later.py::LaterTest::test_next_day", "tests/test_later.py::LaterTest::test_base"],
)
def test_a_unittest_method_from_a_mixin_becomes_a_check(tmp_path, node):
    """``self.Pick`` (a class attribute of the concrete class), ``self.day()`` (a mixin
    helper using a class of the tests package) and ``setUp`` are written into the script;
    the tests package is not imported (it is hidden)."""
    code = CODE.replace(
        "return day + datetime.timedelta(days=1)", "return day + datetime.timedelta(days=2)"
    )
    buggy = _package(tmp_path / "buggy", code)
    gold = _package(tmp_path / "gold", CODE)
    check = bug_reports.inline_check(MIXIN["tests/test_later.py"], node, MIXIN.get)
    assert check is not None
    script = bug_reports.script([check])
    assert "from . import" not in script and "tests" not in script
    assert "class Lock:" in script  # what the mixin's helper uses, from the tests package
    # the concrete class's attribute, only where the test uses it
    assert ("Pick = staticmethod(later)" in script) == node.endswith("test_next_day")
    assert "self.setUp()" in script  # unittest runs the class's setUp before each test
    code_, out = _run(script, buggy)
    assert code_ != 0 and "AssertionError: 3 != 2" in out and bug_reports.fails_itself(out), out
    assert _run(script, gold)[0] == 0
    # no class of the chain defines what self.missing is: nothing is drafted
    lone = MIXIN["tests/test_later.py"].replace("later(self.day())", "later(self.missing)")
    assert (
        bug_reports.inline_check(
            lone.replace("    def setUp(self):\n        self.base = 1\n", ""),
            "tests/test_later.py::LaterTest::test_base",
            MIXIN.get,
        )
        is None
    )


def test_statement_format_and_the_reproduction_in_it(recorded):
    gold_calls, buggy_calls, _, _ = recorded["test_add"]
    [check] = bug_reports.replay_checks(buggy_calls, gold_calls)
    script = bug_reports.script([check], ["src"])
    assert (
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "
        "'src'))" in script
    )
    text = bug_reports.statement("pkg", [check], script)
    assert text.startswith("`add` is off by one\n\n")  # titled from what the bug does
    assert "`add(2)` returns `4`; it should return `3`." in text
    assert bug_reports.reproduction_of(text) == script
    assert "\nReproduction:\n\n```python\n" in text and len(text) <= bug_reports.MAX_CHARS


def test_only_the_scripts_own_assertion_counts():
    own = (
        'Traceback (most recent call last):\n  File "/workspace/reproduction.py", line 5, '
        "in <module>\n    assert result == expected\nAssertionError: f(1) returned 2\n"
    )
    library = (
        'Traceback (most recent call last):\n  File "/workspace/reproduction.py", line '
        '5, in <module>\n  File "/workspace/pkg/core.py", line 3, in f\n'
        "    assert map is False\nAssertionError\n"
    )
    assert bug_reports.fails_itself(own) and not bug_reports.fails_itself(library)
    assert not bug_reports.fails_itself("ok\n")
    unit = (
        'Traceback (most recent call last):\n  File "/workspace/reproduction.py", line 9, '
        'in <module>\n    self.assertEqual(2, f())\n  File "/usr/lib/python3.11/unittest/'
        'case.py", line 873, in assertEqual\n    assertion_func(first, second, msg=msg)\n'
        '  File "/usr/lib/python3.11/unittest/case.py", line 866, in _baseAssertEqual\n'
        "    raise self.failureException(msg)\nAssertionError: 2 != 3\n"
    )
    assert bug_reports.fails_itself(unit)  # the script's self.assertEqual
    lists = unit.replace(  # a message over several lines, its last one the lists' diff
        "AssertionError: 2 != 3\n",
        "AssertionError: Lists differ: [1] != [1, 2]\n\nSecond list contains 1 additional "
        "elements.\nFirst extra element 1:\n2\n\n- [1]\n+ [1, 2]\n?    +++\n",
    )
    assert bug_reports.fails_itself(lists)
    assert not bug_reports.fails_itself(lists.replace("AssertionError: Lists", "KeyError: Lists"))


def test_leaks_are_lines_and_tokens_of_the_fix_and_test_names():
    gold = textwrap.dedent("""\
        diff --git a/pkg/core.py b/pkg/core.py
        --- a/pkg/core.py
        +++ b/pkg/core.py
        @@ -1,2 +1,2 @@
         def sep():
        -    return ''
        +    return '-~-'
        """)
    buggy = ["def sep():\n    return ''\n"]
    assert bug_reports.distinctive_tokens(gold, buggy) == {"'-~-'"}
    assert bug_reports.leaks("sep() should give '-~-'", gold, buggy) == [
        "a token only the fix has: \"'-~-'\""
    ]
    assert bug_reports.leaks("it says return '-~-' there", gold, buggy)[0].startswith(
        "a line the fix adds"
    )
    assert bug_reports.leaks("sep() returns ''", gold, buggy) == []
    assert bug_reports.leaks(
        "see test_sep_is_dashed", gold, buggy, ["tests/test_core.py::test_sep_is_dashed"]
    ) == ["a hidden test's name: 'test_sep_is_dashed'"]


def test_a_report_shows_no_memory_address():
    """parse's `search` returned `<parse.Match object at 0x7fdb...>`: an address differs
    from run to run and tells nothing; the sentence keeps the object, not the address."""
    check = bug_reports.Check(
        body=("assert False",),
        imports=(("parse", "search"),),
        call="search('{:^2S}', 'foo')",
        actual="returned <parse.Match object at 0x7fdbefb75390>",
        expected="return <Result ('foo',) {}>",
        function="search",
    )
    text = bug_reports.statement("parse", [check], bug_reports.script([check]))
    assert "`<parse.Match object>`" in text and "0x" not in text, text
