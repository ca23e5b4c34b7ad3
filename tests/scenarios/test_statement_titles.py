"""A statement's first line says what the bug does, in words that vary with the bug.

RealPy's statements once opened with one of three fixed sentences (189 of 312 with
```f` misbehaves in `pkg`.``): a first line that says nothing an agent can use and that
a classifier can key on. The title is now written from the check (what was returned or
raised, what should have been), from failure messages, or from the maintainers' changelog
entry; it never states what a hidden test expects.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from repogym.scenarios import bug_reports, history, retitle
from repogym.scenarios.bug_reports import Check, title

#: Most statements one first-line template may open.
MOST = 0.10


def _check(actual: str, expected: str, function: str = "tally", call: str = "tally(x)") -> Check:
    return Check(("assert False",), (), call, actual, expected, function)


@pytest.fixture(scope="module")
def realpy() -> list[str]:
    return retitle.statements(retitle.manifests())


def test_no_first_line_template_opens_more_than_a_tenth_of_realpy(realpy):
    assert len(realpy) >= 300
    counts = retitle.templates(realpy)
    text, most = counts.most_common(1)[0]
    assert most <= MOST * len(realpy), (most, text)
    assert not any("misbehaves" in t or "A bug report against" in t for t in counts)


def test_no_two_realpy_statements_are_the_same(realpy):
    assert len(set(realpy)) == len(realpy)


def test_realpy_statements_are_retitled_and_within_the_length_cap(realpy):
    """Retitling a committed statement again changes nothing, and none is too long."""
    for s in realpy:
        assert retitle.retitle(s) == s
        assert len(s) <= bug_reports.MAX_CHARS


def test_the_template_hides_code_and_numbers():
    assert retitle.template("`f` is off by 1\n`pkg` 1.2.3:\n\nbody") == (
        "<code> is off by <n>\n<code> <n>:"
    )


@pytest.mark.parametrize(
    ("check", "words", "literal"),
    [
        (
            _check("raises TypeError: bad operand", "raise LexerError", "Parser.parse"),
            "`Parser.parse` raises the wrong exception (TypeError)",
            "LexerError",
        ),
        (
            _check(
                "raises TypeError: unsupported operand type(s) for +: 'int' and 'str'",
                "return 'total: 12'",
            ),
            "`tally` mixes up types (TypeError)",
            "total: 12",
        ),
        (
            _check("raises TypeError: 'NoneType' object is not subscriptable", "return 41"),
            "`tally` crashes on a missing value (TypeError)",
            "41",
        ),
        (
            _check("raises KeyError: 'century'", "return 1985"),
            "`tally` looks up a key that is not there (KeyError)",
            "1985",
        ),
        (_check("returns None", "return 'Kine'"), "`tally` returns nothing instead", "Kine"),
        (_check("returns 4", "return 3"), "`tally` is off by one", "3"),
        (_check("returns 40", "return 30"), "`tally` returns too large a number", "30"),
        (
            _check("returns ['a', 'c']", "return ['a', 'b', 'c']"),
            "`tally` leaves items out of the list",
            "'b'",
        ),
        (
            _check("returns ['c', 'b', 'a']", "return ['a', 'b', 'c']"),
            "`tally` returns the items in the wrong order",
            "'a'",
        ),
        (_check("returns False", "return True"), "gives the opposite yes/no answer", "True"),
        (
            _check("returns 'Hello World'", "return 'hello world'"),
            "`tally` gets the letter case wrong",
            "hello world",
        ),
        (_check("returns 3", "raise ValueError"), "returns a result instead of raising", "Value"),
        (
            _check("returns <re.Match object>", "return <Result ('foo',) {}>", "search"),
            "`search` returns the wrong type of object (`re.Match`)",
            "foo",
        ),
        (
            _check("returns 'x'", "return 'X'", "Node.__repr__", "repr(node)"),
            "`repr()` of a `Node` gets the letter case wrong",
            "'X'",
        ),
    ],
)
def test_a_title_says_what_the_bug_does_and_not_what_is_expected(check, words, literal):
    text = title([check], "pkg")
    assert words in text, text
    assert literal not in text, text
    assert "\n" not in text and "misbehaves" not in text
    assert title([check], "pkg") == text  # the same bug, the same words


def test_kinds_give_different_titles_and_several_problems_are_counted():
    checks = [
        _check("returns 4", "return 3", "count"),
        _check("returns ['a']", "return ['a', 'b']", "split"),
    ]
    text = title(checks, "pkg")
    assert text == "Two bugs in `pkg` (`count`, `split`): an off-by-one number and missing items"
    assert len({title([c], "pkg") for c in checks}) == 2


def test_a_title_from_a_test_body_reads_its_failure():
    check = Check(("assert f() == 2",), (), "assert f() == 2", "", "", "f", source="test")
    assert title([check], "pkg", ["f() gave [], expected [1, 2]"]) == "`f` returns an empty list"
    assert title([check], "pkg", ["AssertionError"]) == "`f` gives a wrong result"


def test_history_titles_come_from_the_failure_and_the_changelog():
    assert bug_reports.failures_title("tomlkit", ["Failed: DID NOT RAISE ValueError"]) == (
        "`tomlkit` returns a result instead of raising an error"
    )
    assert bug_reports.failures_title(
        "sqlparse", ["AssertionError: assert 4 == 1 + where 4 = len(['a', 'b', 'c', 'd'])"]
    ) == ("`sqlparse` returns too many items")
    entry = "Fix parsing of nested ``ORDER`` clauses (issue745, pr746 by someone). More text."
    text = history.changelog_description("sqlparse", "0.5.0", entry)
    assert text.startswith(
        "Parsing of nested `ORDER` clauses\n"
        "The fix, as the changelog of `sqlparse` 0.5.0 describes it:\n\n> Fix parsing"
    )
    # reST references and Sphinx roles read as the rendered changelog shows them
    for entry, want in (
        (
            ":pr:`426`: Fix :meth:`~semver.version.Version.replace` method to use the "
            "derived class. More.",
            "`replace` method to use the derived class",
        ),
        (
            "Fix `Pluck` handling of empty data_key (:pr:`3082` by :user:`someone`). Other",
            "`Pluck` handling of empty data_key",
        ),
        (
            ":gh:`521`: The :attr:`semver.MAX_LENGTH` limit was set too low.",
            "The `semver.MAX_LENGTH` limit was set too low",
        ),
    ):
        assert history.changelog_title(entry) == want


def test_generators_and_the_rewrite_write_the_same_first_line():
    """A statement written with an old fixed first line, retitled, is the statement the
    generators write now: a rebuilt suite matches the committed one."""
    check = _check("returns 'ab c'", "return 'abc'", "join_words", "join_words(['ab', 'c'])")
    new = bug_reports.statement("pkg", [check], "print(1)\n")
    old = "`join_words` misbehaves in `pkg`." + new[new.index("\n\n") :]
    assert retitle.retitle(old) == new
    several = [check, Check(("x",), (), "f()", "", "", "f", source="test")]
    new = bug_reports.statement("pkg", several, "print(1)\n", ["", "f() gave 2, expected 3"])
    old = "2 problems in `pkg` (`f`, `join_words`)." + new[new.index("\n\n") :]
    assert retitle.retitle(old) == new

    entry = "Fix a crash on empty input. (#12)"
    new = history.changelog_description("pkg", "1.2", entry)
    old = (
        "A bug report against `pkg`, written as its maintainers described the fix in the "
        "changelog of release 1.2:" + new[new.index("\n\n") :]
    )
    assert retitle.retitle(old) == new

    from repogym.quality.synth_history import failure_description

    task = SimpleNamespace(name="pkg", gold="", fail_to_pass=["tests/t.py::test_a"])
    new = failure_description(task, {"tests/t.py::test_a": "KeyError: 'x'"})
    assert new is not None and new.startswith("`pkg` looks up a key that is not there")
    old = "A bug report against `pkg`: code that uses it fails with" + new[new.index("\n\n") :]
    assert retitle.retitle(old) == new


def test_the_rewrite_changes_the_first_line_only(tmp_path):
    body = (
        "`camelize('a_b')` raises `TypeError: first argument must be string or compiled "
        "pattern`; it should return `'AB'`.\n\nReproduction:\n\n```python\nprint(1)\n```\n\n"
        "Fix the library code.\n"
    )
    old = "`camelize` misbehaves in `inflection`.\n\n" + body
    new = retitle.retitle(old)
    first, rest = new.split("\n\n", 1)
    assert rest == body and first == "`camelize` fails with a TypeError"
    assert retitle.retitle("A title a person wrote.\n\n" + body) == (
        "A title a person wrote.\n\n" + body
    )

    manifest = tmp_path / "pkg.json"
    data = {"name": "pkg", "tasks": [{"id": "pkg-1", "statement": old, "gold": "é"}]}
    manifest.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    assert retitle.retitle_manifest(manifest) == 1
    data["tasks"][0]["statement"] = new
    assert manifest.read_text() == json.dumps(data, indent=1, ensure_ascii=False) + "\n"
