"""Reports restated on other inputs: the new one states no hidden value, and still works.

The task below is the case the leak scan found in RealPy: the report's script asserts the
exact value the hidden test expects (``shout('hello world') == 'HELLO WORLD!'``), so that
sealed check is weak. Restating renames an input word, recomputes the expected value with
the gold code in a real sandbox, and checks the new script fails without the fix and passes
with it.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

from repogym.quality import restate
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios import bug_reports
from repogym.scenarios.task import load_task
from tests.scenarios._tasks import diff

BUGGY = 'def shout(text):\n    """Loud."""\n    return text + "!"\n'
FIXED = 'def shout(text):\n    """Loud."""\n    return text.upper() + "!"\n'
HIDDEN = """\
from mod import shout


def test_shout():
    assert shout("hello world") == "HELLO WORLD!"


def test_empty():
    assert shout("") == "!"
"""
SCRIPT = '''\
"""Reproduces the bug: fails with an AssertionError while it is there, exits 0 once it is fixed."""

from mod import shout

result = shout('hello world')
expected = 'HELLO WORLD!'
assert result == expected, f"shout('hello world') returned {result!r}, expected {expected!r}"
'''


def _write(
    root: Path,
    code: tuple[str, str],
    hidden: str,
    script: str,
    check: bug_reports.Check,
    tests: tuple[str, str],
) -> Path:
    """A task of one module ``mod.py`` (``code``: buggy, fixed) with hidden tests (``tests``:
    its fail_to_pass and pass_to_pass test), a gold patch and a report."""
    (buggy, fixed), (f2p, p2p) = code, tests
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "mod.py").write_text(buggy)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text(hidden)
    (root / "solution.patch").write_text(diff({"mod.py": buggy}, {"mod.py": fixed}))
    (root / "reproduction.py").write_text(script)
    statement = bug_reports.statement("mod", [check], script)
    (root / "task.toml").write_text(
        textwrap.dedent(f"""\
        id = "{root.name}"
        statement = {json.dumps(statement)}
        [verifier]
        tests_dest = "tests"
        command = "python -m pytest -q -p no:cacheprovider"
        timeout_s = 60
        fail_to_pass = ["tests/test_mod.py::{f2p}"]
        pass_to_pass = ["tests/test_mod.py::{p2p}"]
        """)
    )
    return root


def _restated_and_working(task) -> restate.Restated:
    """``task``'s report restated in a real sandbox: it states no hidden value, fails by
    its own assertion without the fix and exits 0 with it."""
    templates = TemplateCache()
    try:
        run = restate.sandbox_runner(task, templates)
        got = restate.restate(task, run)
        assert isinstance(got, restate.Restated), got
        assert not restate.leaked_in(task, got.statement)
        code, out = run(got.reproduction, False)
        assert code != 0 and bug_reports.fails_itself(out), out
        assert run(got.reproduction, True)[0] == 0
        return got
    finally:
        templates.close()


def _task(root: Path, script: str = SCRIPT) -> Path:
    check = bug_reports.Check(
        (), (), "shout('hello world')", "returns 'hello world!'", "return 'HELLO WORLD!'", "shout"
    )
    return _write(root, (BUGGY, FIXED), HIDDEN, script, check, ("test_shout", "test_empty"))


def test_the_script_keeps_its_expected_values_and_renames_only_inputs():
    found = list(restate.variants(SCRIPT, prefer={"hello"}))
    change, first = found[0]
    assert change == "'hello' renamed 'alpha' in the inputs"
    ast.parse(first)
    # the input and the message quoting it change; the expected value is left for the gold
    # code to say (rebuild)
    assert "shout('alpha world')" in first and "hello" not in first
    assert "expected = 'HELLO WORLD!'" in first
    assert all("Reproduces the bug" in v for _, v in found)  # the docstring is left alone
    assert [c for c, _ in found][1] == "'world' renamed 'alpha' in the inputs"


def test_rebuild_takes_gold_values_and_refuses_what_is_no_literal():
    probe = restate.instrument(SCRIPT)
    assert probe is not None and "_rg_record(0, (result))" in probe
    rebuilt = restate.rebuild(SCRIPT, {0: [("'FOO WORLD!'", True)]})
    assert rebuilt is not None and "expected = 'FOO WORLD!'" in rebuilt
    assert restate.rebuild(SCRIPT, {0: [("<object at 0x1>", False)]}) is None
    assert restate.rebuild(SCRIPT, {}) is None  # the assert was never reached
    two = SCRIPT + "result = shout('x')\nassert result == expected\n"
    assert restate.rebuild(two, {0: [("'A'", True)], 1: [("'B'", True)]}) is None


def test_a_report_that_states_the_hidden_value_is_restated_and_still_works(tmp_path):
    task = load_task(_task(tmp_path / "shout"))
    assert restate.leaked_in(task, task.statement)  # the scan sees the hidden value there
    got = _restated_and_working(task)
    assert "HELLO WORLD!" not in got.statement and "hello world" not in got.reproduction
    assert bug_reports.reproduction_of(got.statement).strip() == got.reproduction.strip()
    assert got.statement.splitlines()[2].startswith("This code fails: ")


def test_a_report_without_a_hidden_value_is_left_alone(tmp_path):
    root = _task(tmp_path / "quiet")
    script = SCRIPT.replace("hello world", "abc").replace("HELLO WORLD!", "ABC!")
    (root / "reproduction.py").write_text(script)
    toml = (
        (root / "task.toml")
        .read_text()
        .replace("hello world", "abc")
        .replace("HELLO WORLD!", "ABC!")
    )
    (root / "task.toml").write_text(toml)
    task = load_task(root)
    assert restate.restate(task, lambda script, fixed: (0, "")) == restate.NO_LEAK


def test_a_variant_that_asserts_another_hidden_value_is_refused_however_it_is_spelled(
    tmp_path,
):
    # anytree's case: the hidden tests spell their values with escapes, which the text
    # scan looks for as written (and by repr only when that is long). The first variant,
    # 'hello' -> 'alpha', gives 'ALPHA!', which test_other expects, spelled '\\u0041LPHA!':
    # no text scan sees it, the value check does.
    script = SCRIPT.replace("hello world", "hello").replace("'HELLO WORLD!'", "'\\u0048ELLO!'")
    root = _task(tmp_path / "escaped")
    (root / "reproduction.py").write_text(script)
    (root / "tests" / "test_mod.py").write_text(
        "from mod import shout\n\n\ndef test_shout():\n"
        '    assert shout("hello") == "\\u0048ELLO!"\n\n\n'
        "def test_other():\n"
        '    assert shout("alpha") == "\\u0041LPHA!"\n\n\n'
        "def test_empty():\n"
        '    assert shout("") == "!"\n'
    )
    statement = bug_reports.statement(
        "mod",
        [
            bug_reports.Check(
                (), (), "shout('hello')", "returns 'hello!'", "return 'HELLO!'", "shout"
            )
        ],
        script,
    )
    toml = (root / "task.toml").read_text()
    head, _, rest = toml.partition("statement = ")
    rest = rest.split("\n", 1)[1].replace(
        'fail_to_pass = ["tests/test_mod.py::test_shout"]',
        'fail_to_pass = ["tests/test_mod.py::test_shout", "tests/test_mod.py::test_other"]',
    )
    (root / "task.toml").write_text(f"{head}statement = {json.dumps(statement)}\n{rest}")
    task = load_task(root)
    assert restate.leaked_in(task, task.statement)
    assert restate._print("ALPHA!") in restate.hidden_values(task)
    assert not restate.leaked_in(task, statement.replace("\\u0048ELLO", "ALPHA"))  # text scan
    templates = TemplateCache()
    try:
        got = restate.restate(task, restate.sandbox_runner(task, templates))
    finally:
        templates.close()
    # that variant is refused; the next placeholder is taken
    assert isinstance(got, restate.Restated), got
    assert got.change == "'hello' renamed 'gamma' in the inputs"
    assert "ALPHA" not in got.reproduction and "expected = 'GAMMA!'" in got.reproduction


def test_messages_quote_the_new_inputs_and_names_are_not_words():
    script = (
        "expected = {1: [2]}\n"
        "result = groupby([0], [(1, 2)])\n"
        'assert result == expected, f"groupby([0], [(1, 2)]) returned {result!r}"\n'
        "sql = format(\"select 'abc' from my_table, json_build_object('a', a)\")\n"
        "assert sql == 'x'\n"
    )
    found = dict((c, v) for c, v in restate.variants(script))
    moved = found["0 made 1 at line 2"]
    assert "groupby([1], [(1, 2)])" in moved and 'f"groupby([1], [(1, 2)]) returned' in moved
    renamed = [c for c in found if "renamed" in c]
    # whole words only: my_table and json_build_object are names, not words to change
    assert not any(w in c for c in renamed for w in ("'my'", "'table'", "'build'", "'json'"))
    assert "'abc' renamed 'foo' in the inputs" in renamed


def test_a_report_of_several_checks_gets_one_bullet_per_new_failure():
    statement = bug_reports.statement(
        "mod",
        [
            bug_reports.Check((), (), "shout('a')", "returns 'a!'", "return 'A!'", "shout"),
            bug_reports.Check((), (), "shout('b')", "returns 'b!'", "return 'B!'", "shout"),
        ],
        "assert False\n",
    )
    output = (
        'Traceback (most recent call last):\n  File "reproduction.py", line 9, in <module>\n'
        '    assert not problems, "\\n".join(problems)\n'
        "AssertionError: AssertionError: shout('k') returned 'k!', expected 'K!'\n"
        "AssertionError: shout('m') returned 'm!', expected 'M!'\n"
    )
    assert restate.failures("AssertionError: got <Node at 0x7FB1A4AA81D0>\n") == ["got <Node>"]
    found = restate.failures(output)
    assert found == [
        "shout('k') returned 'k!', expected 'K!'",
        "shout('m') returned 'm!', expected 'M!'",
    ]
    new = restate.new_statement(statement, "assert 1 == 2\n", found)
    assert new is not None and "shout('a')" not in new and "shout('b')" not in new
    assert "- This code fails: shout('k') returned 'k!', expected 'K!'\n" in new
    assert bug_reports.reproduction_of(new).strip() == "assert 1 == 2"
    assert restate.new_statement(statement, "x\n", found[:1]) is None  # a bullet unaccounted for


def test_numbers_in_input_strings_move_and_indexes_do_not():
    script = (
        "p = parse('select 1 where 1 = 2 union select 2')[0]\n"
        "assert p.tokens[5].value == 'union select 2'\n"
    )
    changes = [c for c, _ in restate.variants(script, avoid={"select", "where", "union"})]
    assert changes == ["1 made 2 in the input strings", "2 made 3 in the input strings"]


def test_synthesis_restates_a_validated_report_in_its_folder_and_keeps_gold_values(tmp_path):
    """`synth --pypi`'s stage between validation and the screen (the seal floor): the
    report of a valid task that states a hidden value is rewritten in its folder; gold's
    values recorded by validation hold for the new folder (no gold grading again), and the
    task still validates."""
    from repogym.grading import gold as gd
    from repogym.grading.grader import code_digest
    from repogym.quality.restate import restate_valid
    from repogym.quality.validate import validate_tasks

    root = _task(tmp_path / "shout")
    toml = (root / "task.toml").read_text()
    head, _, rest = toml.partition("statement = ")
    (root / "STATEMENT.md").write_text(json.loads(rest.split("\n", 1)[0]))
    (root / "task.toml").write_text(
        head + 'statement_file = "STATEMENT.md"\n' + rest.split("\n", 1)[1]
    )
    quiet = _task(tmp_path / "quiet")  # its statement is in task.toml, and states nothing
    script = SCRIPT.replace("hello world", "abc").replace("HELLO WORLD!", "ABC!")
    (quiet / "reproduction.py").write_text(script)
    toml = (quiet / "task.toml").read_text().replace("hello world", "abc")
    (quiet / "task.toml").write_text(toml.replace("HELLO WORLD!", "ABC!"))
    inline = _task(tmp_path / "inline")  # it states the value in task.toml's statement
    before = load_task(root)
    assert restate.leaked_in(before, before.statement)
    digest = before.digest()  # of the folder's files: read before they change
    # two gold runs: a validation that grades gold more than once records its values
    folders = [root, quiet, inline]
    reports = validate_tasks([load_task(f) for f in folders], reruns=2, workers=2)
    assert all(r.ok for r in reports), [r.failures for r in reports]
    gold = gd.load(digest, code_digest())
    assert gold is not None
    said: list[str] = []
    found = restate_valid(folders, reports, sandbox="bwrap", workers=2, say=said.append)
    assert found["quiet"] == restate.NO_LEAK and len(said) == 2, said
    assert said[0].startswith("shout: report restated ('hello' renamed")
    # a statement written inside task.toml is not rewritten: the log says why
    assert said[1].startswith("inline: its report states a hidden value and was not restated")
    assert "statement_file" in said[1] and "HELLO WORLD!" in load_task(inline).statement
    after = load_task(root)
    assert after.statement == found["shout"].statement == (root / "STATEMENT.md").read_text()
    assert (root / "reproduction.py").read_text() == found["shout"].reproduction
    assert not restate.leaked_in(after, after.statement)
    assert after.digest() != digest
    assert gd.load(after.digest(), code_digest()) == gold
    [report] = validate_tasks([after], reruns=1, workers=1)
    assert report.ok, report.failures


def test_a_decimal_number_in_an_input_string_is_moved_and_versions_and_names_are_not():
    # num2words' case: `num2words('38.4', to='currency')`, whose words are all the
    # package's own ('currency'), had no variant at all
    script = (
        "result = f('38.4', '1.2.3', 'key1', 'v2.0')\n"
        "expected = 'thirty-eight'\n"
        "assert result == expected\n"
    )
    found = dict(restate.variants(script))
    assert list(found) == ["38.4 made 39.4 in the input strings"]
    assert "f('39.4', '1.2.3', 'key1', 'v2.0')" in found["38.4 made 39.4 in the input strings"]


def test_a_single_letter_the_package_uses_is_renamed_after_every_other_word():
    # cssselect's case: `XPathExpr(element='f')`; 'f' is in its constants as a format code
    script = (
        "x = XPathExpr(element='f', name='select')\nexpected = '*[self::f]'\nassert x == expected\n"
    )
    script += "assert x == expected, f\"XPathExpr(element='f') gave {x!r}\"\n"
    found = list(restate.variants(script, avoid={"f", "select"}))
    assert found[0][0] == "'f' renamed 'a' in the inputs"
    assert not any("'select'" in c for c, _ in found)
    # the message quotes the new input, and stays an f-string (its prefix is no word)
    assert (
        found[0][1].splitlines()[-1]
        == "assert x == expected, f\"XPathExpr(element='a') gave {x!r}\""
    )
    found = [c for c, _ in found]
    found = [c for c, _ in restate.variants(script.replace("'select'", "'spot'"), avoid={"f"})]
    assert found[0].startswith("'spot' renamed ") and found[1].startswith("'f' renamed ")


def test_numbers_move_by_one_then_by_more_and_a_decimal_float_by_its_whole_part():
    # num2words' cases: `num2words(100.67, lang='kz')` had no variant; `num2words(1000,
    # lang='be')` moved to 1001, which the hidden table expects too, and had no other
    script = (
        "result = num2words(100.67, 1000)\n"
        "expected = 'x'\n"
        'assert result == expected, f"num2words(100.67, 1000) gave {result!r}"\n'
    )
    found = dict(restate.variants(script))
    assert list(found) == [
        "100.67 made 101.67 at line 1",
        "1000 made 1001 at line 1",
        "100.67 made 102.67 at line 1",
        "1000 made 1002 at line 1",
        "100.67 made 107.67 at line 1",
        "1000 made 1007 at line 1",
    ]
    assert found["1000 made 1002 at line 1"].splitlines()[0] == "result = num2words(100.67, 1002)"
    assert 'f"num2words(101.67, 1000) gave' in found["100.67 made 101.67 at line 1"]


#: A reproduction written from a unittest test, as the miner writes num2words' (the
#: expected value is ``self.assertEqual``'s second argument).
UNITTEST_SCRIPT = """\
from unittest import TestCase
from mod import shout


class Case(TestCase):

    def reproduce(self):
        self.assertEqual(shout('hello world'), 'HELLO WORLD!')


Case("reproduce").debug()
"""


def test_a_unittest_reproduction_is_restated_like_an_assert(tmp_path):
    probe = restate.instrument(UNITTEST_SCRIPT)
    assert probe is not None and "_rg_record(0, (shout('hello world')))" in probe
    shown = "Traceback:\n  File x\n    f()\nAssertionError: 'a!' != 'A!'\n- a!\n+ A!\n?   ^\n\n"
    assert restate.failures(shown) == ["'a!' != 'A!' - a! + A! ? ^"]  # unittest's diff is one
    rebuilt = restate.rebuild(UNITTEST_SCRIPT, {0: [("'FOO!'", True)]})
    assert rebuilt is not None and "self.assertEqual(shout('hello world'), 'FOO!')" in rebuilt
    task = load_task(_task(tmp_path / "unittest", UNITTEST_SCRIPT))
    assert restate.leaked_in(task, task.statement)
    got = _restated_and_working(task)
    assert "HELLO WORLD!" not in got.statement and "self.assertEqual(" in got.reproduction


DATE_BUGGY = (
    "import datetime\n\n\ndef month_end(year, month):\n"
    '    """The last day of a month."""\n'
    "    return datetime.date(year, month, 28)\n"
)
DATE_FIXED = (
    "import calendar\nimport datetime\n\n\ndef month_end(year, month):\n"
    '    """The last day of a month."""\n'
    "    return datetime.date(year, month, calendar.monthrange(year, month)[1])\n"
)
DATE_SCRIPT = '''\
"""Reproduces the bug: fails with an AssertionError while it is there, exits 0 once it is fixed."""
from datetime import date

from mod import month_end

for _ in range(2):
    assert month_end(2024, 1) == date(2024, 1, 31)
'''


def test_an_expected_date_is_restated_as_a_date_in_the_scripts_own_spelling(tmp_path):
    # croniter's case: the script's expected value is a call (`datetime(2024, 2, 29)`),
    # which is no literal, so the report that stated the hidden test's date was left as
    # it was. A call of a standard value type with literal arguments reads back from its
    # repr, and gold's value is written with the script's callee.
    assert restate.value_of("datetime.date(2024, 1, 31)")[1] == "2024, 1, 31"
    assert restate.value_of("Decimal('1.5')")[1] == "'1.5'"
    assert restate.value_of("datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)") is None
    assert restate.value_of("mod.Date(2024, 1, 31)") is None  # a package's type: not read back
    tree = ast.parse(DATE_SCRIPT)
    assert restate.constructed(tree.body[3].body[0].test.comparators[0])
    rebuilt = restate.rebuild(DATE_SCRIPT, {0: [("datetime.date(2024, 2, 29)", True)] * 2})
    assert rebuilt is not None and "== date(2024, 2, 29)" in rebuilt
    # a value of another type than the script wrote, or values that differ, are refused
    assert (
        restate.rebuild(DATE_SCRIPT, {0: [("datetime.datetime(2024, 2, 29, 0, 0)", True)]}) is None
    )
    two = [("datetime.date(2024, 2, 29)", True), ("datetime.date(2024, 3, 31)", True)]
    assert restate.rebuild(DATE_SCRIPT, {0: two}) is None

    hidden = (
        "import datetime\nfrom mod import month_end\n\n\ndef test_january():\n"
        "    assert month_end(2024, 1) == datetime.date(2024, 1, 31)\n\n\n"
        "def test_february():\n    assert month_end(2023, 2) == datetime.date(2023, 2, 28)\n"
    )
    check = bug_reports.Check(
        (),
        (),
        "month_end(2024, 1)",
        "returns datetime.date(2024, 1, 28)",
        "return datetime.date(2024, 1, 31)",
        "month_end",
    )
    tests = ("test_january", "test_february")
    root = _write(tmp_path / "dates", (DATE_BUGGY, DATE_FIXED), hidden, DATE_SCRIPT, check, tests)
    task = load_task(root)
    assert restate.leaked_in(task, task.statement)  # the report states the hidden date
    got = _restated_and_working(task)
    assert "date(2024, 1, 31)" not in got.reproduction, got.reproduction
    assert re.search(r"== date\(\d+, \d+, \d+\)", got.reproduction), got.reproduction


def test_failures_a_history_report_lists_are_cut_to_what_the_code_gave(tmp_path):
    """A release-history report quotes the failing tests' messages, which state what each
    test expects (``assert 'hello there world!' == 'HELLO THERE WORLD!'``). When no variant
    of its script restates it (this script asserts no value to recompute), each listed
    comparison is cut to what the code gave, and the script is kept as it is."""
    hidden = HIDDEN.replace(
        '"hello world") == "HELLO WORLD!"', '"hello there world") == "HELLO THERE WORLD!"'
    )
    script = (
        "from mod import shout\n\nresult = shout('abc')\nassert result[:-1].isupper(), result\n"
    )
    statement = (
        "`mod` returns the wrong text\nCode that uses `mod` fails with\n\n"
        "- AssertionError: assert 'hello there world!' == 'HELLO THERE WORLD!' "
        "- HELLO THERE WORLD! + hello there world!\n- AssertionError: 'x!' != 'X!'\n\n"
        "Fix the library code; the hidden tests check this behaviour.\n\n"
        f"Reproduction:\n\n```python\n{script}```\n"
    )
    check = bug_reports.Check((), (), "shout('abc')", "returns 'abc!'", "return 'ABC!'", "shout")
    root = _write(
        tmp_path / "cut", (BUGGY, FIXED), hidden, script, check, ("test_shout", "test_empty")
    )
    (root / "STATEMENT.md").write_text(statement)
    toml = (root / "task.toml").read_text()
    toml = re.sub(r"^statement = .*$", 'statement_file = "STATEMENT.md"', toml, flags=re.M)
    (root / "task.toml").write_text(toml)
    task = load_task(root)
    assert restate.leaked_in(task, task.statement)
    templates = TemplateCache()
    try:
        got = restate.restate(task, restate.sandbox_runner(task, templates))
    finally:
        templates.close()
    assert isinstance(got, restate.Restated) and got.change == restate.CUT, got
    assert got.reproduction == script and "HELLO THERE" not in got.statement
    assert not restate.leaked_in(task, got.statement)
    assert (
        "- AssertionError: the result is 'hello there world!', not what the tests expect\n"
        "- AssertionError: the result is 'x!', not what the tests expect\n"
    ) in got.statement
    # a report whose script states the value is not cut: it would still state it
    leaky = statement.replace("shout('abc')", "shout('hello there world')").replace(
        "result[:-1].isupper(), result", "result == 'HELLO THERE WORLD!'"
    )
    assert restate.cut_failures(task, leaky) is None


#: Raises a TypeError for one text: a crash, not a wrong value, that no other input shows.
CRASHES = (
    'def shout(text):\n    """Loud."""\n    if text == "hello world":\n'
    '        return text.upper() + b"!"\n    return text.upper() + "!"\n'
)
#: Returns a wrong value for that same text: no crash, and no other input shows it either.
WRONG_ONCE = CRASHES.replace('text.upper() + b"!"', 'text + "!"')
#: As a release-history report writes it: the expected value first, so no variant of the
#: inputs can recompute it, and a crash turned into the script's own AssertionError.
CRASH_SCRIPT = """\
from mod import shout

try:
    expected = 'HELLO WORLD!'
    assert expected == shout('hello world')
except AssertionError:
    raise
except Exception as error:
    raise AssertionError(f'{type(error).__name__}: {error}') from error
"""


def test_a_script_that_crashes_is_cut_to_the_calls_that_crash(tmp_path):
    """A script whose bug is a crash needs no expected value to show it: when no variant
    restates it, each comparison is cut to its computed side and the local that held the
    expected value goes; the new script fails with the same error without the fix and
    passes with it, and the report states no hidden value."""
    check = bug_reports.Check(
        (), (), "shout('hello world')", "raises TypeError", "return it loud", "shout"
    )
    root = _write(
        tmp_path / "crash",
        (CRASHES, FIXED),
        HIDDEN,
        CRASH_SCRIPT,
        check,
        ("test_shout", "test_empty"),
    )
    task = load_task(root)
    assert restate.leaked_in(task, task.statement)
    templates = TemplateCache()
    try:
        run = restate.sandbox_runner(task, templates)
        got = restate.restate(task, run)
        assert isinstance(got, restate.Restated) and got.change == restate.CRASH, got
        assert got.reproduction == CRASH_SCRIPT.replace(
            "    expected = 'HELLO WORLD!'\n    assert expected == shout('hello world')\n",
            "    shout('hello world')\n",
        )
        assert "HELLO WORLD" not in got.statement and not restate.leaked_in(task, got.statement)
        code, out = run(got.reproduction, False)
        assert code != 0 and "TypeError: can only concatenate str" in out
        assert run(got.reproduction, True)[0] == 0
        # a wrong value, not a crash: cut to its call, the script would show no bug
        wrong = _write(
            tmp_path / "wrong",
            (WRONG_ONCE, FIXED),
            HIDDEN,
            CRASH_SCRIPT,
            check,
            ("test_shout", "test_empty"),
        )
        why = restate.restate(load_task(wrong), restate.sandbox_runner(load_task(wrong), templates))
        assert not isinstance(why, restate.Restated), why
    finally:
        templates.close()


def test_crash_script_cuts_unittest_comparisons_and_drops_the_expected_local():
    script = textwrap.dedent("""\
        import unittest
        from textwrap import dedent

        from mod import unparse


        class Case(unittest.TestCase):
            def reproduce(self):
                obj = {"a": 1}
                xml = dedent('''
                    <a>1</a>''')
                self.assertEqual(xml, unparse(obj, pretty=True))
                self.assertEqual(unparse(obj), "<a>1</a>")
        """)
    cut = restate.crash_script(script)
    assert "<a>1</a>" not in cut and "xml" not in cut
    assert "        unparse(obj, pretty=True)\n        unparse(obj)\n" in cut
    assert 'obj = {"a": 1}' in cut  # read by the calls: kept
    ast.parse(cut)
    assert restate.crash_script("from mod import f\n\nf(1)\n") is None


def test_an_expected_value_written_first_is_recomputed_like_one_written_second():
    """unittest takes ``assertEqual(expected, got)`` in either order: the side that reads as
    an expected value (a name, a literal) is the one recomputed with the gold code."""
    for line in (
        "assert 'HELLO WORLD!' == shout('hello world')",
        "self.assertEqual(expected, shout('hello world'))",
    ):
        probe = restate.instrument(f"from mod import shout\n\n{line}\n")
        assert probe is not None and "_rg_record(0, (shout('hello world')))" in probe, probe
