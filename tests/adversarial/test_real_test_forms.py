"""The forms real packages' tests use are sealed: a report-flipping forger earns nothing.

Real suites rarely write ``assert f(x) == <literal>`` alone: they use unittest's
``self.assertEqual``, nose-style ``eq_`` helpers imported from a helper module,
``@pytest.mark.parametrize`` tables with an expectation column, expected values bound to a
local first, and comparisons with objects the test builds. Each is sealed here
(:mod:`repogym.grading.seal`, :mod:`repogym.grading.gold`), so the payload that resolved a third of
RealPy (flip every non-canary report to passed) earns what noop earns on such a task.
"""

from __future__ import annotations

import ast
import dataclasses
import random
import textwrap

import pytest

from repogym.grading import canaries as cn
from repogym.grading import grader
from repogym.grading import seal as sl
from repogym.quality.validate import PatchGrader
from repogym.scenarios.task import load_task
from tests.adversarial import payloads
from tests.scenarios._tasks import write_task

#: The clamp task's hidden tests, as a real package would write them. Every one of them
#: fails on the unfixed clamp (which ignores ``high``).
REAL_FORMS = """\
import unittest

import pytest

from helper import eq_
from mod import clamp


class Box:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Box) and other.v == self.v

    def __repr__(self):
        return f"Box({self.v})"


class TestClamp(unittest.TestCase):
    def test_unittest_equal(self):
        self.assertEqual(clamp(15, 0, 10), 10)

    def test_unittest_true(self):
        self.assertTrue(clamp(11, 0, 10) == 10)
        self.assertEqual(clamp(12, 0, 10), 10)


def test_helper():
    eq_(clamp(20, 0, 7), 7)


@pytest.mark.parametrize("value, expected", [(30, 9), (40, 9), (5, 5)])
def test_table(value, expected):
    assert clamp(value, 0, 9) == expected


def test_literal_local():
    expected = 3
    assert clamp(8, 0, 3) == expected


def test_object():
    want = Box(4)
    assert Box(clamp(9, 0, 4)) == want


def test_inside():
    assert clamp(5, 0, 10) == 5
"""
HELPER = '''\
def eq_(one, other):
    """nose's eq_."""
    assert one == other, f"{one!r} != {other!r}"
'''
F2P = (
    "tests/test_mod.py::TestClamp::test_unittest_equal",
    "tests/test_mod.py::TestClamp::test_unittest_true",
    "tests/test_mod.py::test_helper",
    "tests/test_mod.py::test_table[30-9]",
    "tests/test_mod.py::test_table[40-9]",
    "tests/test_mod.py::test_literal_local",
    "tests/test_mod.py::test_object",
)
#: What a value seal witnesses: test_object's check keeps the test's own ``==`` with its
#: local (``__eq__`` may be what it checks), so the local stays in the sandbox and a forger
#: can report it (``tests/adversarial/test_forger.py``): that check is weak.
STRONG = tuple(t for t in F2P if t != "tests/test_mod.py::test_object")


@pytest.fixture(scope="module")
def real_forms(tmp_path_factory: pytest.TempPathFactory):
    root = write_task(
        tmp_path_factory.mktemp("forms") / "real-forms",
        tests=REAL_FORMS,
        f2p=F2P,
        p2p=("tests/test_mod.py::test_inside", "tests/test_mod.py::test_table[5-5]"),
    )
    (root / "tests" / "helper.py").write_text(HELPER)
    return load_task(root)


def test_every_form_gets_a_seal_and_no_expected_value_stays_in_the_file(real_forms):
    files = grader._files_to_plant(real_forms, real_forms.repo_dir)
    masked_dir = real_forms.path.parent / "planted"
    masked = cn.plant(files, masked_dir, real_forms.test_spec.all_tests, random.Random(3))
    planted = (masked_dir / "tests" / "test_mod.py").read_text()
    by_test = {masked.original(s.test): s for s in masked.seals}
    for test in F2P:
        assert test.partition("[")[0] in by_test, (test, planted)
    # the table's expectation column and ids, the literal local and the helper's
    # expected values are gone; line numbers are kept
    assert "(30, 9)" not in planted and "expected = 3" not in planted
    assert "eq_(clamp(20, 0, 7), 7)" not in planted and "), 10)" not in planted
    assert len(planted.splitlines()) >= len(REAL_FORMS.splitlines())
    ast.parse(planted)
    cases = {masked.original(c) for c in masked.case_ids}
    assert cases == {
        "tests/test_mod.py::test_table[30-9]",
        "tests/test_mod.py::test_table[40-9]",
        "tests/test_mod.py::test_table[5-5]",
    }


def test_unittest_helpers_and_locals_seal_like_assert():
    src = textwrap.dedent("""\
        import unittest
        from helper import check_equal

        class TestX(unittest.TestCase):
            def test_a(self):
                self.assertIsNone(f(1))
                self.assertIn(f(2), (1, 2))
                self.assertFalse(f(3))
                check_equal(f(4), [1, 2])
                with self.assertRaises(KeyError) as cm:
                    f(5)
                self.assertEqual(cm.exception.args, ("k",))
        """)
    text, out = sl.seal_file(
        src,
        ast.parse(src),
        "tests/t.py",
        random.Random(0),
        set(),
        helpers={"check_equal"},
        gold=True,
    )
    ops = [(s.line, s.op, s.expected) for s in out.seals]
    assert ops == [
        (6, "is", None),
        (7, "in", (1, 2)),
        (8, "truth", False),
        (9, "==", [1, 2]),
        (10, "raises", ("KeyError",)),
        (12, "==", ("k",)),
    ]
    assert "[1, 2]" not in text and "KeyError" not in text


def test_a_gold_check_compares_the_side_that_runs_code_and_keeps_every_failure():
    """``assert expected == f(x)`` checks ``f(x)``, never the expectation itself (which
    would hold at noop); ``f(x) == g(x)`` is not sealed: dropping ``g(x)`` would drop the
    failure it raises on the unfixed code, and keeping it would hand a forger the value."""
    src = textwrap.dedent("""\
        TABLE = [("a", "A")]

        def test_reversed():
            want = make("d")
            assert want == f(1)

        def test_both_sides_call():
            assert parse(1) == normalize(1)
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert [(s.line, s.gold) for s in out.seals] == [(5, True)]
    assert ".equal(" in text.splitlines()[4] and "(f(1)), want, False)" in text.splitlines()[4]
    assert "assert parse(1) == normalize(1)" in text


def test_a_table_that_names_its_rows_runs_them_under_random_ids():
    src = textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize(["raw", "parsed"], [("x", (1, 2)), ("y", (3, 4))],
                                 ids=["first", "second"])
        def test_parse(raw, parsed):
            result = parse(raw)
            assert result == parsed
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert sorted(out.case_ids.values()) == ["first", "second"]
    assert "(1, 2)" not in text and "first" not in text
    assert len(text.splitlines()) == len(src.splitlines())


def test_a_module_constant_table_loses_the_columns_every_user_only_expects():
    """``CASES`` feeds two tests that both only expect its second column: the column
    leaves the constant. ``SHARED``'s second column is an input of ``test_down``: it stays,
    and neither test that reads it is sealed against it."""
    src = textwrap.dedent("""\
        import pytest

        CASES = (("-1", "-1st"), ("2", "2nd"))
        SHARED = [("a", "A"), ("b", "B")]

        @pytest.mark.parametrize(("number", "ordinalized"), CASES)
        def test_ordinal(number, ordinalized):
            assert ordinalized == number + ordinal(number)

        @pytest.mark.parametrize(("number", "ordinalized"), CASES)
        def test_ordinalize(number, ordinalized):
            assert ordinalized == ordinalize(number)

        @pytest.mark.parametrize("low, up", SHARED)
        def test_up(low, up):
            assert upper(low) == up

        @pytest.mark.parametrize("low, up", SHARED)
        def test_down(low, up):
            assert lower(up) == low
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert "-1st" not in text and "2nd" not in text and '("a", "A")' in text
    assert sorted({s.test for s in out.seals}) == [
        "tests/t.py::test_ordinal",
        "tests/t.py::test_ordinalize",
    ]
    assert sorted(out.case_ids.values()) == ["-1--1st", "-1--1st", "2-2nd", "2-2nd"]
    assert len(text.splitlines()) == len(src.splitlines())


def test_an_argument_compared_bare_is_not_a_seal():
    """``assert f(x) == expected`` where ``expected`` is a fixture or a parameter that
    stays in the table: its value is the process's to read, so it earns no seal."""
    src = textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize("a, expected", [(1, 2), (2, 4)])
        def test_roundtrip(a, expected):
            assert f(a) == expected
            assert g(expected) == a

        def test_fixture(tree):
            assert find(tree) == tree
        """)
    _, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert out.seals == [] and out.case_ids == {}


def test_a_hypothesis_test_is_not_sealed():
    """``@given`` runs the body once per example it draws (h2's flow-control tests: 100
    times), so a check there is reached a number of times, with values, that the source
    does not say: gold itself failed its seal ("reached 100 times of 1"). The test next to
    it, run once, is sealed as before."""
    src = textwrap.dedent("""\
        import hypothesis
        from hypothesis import given, settings
        from hypothesis.strategies import integers

        @given(integers(min_value=1025))
        @settings(max_examples=100)
        def test_window(increment):
            assert ack(increment) == b"\\x00\\x01"

        @hypothesis.given(integers())
        def test_other(n):
            assert ack(n) == b"\\x00\\x02"

        def test_once():
            assert ack(1024) == b"\\x00\\x03"
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert [s.test for s in out.seals] == ["tests/t.py::test_once"]
    assert "\\x01" in text and "\\x02" in text and "\\x03" not in text


@pytest.mark.slow
def test_the_report_flipping_forger_earns_no_more_than_noop_on_real_forms(real_forms):
    flip = payloads.SELECTIVE
    with PatchGrader() as g:
        noop = g.grade(real_forms, "")
        gold = g.grade(real_forms, real_forms.solution_patch.read_text())
        forged = g.grade(real_forms, _diff(real_forms, _buggy(real_forms) + "\n" + flip))
        gold_again = g.grade(real_forms, real_forms.solution_patch.read_text())
    assert gold.resolved and gold_again.resolved, gold.test_output[-2000:]
    assert noop.reward == 0.0 and set(STRONG) <= set(noop.strongly_failed), noop.sealed_failures
    assert "tests/test_mod.py::test_object" not in noop.strongly_failed
    assert forged.infra_error is None and forged.reward <= noop.reward, (
        forged.tests,
        forged.untrusted,
    )
    # the flip worked on pytest's side: the seals, not pytest, failed the tests
    assert set(F2P) <= set(forged.sealed_failures), forged.test_output[-2000:]


def _buggy(task) -> str:
    return (task.repo_dir / "mod.py").read_text()


def _diff(task, text: str) -> str:
    from tests.scenarios._tasks import diff

    return diff({"mod.py": _buggy(task)}, {"mod.py": text})


def _forger_earns_nothing(task, f2p) -> None:
    """Gold resolves the task, noop fails every fail_to_pass test by a value, and the
    report-flipping forger earns no more than noop: the seals failed those tests."""
    with PatchGrader() as g:
        noop = g.grade(task, "")
        gold = g.grade(task, task.solution_patch.read_text())
        forged = g.grade(task, _diff(task, _buggy(task) + "\n" + payloads.SELECTIVE))
    assert gold.resolved, (gold.tests, gold.test_output[-2000:])
    assert noop.reward == 0.0 and set(f2p) <= set(noop.strongly_failed), noop.sealed_failures
    assert forged.infra_error is None and forged.reward <= noop.reward, forged.tests
    assert set(f2p) <= set(forged.sealed_failures)


def _task_with(root, tests: str, f2p, p2p, more: dict[str, str]):
    """A clamp task with these hidden tests and more hidden files (name -> text)."""
    write_task(root, tests=tests, f2p=f2p, p2p=p2p)
    for name, text in more.items():
        (root / "tests" / name).write_text(text)
    return load_task(root)


def _witnessed_and_unforgeable(root, tests: str, f2p, p2p) -> None:
    """A clamp task with these hidden tests: every fail_to_pass test is witnessed by a value
    seal, and the report-flipping forger earns no more than noop."""
    task = load_task(write_task(root, tests=tests, f2p=f2p, p2p=p2p))
    _forger_earns_nothing(task, f2p)
    assert all(grader.value_sealed(task).values())


def test_gold_values_that_differ_between_runs_are_dropped():
    from repogym.grading import gold as gd

    a = {"k1": {"t::a": ["v:1"]}, "k2": {"t::a": ["o:<X at 0x?>"], "t::b": ["v:2"]}}
    b = {"k1": {"t::a": ["v:1"]}, "k2": {"t::a": ["o:<Y>"], "t::b": ["v:2"]}}
    assert gd.agreed([a, b]) == {"k1": {"t::a": ["v:1"]}, "k2": {"t::b": ["v:2"]}}


def test_a_default_repr_or_a_bool_is_not_an_informative_gold_value():
    assert not sl.informative(["v:null"])
    assert not sl.informative(['v:{"n":"1"}'])
    assert not sl.informative(["o:<mod.Box object at 0x?>"])
    assert sl.informative(["o:Box(4)"]) and sl.informative(['v:{"s":"abc"}'])


#: A round trip: ``CASES`` feeds ``test_parse`` its expectations (``expected``) and
#: ``test_format`` its inputs (the same column), and ``test_format``'s expectations are
#: ``test_parse``'s inputs. No one planting can hide both: each test is judged in a pass of
#: its own, where the table holds only what that test reads as inputs.
ROUND_TRIP = """\
import pytest

CASES = [
    ("1985-04", (1985, 4), "%Y-%m"),
    ("bad", None, "%Y"),
    ("2001-02", (2001, 2), "%Y-%m"),
]


@pytest.mark.parametrize("text, expected, form", CASES)
def test_parse(text, expected, form):
    if expected is None:
        with pytest.raises(ValueError):
            parse(text)
    else:
        assert parse(text) == expected


@pytest.mark.parametrize("text, expected, form", CASES)
def test_format(text, expected, form):
    if expected is None:
        return_value = None
    else:
        assert fmt(expected, form) == text
"""


def test_a_round_trip_table_is_sealed_one_test_per_pass():
    tree = ast.parse(ROUND_TRIP)
    _, plain = sl.seal_file(ROUND_TRIP, tree, "tests/t.py", random.Random(0), set(), gold=True)
    assert list(plain.focusable) == ["tests/t.py::test_parse", "tests/t.py::test_format"]
    assert plain.seals == []  # no column every test only expects
    text, parse_pass = sl.seal_file(
        ROUND_TRIP,
        tree,
        "tests/t.py",
        random.Random(0),
        set(),
        gold=True,
        focus=["tests/t.py::test_parse"],
    )
    table = text.split("@pytest")[0]
    # the expectations left; a hidden cell is None only where it was (the guard still
    # works); the column test_parse does not read left too
    assert "1985, 4" not in table and "%Y" not in table and '"1985-04"' in table
    assert table.count("None") == 1 + 3 and table.count("...") == 2
    assert [(s.test, s.line, s.gold, s.key.endswith(":f")) for s in parse_pass.seals] == [
        ("tests/t.py::test_parse", 16, True, True)
    ]
    assert len(parse_pass.case_ids) == 3
    text, format_pass = sl.seal_file(
        ROUND_TRIP,
        tree,
        "tests/t.py",
        random.Random(0),
        set(),
        gold=True,
        focus=["tests/t.py::test_format"],
    )
    table = text.split("@pytest")[0]
    assert '"1985-04"' not in table and '"2001-02"' not in table and "(1985, 4)" in table
    assert [s.test for s in format_pass.seals] == ["tests/t.py::test_format"]
    assert grader.focus_groups(
        {
            "a.py::x": ("a.py:T",),
            "a.py::y": ("a.py:T", "a.py:U"),
            "a.py::z": ("a.py:V",),
            "b.py::w": ("b.py:T",),
        }
    ) == [["a.py::x", "a.py::z", "b.py::w"], ["a.py::y"]]


#: A clamp round trip: ``shown`` is ``test_show``'s expectation and ``test_back``'s input.
CLAMP_ROUND_TRIP = """\
import pytest

from mod import clamp

CASES = [(15, "10!"), (12, "10!"), (5, "5!")]


@pytest.mark.parametrize("value, shown", CASES)
def test_show(value, shown):
    assert f"{clamp(value, 0, 10)}!" == shown


@pytest.mark.parametrize("value, shown", CASES)
def test_back(value, shown):
    assert clamp(int(shown[:-1]), 0, 10) == int(shown[:-1])


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


@pytest.mark.slow
def test_a_round_trip_task_is_witnessed_by_values_and_the_forger_earns_nothing(tmp_path):
    f2p = ("tests/test_mod.py::test_show[15-10!]", "tests/test_mod.py::test_show[12-10!]")
    root = write_task(
        tmp_path / "round-trip",
        tests=CLAMP_ROUND_TRIP,
        f2p=f2p,
        p2p=(
            "tests/test_mod.py::test_show[5-5!]",
            "tests/test_mod.py::test_back[15-10!]",
            "tests/test_mod.py::test_inside",
        ),
    )
    task = load_task(root)
    _forger_earns_nothing(task, f2p)
    assert all(grader.value_sealed(task)[t] for t in f2p)  # gold's values recorded


@pytest.mark.slow
def test_a_focus_pass_formats_no_traceback_and_the_first_pass_keeps_the_log(tmp_path, monkeypatch):
    """A focus pass is judged on its channel alone: it runs with ``--tb=no`` (the tests it
    does not judge fail for want of their table, and their tracebacks were most of its
    time); the first pass, whose log the agent reads, keeps the task's own arguments."""
    f2p = ("tests/test_mod.py::test_show[15-10!]", "tests/test_mod.py::test_show[12-10!]")
    task = load_task(
        write_task(
            tmp_path / "round-trip",
            tests=CLAMP_ROUND_TRIP,
            f2p=f2p,
            p2p=("tests/test_mod.py::test_show[5-5!]", "tests/test_mod.py::test_back[15-10!]"),
        )
    )
    seen = _spied(monkeypatch)
    with PatchGrader() as g:
        noop = g.grade(task, "")
    own = task.test_spec.pytest_args()
    # every grading (noop's, and gold's for its recorded values) is a first pass over all
    # the tests, then the focus pass over test_show's
    firsts = [r for r in seen if len(r["ids"]) == len(task.test_spec.all_tests)]
    focus = [r for r in seen if len(r["ids"]) < len(task.test_spec.all_tests)]
    assert firsts and all(r["args"] == own for r in firsts)
    assert len(focus) == len(firsts) and all(r["args"] == [*own, "--tb=no"] for r in focus)
    assert "test_show" in noop.test_output  # the first pass's tracebacks, as before
    assert noop.reward == 0.0 and set(f2p) <= set(noop.strongly_failed)
    # the first pass collects the whole file (test_show, test_back, test_inside: 7 cases);
    # a focus pass, test_show's 3 cases alone; both, every canary planted
    show = {f"tests/test_mod.py::test_show[{p}]" for p in ("15-10!", "12-10!", "5-5!")}
    for r in firsts:
        assert r["select"] is None and len(r["cases"]) == 7 and show < r["cases"]
    for r in focus:
        assert r["cases"] == show
        assert r["canaries"] == r["planted canaries"] and r["canaries"]


@pytest.mark.slow
def test_a_grading_of_a_few_tests_runs_them_alone_with_their_canaries(tmp_path, monkeypatch):
    """Validation grades a decoy on its fail_to_pass tests first: that run collects those
    tests' functions and the canaries planted beside them, not the rest of their files,
    and judges them as a grading of the whole files does."""
    f2p = ("tests/test_mod.py::test_show[15-10!]",)
    p2p = ("tests/test_mod.py::test_inside", "tests/test_mod.py::test_back[5-5!]")
    task = load_task(write_task(tmp_path / "alone", tests=CLAMP_ROUND_TRIP, f2p=f2p, p2p=p2p))
    with PatchGrader() as g:
        whole = g.grade(task, "")  # records gold's values
        seen = _spied(monkeypatch)
        alone = g.grade_alone(task, "", f2p)
    assert alone is not None and not alone.infra_error
    assert alone.tests == {t: whole.tests[t] for t in f2p} == {f2p[0]: "failed"}
    # the first pass and test_show's focus pass: test_show's cases alone, neither
    # test_back nor test_inside, and every canary planted
    assert len(seen) == 2 and all(r["select"] is not None for r in seen)
    show = {f"tests/test_mod.py::test_show[{p}]" for p in ("15-10!", "12-10!", "5-5!")}
    for r in seen:
        assert r["cases"] == show
        assert r["canaries"] == r["planted canaries"] and r["canaries"]


def _spied(monkeypatch) -> list[dict]:
    """Each grading run's pytest arguments, listed ids and selection, and the test cases its
    channel reported, by the task's names (``cases``) and as canaries."""
    seen: list[dict] = []
    planted: list[cn.Masked] = []
    real_plant, real_run = cn.plant, grader.run_grading

    def plant(*args, **kw):
        planted.append(real_plant(*args, **kw))
        return planted[-1]

    def run_grading(sb, gdir, args, node_ids, *rest, **kw):
        run = real_run(sb, gdir, args, node_ids, *rest, **kw)
        masked, reported = planted[-1], set(run.channel.phases if run.channel else ())
        canaries = {c.node_id for c in masked.canaries}
        seen.append(
            {
                "args": list(args),
                "ids": list(node_ids),
                "select": kw.get("select"),
                "cases": {masked.original(n) for n in reported - canaries},
                "canaries": reported & canaries,
                "planted canaries": canaries,
            }
        )
        return run

    monkeypatch.setattr(cn, "plant", plant)
    monkeypatch.setattr(grader, "run_grading", run_grading)
    return seen


def test_an_expected_side_built_of_the_arguments_is_never_the_checked_side():
    """``result == {"items": {keyword: value}}``: the dict is built of the table's columns
    alone, so it is the same at noop; the check compares ``result`` (what the code
    computed), never the dict."""
    src = textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize("given, keyword, value", [([1], "const", 1), ([2], "enum", 2)])
        def test_schema(given, keyword, value):
            result = build(given)
            assert result == {"type": "array", "items": {keyword: value}}
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert [(s.line, s.gold) for s in out.seals] == [(6, True)]
    assert "(result))" in text.splitlines()[5], text


def test_a_table_summed_from_constants_is_sealed_per_constant():
    """``A + B`` as a table (inflection's ``CAMEL_TO_UNDERSCORE +
    CAMEL_TO_UNDERSCORE_WITHOUT_REVERSE``): ``A`` also feeds the reverse test alone, so
    each test is sealed in its own pass, where every constant of its table loses what the
    test expects."""
    src = textwrap.dedent("""\
        import pytest

        A = (("Product", "product"), ("SpecialGuest", "special_guest"))
        B = (("HTMLTidy", "html_tidy"),)

        @pytest.mark.parametrize(("camel", "underscore"), A)
        def test_camelize(camel, underscore):
            assert camel == camelize(underscore)

        @pytest.mark.parametrize(("camel", "underscore"), A + B)
        def test_underscore(camel, underscore):
            assert underscore == to_underscore(camel)
        """)
    tree = ast.parse(src)
    _, plain = sl.seal_file(src, tree, "t.py", random.Random(0), set(), gold=True)
    assert plain.focusable == {
        "t.py::test_camelize": ("t.py:A",),
        "t.py::test_underscore": ("t.py:A", "t.py:B"),
    }
    text, out = sl.seal_file(
        src, tree, "t.py", random.Random(0), set(), gold=True, focus=["t.py::test_underscore"]
    )
    head = text.split("@pytest")[0]
    assert "special_guest" not in head and "html_tidy" not in head and '"HTMLTidy"' in head
    assert [s.test for s in out.seals] == ["t.py::test_underscore"]
    assert sorted(out.case_ids.values()) == [
        "HTMLTidy-html_tidy",
        "Product-product",
        "SpecialGuest-special_guest",
    ]
    assert "A + B, ids=" in text and len(text.splitlines()) == len(src.splitlines())
    # in test_camelize's pass only A loses a column: it stays a tuple, so A + B still adds
    text, _ = sl.seal_file(
        src, tree, "t.py", random.Random(0), set(), gold=True, focus=["t.py::test_camelize"]
    )
    planted = {}
    exec(compile(text.split("@pytest")[0], "t.py", "exec"), planted)
    assert planted["A"] + planted["B"] == (
        (None, "product"),
        (None, "special_guest"),
        ("HTMLTidy", "html_tidy"),
    )


def test_a_branch_on_a_columns_truth_keeps_only_its_truth():
    """isodate's ``if altstr: ... == altstr else: ... == text``: both expectation columns
    leave the table; ``altstr``'s cells keep only whether they were false (so each case
    takes the branch it took before)."""
    src = textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize("text, value, alt", [("P1D", 1, None), ("PT36H", 36, "P1DT12H")])
        def test_format(text, value, alt):
            if alt:
                assert fmt(value) == alt
            else:
                assert fmt(value) == text
        """)
    text, out = sl.seal_file(src, ast.parse(src), "t.py", random.Random(0), set(), gold=True)
    assert "P1D" not in text and "(None, 1, None,)" in text and "(None, 36, ...,)" in text
    assert [(s.line, s.gold) for s in out.seals] == [(6, True), (8, True)]


def test_a_table_that_names_its_rows_may_hold_objects_of_the_package():
    """webcolors' ``(webcolors.PercentRGB(...), "goldenrod")`` row: the table's ``ids=``
    name the rows, so a cell the grader cannot compute does not stop the sealing."""
    src = textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize(
            ["triplet", "name"],
            [(("0%", "0%", "50%"), "navy"), (pkg.PercentRGB("85%", "64%", "12%"), "gold")],
            ids=["navy", "gold-percentrgb"],
        )
        def test_to_name(triplet, name):
            assert name == pkg.to_name(triplet)
        """)
    text, out = sl.seal_file(src, ast.parse(src), "t.py", random.Random(0), set(), gold=True)
    assert sorted(out.case_ids.values()) == ["gold-percentrgb", "navy"]
    assert '"navy"' not in text and '"gold"' not in text and "PercentRGB" in text


#: cachetools' layout: every cache's test class is a ``unittest.TestCase`` named ``*Test``
#: (pytest collects it whatever its name) that runs the tests of a mixin defined in the
#: test package's ``__init__.py``.
MIXIN = """\
from mod import clamp


class ClampTestMixin:
    def test_mixin_clamp(self):
        self.assertEqual(clamp(15, 0, 10), 10)
        self.assertEqual(clamp(-3, 0, 10), 0)

    def test_mixin_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)
"""
MIXIN_USERS = """\
import unittest

from mod import clamp

from . import ClampTestMixin


class ClampTest(unittest.TestCase, ClampTestMixin):
    def test_own(self):
        self.assertEqual(clamp(12, 0, 10), 10)


class OtherClampTest(unittest.TestCase, ClampTestMixin):
    pass
"""


def test_mixin_tests_and_unittest_classes_of_any_name_are_sealed(tmp_path):
    f2p = (
        "tests/test_mod.py::ClampTest::test_own",
        "tests/test_mod.py::ClampTest::test_mixin_clamp",
        "tests/test_mod.py::OtherClampTest::test_mixin_clamp",
    )
    task = _task_with(
        tmp_path / "mixins",
        MIXIN_USERS,
        f2p,
        ("tests/test_mod.py::ClampTest::test_mixin_inside",),
        {"__init__.py": MIXIN},
    )
    assert sl.inherited_tests(
        {"tests/__init__.py": MIXIN, "tests/test_mod.py": MIXIN_USERS}, task.test_spec.all_tests
    ) == {
        "tests/test_mod.py::ClampTest::test_mixin_clamp": (
            "tests/__init__.py::ClampTestMixin::test_mixin_clamp"
        ),
        "tests/test_mod.py::OtherClampTest::test_mixin_clamp": (
            "tests/__init__.py::ClampTestMixin::test_mixin_clamp"
        ),
        "tests/test_mod.py::ClampTest::test_mixin_inside": (
            "tests/__init__.py::ClampTestMixin::test_mixin_inside"
        ),
    }
    files = grader._files_to_plant(task, task.repo_dir)
    planted = tmp_path / "planted"
    masked = cn.plant(files, planted, task.test_spec.all_tests, random.Random(5))
    mixin = (planted / "tests" / "__init__.py").read_text()
    assert "), 10)" not in mixin and "), 0)" not in mixin  # the expected values left it
    assert "def test_" in mixin and mixin.count("def ") == MIXIN.count("def ")  # no canary
    assert {masked.original(s.test) for s in masked.seals} >= set(f2p)
    assert all(grader.value_sealed(task)[t] for t in f2p)
    _forger_earns_nothing(task, f2p)


#: croniter's layout: a support module's ``TestCase``, a base class of the file's own built
#: on it, and test classes named ``*Test`` that derive from that base (pytest collects them
#: through their bases, whatever their names).
SUPPORT_BASE = """\
import unittest


class TestCase(unittest.TestCase):
    maxDiff = None
"""
DERIVED_CLASSES = """\
from mod import clamp

from . import base


class ClampBase(base.TestCase):
    low = 0


class ClampHighTest(ClampBase):
    def test_over(self):
        self.assertEqual(clamp(15, self.low, 10), 10)


class ClampDeeperTest(ClampHighTest):
    def test_far_over(self):
        self.assertEqual(clamp(99, 0, 7), 7)

    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)
"""


def test_unittest_classes_that_derive_from_a_class_of_the_file_are_sealed(tmp_path):
    assert sl.unittest_classes_of(ast.parse(DERIVED_CLASSES)) == {
        "ClampBase",
        "ClampHighTest",
        "ClampDeeperTest",
    }
    f2p = (
        "tests/test_mod.py::ClampHighTest::test_over",
        "tests/test_mod.py::ClampDeeperTest::test_far_over",
    )
    task = _task_with(
        tmp_path / "derived",
        DERIVED_CLASSES,
        f2p,
        ("tests/test_mod.py::ClampDeeperTest::test_inside",),
        {"base.py": SUPPORT_BASE, "__init__.py": ""},
    )
    files = grader._files_to_plant(task, task.repo_dir)
    planted = tmp_path / "planted"
    cn.plant(files, planted, task.test_spec.all_tests, random.Random(3))
    text = (planted / "tests" / "test_mod.py").read_text()
    assert "), 10)" not in text and "), 7)" not in text  # the expected values left it
    assert all(grader.value_sealed(task)[t] for t in f2p)
    _forger_earns_nothing(task, f2p)


#: portion's form: the expected value is one the package builds from literals alone
#: (``d.as_dict() == {P.closedopen(0, 2) | P.openclosed(9, 10): 0}``), and ``parse(...) ==
#: Version(1, 2)``, a type's value against a function's.
BUILT_EXPECTATIONS = """\
from mod import clamp


class Box:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == (other.v if isinstance(other, Box) else other)

    def __repr__(self):
        return f"Box({self.v!r})"


class Boxes:
    @staticmethod
    def of(*values):
        return [Box(v) for v in values]


def test_upper():
    got = clamp(15, 0, 10)
    assert [Box(got)] == Boxes.of(10)


def test_typed():
    assert clamp(99, 0, 7) == Box(7)


def test_relation():
    assert Boxes.of(clamp(3, 0, 10)) == Boxes.of(3)


def test_inside():
    assert clamp(5, 0, 10) == Box(5)
"""


def test_an_expectation_the_package_builds_from_literals_leaves_the_file(tmp_path):
    src = BUILT_EXPECTATIONS
    text, out = sl.seal_file(src, ast.parse(src), "t.py", random.Random(0), set(), gold=True)
    assert "Boxes.of(10)" not in text and "Box(7)" not in text  # the expectations left
    assert "[Box(got)]" in text and "clamp(99, 0, 7)" in text  # the computed sides stay
    # both sides built of literals, neither a type's value: no side is the expectation,
    # so pytest keeps the check
    assert "assert Boxes.of(clamp(3, 0, 10)) == Boxes.of(3)" in text
    sealed = {s.test.rpartition("::")[2] for s in out.seals if s.gold}
    assert {"test_upper", "test_typed", "test_inside"} <= sealed
    assert "test_relation" not in sealed
    _witnessed_and_unforgeable(
        tmp_path / "built",
        src,
        ("tests/test_mod.py::test_upper", "tests/test_mod.py::test_typed"),
        ("tests/test_mod.py::test_inside",),
    )


#: portion's tables: rows written ``pytest.param(items, expected, id="touching")``, which
#: name themselves (a row without an id gets pytest's, from its values).
PARAM_ROWS = """\
import pytest

from mod import clamp


@pytest.mark.parametrize(
    "value, expected",
    [pytest.param(15, 10, id="over"), pytest.param(99, 10, id="far-over"), (12, 10)],
)
def test_upper(value, expected):
    assert clamp(value, 0, 10) == expected


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def test_a_table_of_pytest_param_rows_loses_its_expectation_column(tmp_path):
    src = PARAM_ROWS
    text, out = sl.seal_file(src, ast.parse(src), "t.py", random.Random(0), set(), gold=True)
    assert "pytest.param" not in text and "10)" not in text.split("def test_upper")[0]
    assert sorted(out.case_ids.values()) == ["12-10", "far-over", "over"]
    f2p = tuple(f"tests/test_mod.py::test_upper[{i}]" for i in ("over", "far-over", "12-10"))
    _witnessed_and_unforgeable(tmp_path / "params", src, f2p, ("tests/test_mod.py::test_inside",))


#: pydash's files: ``parametrize = pytest.mark.parametrize`` once, then ``@parametrize``.
PARAMETRIZE_ALIAS = """\
import pytest

from mod import clamp

parametrize = pytest.mark.parametrize


@parametrize("case, expected", [((15, 0, 10), 10), ((99, 0, 7), 7)])
def test_upper(case, expected):
    assert clamp(*case) == expected


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def test_a_table_under_an_alias_of_the_parametrize_mark_is_sealed(tmp_path):
    src = PARAMETRIZE_ALIAS
    text, out = sl.seal_file(src, ast.parse(src), "t.py", random.Random(0), set(), gold=True)
    assert "((15, 0, 10), None," in text and "((99, 0, 7), None," in text  # the column left
    # an alias bound twice is not known to be the mark: its table is pytest's
    twice = src + "\n\ndef helper():\n    parametrize = print\n"
    text, _ = sl.seal_file(twice, ast.parse(twice), "t.py", random.Random(0), set(), gold=True)
    assert "((15, 0, 10), 10)" in text
    f2p = ("tests/test_mod.py::test_upper[case0-10]", "tests/test_mod.py::test_upper[case1-7]")
    _witnessed_and_unforgeable(tmp_path / "alias", src, f2p, ("tests/test_mod.py::test_inside",))


def test_a_method_two_bases_define_is_left_to_pytest():
    users = "from a import A\nfrom b import B\n\nclass XTest(A, B):\n    pass\n"
    both = "class {0}:\n    def test_x(self):\n        assert 1 == 1\n"
    found = sl.inherited_tests(
        {"t/test_x.py": users, "t/a.py": both.format("A"), "t/b.py": both.format("B")},
        ["t/test_x.py::XTest::test_x"],
    )
    assert found == {}


#: Checks inside ``with`` blocks: a message checked in the handler inside ``raises`` (through
#: a module-level ``raises`` context, as schema's tests write it), an assertion before the
#: expected raise, and assertions whose failure the context swallows (never sealed).
WITH_BODIES = """\
import pytest

from mod import clamp

CLAMPS = pytest.raises(ValueError)


def test_message():
    with CLAMPS:
        try:
            raise ValueError(clamp(15, 0, 10))
        except ValueError as e:
            assert e.args[0] == 10
            raise


def test_before_the_raise():
    with pytest.raises(ZeroDivisionError):
        assert clamp(15, 0, 10) == 10
        1 / 0


def test_swallowed():
    with pytest.raises(AssertionError):
        assert clamp(15, 0, 10) == 99
    with pytest.raises(Exception):
        assert clamp(15, 0, 10) == 98
"""


def test_checks_inside_with_blocks_are_sealed_unless_the_context_swallows_them(tmp_path):
    text, out = sl.seal_file(
        WITH_BODIES, ast.parse(WITH_BODIES), "tests/test_mod.py", random.Random(0), set(), gold=True
    )
    assert sorted((s.line, s.op, s.gold) for s in out.seals if s.op != "raises") == [
        (13, "==", True),
        (19, "==", True),
    ]
    assert "== 99" in text and "== 98" in text  # a sealed check never raises: left alone
    assert "== 10" not in text
    f2p = ("tests/test_mod.py::test_message", "tests/test_mod.py::test_before_the_raise")
    _witnessed_and_unforgeable(
        tmp_path / "with-bodies", WITH_BODIES, f2p, ("tests/test_mod.py::test_swallowed",)
    )


def test_a_value_written_out_is_the_expectation_of_a_local_it_is_compared_with():
    """``result == [("", root)]``: the list is what the test expects, ``result`` what the
    code computed; checking the list instead would hold at noop and drop the assertion."""
    src = textwrap.dedent("""\
        def test_rows():
            root = make("root")
            result = [(pre, node) for pre, node in render(root)]
            assert result == [("", root), ("+-- ", root)]
            assert {"k": root} == mapping
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert [(s.line, s.gold) for s in out.seals] == [(4, True), (5, True)]
    lines = text.splitlines()
    assert ".check(" in lines[3] and "(result))" in lines[3] and "+--" not in lines[3]
    assert ".check(" in lines[4] and "(mapping))" in lines[4]


#: Helpers that assert what the code computed equals an argument, called with literal
#: expectations: a module-level one, one a test defines (a branch chooses the comparison)
#: and a unittest method that compares an exception's message in its handler. A call whose
#: expectation the grader cannot compute, and a test that cannot be sealed, keep theirs.
HELPERS = """\
import unittest

from mod import clamp


def assert_clamped(value, high, expected):
    got = clamp(value, 0, high)
    assert got == expected, "clamped"


def test_module_helper():
    assert_clamped(15, 10, 10)
    assert_clamped(value=9, high=4, expected=4)


def test_nested_helper():
    def y(value, e, as_text=False):
        got = clamp(value, 0, 7)
        if as_text:
            assert str(got) == str(e)
        else:
            assert got == e

    y(20, 7)
    y(30, 7, as_text=True)


class TestMessages(unittest.TestCase):
    def assert_message(self, value, message):
        try:
            raise ValueError(clamp(value, 0, 3))
        except ValueError as e:
            self.assertEqual(message, str(e))
            return
        self.fail("no error")

    def test_method_helper(self):
        self.assert_message(12, "3")


def test_left_alone():
    assert_clamped(1, 5, clamp(1, 0, 5))
    yield_ = [assert_clamped(2, 5, 2) for _ in range(1)]
    return yield_
"""


def test_helpers_that_assert_their_arguments_check_the_value_at_each_call(tmp_path):
    text, out = sl.seal_file(
        HELPERS, ast.parse(HELPERS), "tests/test_mod.py", random.Random(0), set(), gold=True
    )
    by_line = sorted((s.line, s.expected, s.gold) for s in out.seals)
    assert by_line == [
        (12, 10, False),
        (13, 4, False),
        (24, None, True),  # the branch: judged against gold's values
        (24, None, True),
        (25, None, True),
        (25, None, True),
        (38, None, True),  # in a handler
    ]
    lines = text.splitlines()
    assert "10)" not in lines[11] and "expected=4" not in lines[12] and '"3"' not in lines[37]
    assert ".at(expected, 0, (got))" in lines[7] and ".at(e, 1, (got))" in lines[21]
    assert "assert_clamped(1, 5, clamp(1, 0, 5))" in text and "assert_clamped(2, 5, 2)" in text
    f2p = (
        "tests/test_mod.py::test_module_helper",
        "tests/test_mod.py::test_nested_helper",
        "tests/test_mod.py::TestMessages::test_method_helper",
    )
    _witnessed_and_unforgeable(
        tmp_path / "helpers", HELPERS, f2p, ("tests/test_mod.py::test_left_alone",)
    )


def test_an_equality_with_a_bool_is_a_truth_check():
    src = "def test_x():\n    assert f(1) == True\n    assert f(2) == 3\n"
    _, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set())
    assert [(s.expected, s.strong) for s in out.seals] == [(True, False), (3, True)]


#: Stacked parametrize decorators: the nearest holds the expectations, the one above
#: feeds an input; pytest runs every combination and ids each ``<nearest>-<above>``.
STACKED = """\
import pytest

from mod import clamp


@pytest.mark.parametrize("low", [0, -1])
@pytest.mark.parametrize("value, expected", [(15, 10), (20, 10), (5, 5)])
def test_stacked(low, value, expected):
    assert clamp(value, low, 10) == expected
"""


def test_stacked_tables_lose_the_expectation_column_of_the_nearest(tmp_path):
    text, out = sl.seal_file(
        STACKED, ast.parse(STACKED), "tests/test_mod.py", random.Random(0), set(), gold=True
    )
    assert "(15, 10)" not in text and "[0, -1]" in text
    assert sorted(out.case_ids.values()) == sorted(
        f"{v}-{e}-{low}" for v, e in ((15, 10), (20, 10), (5, 5)) for low in (0, -1)
    )
    f2p = ("tests/test_mod.py::test_stacked[15-10-0]", "tests/test_mod.py::test_stacked[20-10--1]")
    _witnessed_and_unforgeable(
        tmp_path / "stacked",
        STACKED,
        f2p,
        (
            "tests/test_mod.py::test_stacked[5-5-0]",
            "tests/test_mod.py::test_stacked[5-5--1]",
        ),
    )


def test_an_equality_of_two_locals_keeps_the_equality_beside_the_gold_check():
    """``assert f1 == f2`` (``__eq__`` is what a test of it checks): the gold check reports
    ``f1``, and the equality itself stays an assertion (each side evaluated once), or a
    broken ``__eq__`` would pass."""
    src = textwrap.dedent("""\
        import unittest

        def test_eq():
            f1, f2 = make(1), make(1)
            assert f1 == f2

        class TestX(unittest.TestCase):
            def test_eq(self):
                got, want = make(1), make(2)
                self.assertEqual(got, want)
        """)
    text, out = sl.seal_file(src, ast.parse(src), "tests/t.py", random.Random(0), set(), gold=True)
    assert [(s.line, s.gold) for s in out.seals] == [(5, True), (10, True)]
    lines = text.splitlines()
    assert ".equal(" in lines[4] and "(f1), f2, True)" in lines[4]
    assert ".equal(" in lines[9] and "(got), want, True)" in lines[9]


#: A test-support module of the package (markdown's ``markdown/test_tools.py`` is one): a
#: base class whose helper asserts the code renders an input as expected, and a method that
#: writes the expectation out (``self.dedent("""...""")``).
TOOLS = """\
import textwrap
import unittest

from mod import clamp


class Case(unittest.TestCase):
    high = 10

    def dedent(self, text):
        return textwrap.dedent(text).strip()

    def assertClamps(self, value, expected, **kw):
        got = clamp(value, 0, kw.get("high", self.high))
        self.assertMultiLineEqual(str(got), expected)
"""
BASE_HELPER_TESTS = '''\
from tools import Case


class TestClamp(Case):
    def test_literal(self):
        self.assertClamps(15, "10")

    def test_dedented(self):
        self.assertClamps(
            30,
            self.dedent(
                """
                7
                """
            ),
            high=7,
        )

    def test_inside(self):
        self.assertClamps(5, "5")
'''


def test_a_helper_of_a_base_class_in_a_support_module_is_sealed_at_each_call(tmp_path):
    f2p = (
        "tests/test_mod.py::TestClamp::test_literal",
        "tests/test_mod.py::TestClamp::test_dedented",
    )
    task = _task_with(
        tmp_path / "base-helper",
        BASE_HELPER_TESTS,
        f2p,
        ("tests/test_mod.py::TestClamp::test_inside",),
        {"tools.py": TOOLS},
    )
    files = grader._files_to_plant(task, task.repo_dir)
    masked = cn.plant(files, tmp_path / "planted", task.test_spec.all_tests, random.Random(5))
    planted = (tmp_path / "planted" / "tests" / "test_mod.py").read_text()
    tools = (tmp_path / "planted" / "tests" / "tools.py").read_text()
    # the expectations leave the test file (the literal, and the dedented text: compared
    # with what gold's helper computed); the support module reports what it compares
    assert '"10"' not in planted and "7\n" not in planted.split("def test_inside")[0]
    assert '"5"' not in planted
    assert ".at(expected, 0, (str(got)))" in tools and "import _repogym_seal" in tools
    # a stand-in is no str: the check compares without assertMultiLineEqual's type check
    assert "(self.assertEqual)(" in tools and "assertMultiLineEqual" not in tools
    by_test = {masked.original(s.test): s for s in masked.seals}
    assert not by_test[f2p[0]].gold and by_test[f2p[0]].expected == "10"
    assert by_test[f2p[1]].gold
    _forger_earns_nothing(task, f2p)
    assert all(grader.value_sealed(task).values())


PAIR_HELPER = """\
from mod import clamp


def test_pairs():
    def ck(value, clamped, above_five):
        assert (clamp(value, 0, 10), clamp(value, 5, 10)) == (clamped, above_five)

    ck(15, 10, 10)
    ck(3, 3, 5)

    return  # a bare return that ends the test skips nothing


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def test_a_helper_comparing_two_tuples_written_out_seals_each_item(tmp_path):
    text, out = sl.seal_file(
        PAIR_HELPER, ast.parse(PAIR_HELPER), "tests/test_mod.py", random.Random(0), set()
    )
    assert sorted(s.expected for s in out.seals if s.test.endswith("test_pairs")) == [3, 5, 10, 10]
    assert "ck(15, 10, 10)" not in text and "ck(3, 3, 5)" not in text
    assert ".at(clamped, 0, (clamp(value, 0, 10)))" in text
    f2p = ("tests/test_mod.py::test_pairs",)
    _witnessed_and_unforgeable(
        tmp_path / "pairs", PAIR_HELPER, f2p, ("tests/test_mod.py::test_inside",)
    )


#: Texts a test looks for in what the code computed (``assertIn``, ``"..." in html``).
CONTAINS = """\
import unittest

from mod import clamp


class TestShown(unittest.TestCase):
    def test_upper(self):
        shown = f"clamped to {clamp(15, 0, 10)} units"
        self.assertIn("clamped to 10 units", shown)
        self.assertNotIn("15", shown)

    def test_inside(self):
        assert "to 5 units" in f"clamped to {clamp(5, 0, 10)} units"
        assert "5" in str(clamp(5, 0, 10))
        for v in (1, 2):
            with self.subTest(v=v):
                self.assertIn(f"{v}", str(clamp(v, 0, 10)))
"""


def test_a_text_looked_for_in_a_computed_one_leaves_the_file():
    """``assertIn(<text>, computed)`` and ``assert <text> in computed``: the text is the
    expectation; it leaves the file and the grader searches the value the code reported.
    A text shorter than CONTAINS_CHARS (any text of digits holds ``"5"``), one in a subTest
    (judged against gold's whole value) and ``assertNotIn`` (a bit) are left to pytest."""
    tree = ast.parse(CONTAINS)
    text, out = sl.seal_file(CONTAINS, tree, "tests/t.py", random.Random(0), set(), gold=True)
    assert "clamped to 10 units" not in text and "to 5 units" not in text
    assert 'self.assertNotIn("15", shown)' in text and 'self.assertIn(f"{v}"' in text
    assert 'assert "5" in str(clamp(5, 0, 10))' in text and text.count(".contains(") == 2
    assert [(s.op, s.expected, s.records_gold) for s in out.seals] == [
        ("contains", "clamped to 10 units", True),
        ("contains", "to 5 units", True),
    ]
    cases = {"tests/t.py::TestShown::test_upper": frozenset({"n:25"})}
    long = dataclasses.replace(out.seals[0], cases=cases, gold_strong=True)
    assert long.strong and long.strong_in("tests/t.py::TestShown::test_upper")
    assert not long.strong_in("other")  # gold's length there is unknown


def _text(value) -> dict:
    from repogym.grading.launcher import canon

    return {"v": canon.encode(value), "shown": repr(value)[:50]}


def test_a_contains_check_searches_a_text_of_about_golds_length_only():
    """The forger's answer to a hidden text: every phrase it can find in one value. It holds
    the text, and fails: the value searched may be no longer than twice gold's plus 64
    characters. A value that is no text or container fails, unless gold's was not one either
    there (then the check is not judged, and is no value seal)."""
    s = sl.Seal(1, "t.py::test", 3, "contains", "clamped to 10 units", key="k")
    case = "t.py::test"
    gold = dataclasses.replace(s, cases={case: frozenset({sl.size_print(_text("x" * 40))})})
    assert sl.contains_failure(gold, case, [_text("so: clamped to 10 units, fine")]) is None
    soup = " ".join(f"clamped to {n} units" for n in range(200))
    assert "far longer than gold's" in sl.contains_failure(gold, case, [_text(soup)])
    assert sl.contains_failure(gold, case, [_text("clamped to 15 units")]) is not None
    assert sl.contains_failure(gold, case, [_text(["clamped to 10 units"])]) is None
    opaque = {"v": {"opaque": "Box (TypeError)"}, "shown": "<Box>"}
    assert sl.contains_failure(gold, case, [opaque]) is not None
    assert sl.contains_failure(gold, case, [{"digest": "ab", "shown": "..."}]) is not None
    assert sl.contains_failure(gold, case, ["not a record", {"v": {"q": [1, 0]}}]) is not None
    unsized = dataclasses.replace(s, cases={case: frozenset({"x:"})})
    assert sl.contains_failure(unsized, case, [opaque]) is None
    assert not dataclasses.replace(unsized, gold_strong=False).strong_in(case)


@pytest.mark.slow
def test_a_contains_task_is_witnessed_by_values_and_the_forger_earns_nothing(tmp_path):
    f2p = ("tests/test_mod.py::TestShown::test_upper",)
    _witnessed_and_unforgeable(
        tmp_path / "contains", CONTAINS, f2p, ("tests/test_mod.py::TestShown::test_inside",)
    )


#: A text looked for in a container that is no text or list (the launcher sends its items).
CONTAINS_OBJECT = """\
from mod import clamp


class Shelf:
    def __init__(self, *items):
        self._items = list(items)

    def __iter__(self):
        return iter(self._items)

    def __contains__(self, item):
        return item in self._items


def test_upper():
    assert "clamped to 10 units" in Shelf(f"clamped to {clamp(15, 0, 10)} units", "other")


def test_inside():
    assert "clamped to 5 units" in Shelf(f"clamped to {clamp(5, 0, 10)} units")
"""


@pytest.mark.slow
def test_a_contains_check_over_an_iterable_object_is_judged_by_its_items(tmp_path):
    _witnessed_and_unforgeable(
        tmp_path / "shelf",
        CONTAINS_OBJECT,
        ("tests/test_mod.py::test_upper",),
        ("tests/test_mod.py::test_inside",),
    )


#: Tests that loop over module tables, as num2words writes its language tests: ``CASES`` and
#: ``PAIRS`` lose their expected column; ``SPANS`` stays whole (another test reads its
#: second column as an input).
LOOPED = """\
import unittest

from mod import clamp

CASES = (
    (15, 10),
    (12, 10),
    (5, 5),
)
PAIRS = [(20, 7), (3, 3)]
SPANS = ((0, 10), (2, 8))


class ClampTest(unittest.TestCase):
    def test_table(self):
        for test in CASES:
            self.assertEqual(clamp(test[0], 0, 10), test[1])


def test_pairs():
    for value, expected in PAIRS:
        assert clamp(value, 0, 7) == expected


def test_low():
    for low, high in SPANS:
        assert clamp(-1, low, high) == low


def test_high():
    for low, high in SPANS:
        assert clamp(high + 1, low, high) == high
"""


def test_a_module_table_a_loop_reads_loses_its_expected_column():
    """``for test in CASES: self.assertEqual(f(test[0]), test[1])``: the column read only
    as the expected side leaves the constant (cells become None, rows and lines stay), and
    the check is a gold check reached once per row. A table whose column another test reads
    otherwise keeps it, and so does one that another installed file reads
    (``foreign``)."""
    rel = "tests/test_mod.py"
    text, out = sl.seal_file(LOOPED, ast.parse(LOOPED), rel, random.Random(0), set(), gold=True)
    assert len(text.splitlines()) == len(LOOPED.splitlines())
    assert "(15, (None))" in text and "(12, (None))" in text and "(20, (None))" in text
    assert "(15, 10)" not in text and "(20, 7)" not in text
    assert "SPANS = ((0, 10), (2, 8))" in text
    looped = {s.test: s for s in out.seals if s.gold}
    assert {t: s.times for t, s in looped.items()} == {
        f"{rel}::ClampTest::test_table": 3,
        f"{rel}::test_pairs": 2,
    }
    assert ".check(" in text.split("def test_table")[1].split("def test_pairs")[0]
    kept, _ = sl.seal_file(
        LOOPED,
        ast.parse(LOOPED),
        rel,
        random.Random(0),
        set(),
        gold=True,
        links=sl.Links(foreign=frozenset({"CASES"})),
    )
    assert "(15, 10)" in kept and "(20, 7)" not in kept
    nothing, _ = sl.seal_file(
        LOOPED, ast.parse(LOOPED), rel, random.Random(0), set(), gold=True, links=sl.Links(None)
    )
    assert "(15, 10)" in nothing and "(20, 7)" in nothing


def test_the_names_other_files_read_from_a_test_module_are_found():
    sources = {
        "tests/__init__.py": "",
        "tests/test_fr.py": "CARDINAL = ((1, 'un'),)\nORDINAL = ((1, 'premier'),)\n",
        "tests/test_fr_dz.py": (
            "from . import test_fr\nfrom .test_fr import ORDINAL as O\n\n"
            "def test_x():\n    for t in test_fr.CARDINAL:\n        pass\n"
        ),
        "tests/test_be.py": "from tests.test_es import *\n",
        "tests/test_es.py": "CASES = ((1, 'uno'),)\n",
        "tests/test_it.py": "import tests.test_de\n\nX = tests.test_de.CASES\n",
        "tests/test_de.py": "CASES = ((1, 'eins'),)\n",
    }
    reads = sl.foreign_reads(sources)
    assert reads["tests/test_fr.py"] == {"CARDINAL", "ORDINAL"}
    assert reads["tests/test_es.py"] is None  # star-imported: any name
    assert reads["tests/test_de.py"] == {"CASES"}
    assert reads["tests/test_fr_dz.py"] == frozenset()


def test_loops_over_a_module_table_are_witnessed_and_the_forger_earns_nothing(tmp_path):
    f2p = ("tests/test_mod.py::ClampTest::test_table", "tests/test_mod.py::test_pairs")
    _witnessed_and_unforgeable(tmp_path / "looped", LOOPED, f2p, ("tests/test_mod.py::test_low",))


#: num2words' regional test files: ``test_es_co.py`` derives its class from
#: ``test_es.Num2WordsESTest`` and loops over ``test_es.TEST_CASES_CARDINAL``. Here
#: ``test_mod.py`` is ``test_es.py`` and ``test_region.py`` reads its tables.
DEFINER = """\
import unittest

from mod import clamp

CASES = (
    (15, 10),
    (12, 10),
    (5, 5),
)
PAIRS = ((20, 7), (3, 3))
SEEN = ((30, 10), (1, 1))


class ClampTest(unittest.TestCase):
    def test_table(self):
        for test in CASES:
            self.assertEqual(clamp(test[0], 0, 10), test[1])

    def test_inside(self):
        self.assertEqual(clamp(4, 0, 10), 4)
"""
READER = """\
from mod import clamp

from . import test_mod
from .test_mod import SEEN


class RegionTest(test_mod.ClampTest):
    def test_table(self):
        for test in test_mod.CASES:
            self.assertEqual(clamp(test[0] + 1, 1, 10), test[1])

    def test_pairs(self):
        for value, expected in test_mod.PAIRS:
            assert clamp(value, 0, 7) == expected

    def test_seen(self):
        for test in test_mod.SEEN:
            assert clamp(test[0], 0, 10) == test[1]
"""


def test_a_table_other_files_loop_over_loses_its_expected_column_in_every_file():
    """A table that other test files read only as the iterable of such loops
    (``for test in test_mod.CASES``) loses its expected column too: every loop over it, in
    any file, is a gold check. One that another file imports by name (``SEEN``) keeps its
    cells, and the loops over it stay pytest's. A class whose base is another file's
    unittest class (``test_mod.ClampTest``) is collected, and its tests sealed."""
    sources = {
        "tests/__init__.py": "",
        "tests/test_mod.py": DEFINER,
        "tests/test_region.py": READER,
    }
    links = sl.file_links(sources, {"tests/test_mod.py", "tests/test_region.py"})
    assert links["tests/test_mod.py"].shared == {"CASES": {1}, "PAIRS": {1}}
    assert links["tests/test_region.py"].bases == {"test_mod.ClampTest"}
    sealed = {}
    for rel in ("tests/test_mod.py", "tests/test_region.py"):
        text, out = sl.seal_file(
            sources[rel],
            ast.parse(sources[rel]),
            rel,
            random.Random(0),
            set(),
            gold=True,
            links=links[rel],
        )
        assert len(text.splitlines()) == len(sources[rel].splitlines())
        sealed[rel] = text, {s.test: s.times for s in out.seals if s.gold}
    definer, gold_checks = sealed["tests/test_mod.py"]
    assert "(15, (None))" in definer and "(20, (None))" in definer
    assert "SEEN = ((30, 10), (1, 1))" in definer
    assert gold_checks == {"tests/test_mod.py::ClampTest::test_table": 3}
    reader, gold_checks = sealed["tests/test_region.py"]
    assert gold_checks == {
        "tests/test_region.py::RegionTest::test_table": 3,
        "tests/test_region.py::RegionTest::test_pairs": 2,
    }
    assert "assert clamp(test[0], 0, 10) == test[1]" in reader  # SEEN: pytest's
    # without the other file's word, each file keeps what it had
    alone = sl.file_links(sources, {"tests/test_mod.py"})
    assert alone["tests/test_mod.py"].shared == {} and alone["tests/test_region.py"].remote == {}


def test_an_inherited_test_of_another_files_class_runs_its_checks():
    sources = {
        "tests/__init__.py": "",
        "tests/test_mod.py": DEFINER,
        "tests/test_region.py": READER,
    }
    found = sl.inherited_tests(sources, ["tests/test_region.py::RegionTest::test_inside"])
    assert found == {
        "tests/test_region.py::RegionTest::test_inside": "tests/test_mod.py::ClampTest::test_inside"
    }


def test_loops_over_another_files_table_are_witnessed_and_the_forger_earns_nothing(tmp_path):
    f2p = (
        "tests/test_mod.py::ClampTest::test_table",
        "tests/test_region.py::RegionTest::test_table",
        "tests/test_region.py::RegionTest::test_pairs",
    )
    p2p = (
        "tests/test_mod.py::ClampTest::test_inside",
        "tests/test_region.py::RegionTest::test_inside",
    )
    task = _task_with(
        tmp_path / "region",
        DEFINER,
        f2p,
        p2p,
        {"__init__.py": "", "test_region.py": READER.replace("from .test_mod import SEEN\n", "")},
    )
    _forger_earns_nothing(task, f2p)
    assert all(grader.value_sealed(task).values())


def test_an_equality_helper_that_prints_its_arguments_first_is_still_one():
    """tabulate's ``assert_equal(expected, result)`` prints both, then asserts they are
    equal: its calls are sealed (a call of a helper that does anything else is not)."""
    common = ast.parse(
        textwrap.dedent("""\
        def assert_equal(expected, result):
            print("Expected:\\n%s\\n" % expected)
            print("Got:\\n%s\\n" % result)
            assert expected == result

        def assert_logged(expected, result):
            log.append(result)
            assert expected == result
        """)
    )
    assert sl.equality_helpers(common) == {"assert_equal"}
    src = textwrap.dedent("""\
        from common import assert_equal

        def test_plain():
            expected = "\\n".join(["-  -", "1  2", "-  -"])
            result = tabulate([[1, 2]])
            assert_equal(expected, result)
        """)
    text, out = sl.seal_file(
        src, ast.parse(src), "test/t.py", random.Random(0), set(), helpers={"assert_equal"}
    )
    assert [(s.op, s.expected) for s in out.seals] == [("==", "-  -\n1  2\n-  -")]
    assert "1  2" not in text and "assert_equal(" not in text.split("def test_plain")[1]


def test_a_membership_helper_is_sealed_like_assert_in():
    """tabulate's ``assert_in(result, expected_set)`` prints each candidate and asserts the
    result is one of them: a call is sealed as ``result in [...]`` (the candidates leave the
    file). A helper that changes an argument before its assert is not one."""
    common = ast.parse(
        textwrap.dedent("""\
        def assert_in(result, expected_set):
            nums = range(1, len(expected_set) + 1)
            for i, expected in zip(nums, expected_set):
                print("Expected %d:\\n%s\\n" % (i, expected))
            print("Got:\\n%s\\n" % result)
            assert result in expected_set

        def assert_in_stripped(result, expected_set):
            result = result.strip()
            assert result in expected_set

        def assert_in_logged(result, expected_set):
            log(result)
            assert result in expected_set
        """)
    )
    assert sl.membership_helpers(common) == {"assert_in"}
    src = textwrap.dedent("""\
        from common import assert_in

        def test_list_of_dicts():
            expected1 = "\\n".join(["-  -", "1  2", "-  -"])
            expected2 = "\\n".join(["-  -", "2  1", "-  -"])
            result = tabulate([{"a": 1, "b": 2}])
            assert_in(result, [expected1, expected2])
        """)
    text, out = sl.seal_file(
        src, ast.parse(src), "test/t.py", random.Random(0), set(), helpers={"in:assert_in"}
    )
    assert [(s.op, s.expected) for s in out.seals] == [
        ("in", ["-  -\n1  2\n-  -", "-  -\n2  1\n-  -"])
    ]
    assert "1  2" not in text and "2  1" not in text
    tree = ast.parse("from common import assert_in as ai\n")
    assert cn._imported_helpers(tree, {"common": {"in:assert_in"}}) == {"in:ai"}


def test_a_tables_ids_are_the_tasks_pytests_for_long_strings_and_enum_cells():
    # docstring-parser's test_compose: an enum column (a cell the grader cannot compute,
    # named ``RenderingStyle.CLEAN`` by pytest) and expected texts over 100 characters,
    # two rows alike but for the enum. pytest 8 names a long text by itself, pytest 9 by
    # ``<argname><index>``; the host's pytest is not the task's, so the listed ids decide.
    long = "Short description.\n\n" + "x" * 120
    src = textwrap.dedent(f"""\
        import pytest
        from mod import Style, render


        @pytest.mark.parametrize(
            "style, expected", [(Style.A, {long!r}), (Style.B, {long!r}), (Style.C, "short")]
        )
        def test_render(style, expected):
            assert render(style) == expected
        """)
    tree = ast.parse(src)
    fn, names = tree.body[-1], sl._pytest_names(tree)
    shown = long.replace("\n", "\\n")
    as_pytest_8 = [f"Style.B-{shown}", f"Style.A-{shown}", "Style.C-short"]
    assert sl._table(fn, names, {}, {}, as_pytest_8).ids == [
        f"Style.A-{shown}",
        f"Style.B-{shown}",
        "Style.C-short",
    ]
    as_pytest_9 = ["Style.A-expected0", "Style.B-expected1", "Style.C-short"]
    assert sl._table(fn, names, {}, {}, as_pytest_9).ids == as_pytest_9


#: Expected values built by ``textwrap.dedent``, ``collections`` and f-strings, bound to a
#: local first (xmltodict's and jinja2's tests write them so).
BUILT_LOCALS = """\
import unittest
from collections import OrderedDict
from textwrap import dedent

from mod import compile_it, unparse


class T(unittest.TestCase):
    def test_xml(self):
        obj = {"a": OrderedDict((("b", 1),))}
        xml = dedent('''\\
        <a>
          <b>1</b>
        </a>''')
        self.assertEqual(xml, unparse(obj, pretty=True))


def test_fstrings():
    found = compile_it(3)
    expect = [f"a{i}: l_{i!r}" for i in range(3)]
    assert found == expect
"""


def test_locals_built_by_dedent_collections_and_fstrings_leave_the_file():
    """Such a local is an expectation the grader computes (as ``expected = 3`` is): it
    leaves the file, and the check is a value seal. Kept in the file, it would sit beside
    the test's own ``==``, where code can report it (a weak check)."""
    text, out = sl.seal_file(
        BUILT_LOCALS, ast.parse(BUILT_LOCALS), "tests/test_x.py", random.Random(0), set()
    )
    assert "<b>1</b>" not in text and 'f"a{i}' not in text
    assert len(text.splitlines()) == len(BUILT_LOCALS.splitlines())
    got = {s.test.rpartition("::")[2]: s for s in out.seals}
    assert got["test_xml"].expected == "<a>\n  <b>1</b>\n</a>"
    assert got["test_fstrings"].expected == ["a0: l_0", "a1: l_1", "a2: l_2"]
    assert all(s.strong and not s.gold and not s.local_eq for s in got.values())


#: A loop over rows written in place, its expected column read only as an expected side.
INLINE_ROWS = """\
from mod import clamp


def test_rows():
    for value, expected in [(15, 10), (20, 10)]:
        assert clamp(value, 0, 10) == expected


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def test_rows_written_in_the_loop_lose_their_expected_column(tmp_path):
    """Rows written in place are a table of the loop's own: the expected cells leave the
    file, each row's check is judged against gold, and no check sits beside the test's
    ``==`` with ``expected`` (which would hand the value to the sandbox)."""
    text, out = sl.seal_file(
        INLINE_ROWS, ast.parse(INLINE_ROWS), "tests/test_mod.py", random.Random(0), set()
    )
    assert "[(15, (None)), (20, (None))]" in text and ".equal(" not in text
    (seal,) = [s for s in out.seals if s.test.endswith("::test_rows")]
    assert seal.gold and not seal.local_eq and seal.times == 2
    _witnessed_and_unforgeable(
        tmp_path / "rows",
        INLINE_ROWS,
        ("tests/test_mod.py::test_rows",),
        ("tests/test_mod.py::test_inside",),
    )
