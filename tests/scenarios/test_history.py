"""Release-history tasks: the parts that run nothing (repogym/scenarios/history.py). The
miner on a two-release package built here is tested in tests/quality/test_synth_history.py."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import textwrap
import types

import pytest

from repogym.scenarios import history
from tests.scenarios._history import CHANGES, NEW, OLD, TESTS


# -- pure parts ----------------------------------------------------------------------------
def test_changed_functions_ignore_docstrings_and_revert_puts_the_old_code_back(tmp_path):
    for version, text in (("old", OLD), ("new", NEW)):
        (tmp_path / version / "rgdemo").mkdir(parents=True)
        (tmp_path / version / "rgdemo" / "__init__.py").write_text(text)
    changed = history.changed_functions(tmp_path / "old", tmp_path / "new", ["rgdemo/__init__.py"])
    assert [c.qualname for c in changed] == ["clamp", "unused"]  # describe: docstring only
    buggy = history.revert(NEW, changed[0])
    assert "if value > high" not in buggy
    assert "Describe ``value``" in buggy and "value + 2" in buggy  # the rest stays N+1's
    assert buggy.replace("    if value > high:\n        return high\n", "") != NEW


def test_changelog_sections_and_the_entry_that_names_the_change(tmp_path):
    (tmp_path / "CHANGES.rst").write_text(CHANGES)
    entries = history.changelog_section(tmp_path, "1.1")
    assert entries == ["Fix ``clamp`` ignoring its upper bound (#12).", "Speed up the docs build."]
    assert history.changelog_section(tmp_path, "1.0") == ["First release."]
    assert history.changelog_section(tmp_path, "2.0") is None
    assert history.pick_entry(entries, ["test_clamp_caps_at_high"], ["clamp"]) == entries[0]
    assert history.pick_entry(entries, ["test_clamp_caps_at_high"]) is None  # one word only
    assert history.pick_entry(entries, ["unused"], ["unused"]) is None  # nothing in common
    md = tmp_path / "md"
    md.mkdir()
    (md / "CHANGELOG.md").write_text(
        "# Log\n\n## [0.2.1] - 2025\n\n### Fixed\n\n- Fix the "
        "parser on [#3](https://x.org/3) empty input.\n\n"
        "## [0.2.0]\n\n- Older.\n"
    )
    assert history.changelog_section(md, "0.2.1") == ["Fix the parser on #3 empty input."]
    assert history.changelog_section(md, "0.2") is None  # 0.2 is not 0.2.0 or 0.2.1


def test_statement_leaks_name_the_fix_lines_and_test_ids():
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return value\n+    return min(value, high)\n"
    ids = ["tests/test_rgdemo.py::test_clamp_caps_at_high"]
    assert history.statement_leaks("clamp ignores high", gold, ids) == []
    assert history.statement_leaks("use return min(value, high)", gold, ids)
    assert history.statement_leaks("see test_clamp_caps_at_high", gold, ids)
    # the line the fix replaces, of 8 characters or more, points at the fix too
    assert history.statement_leaks("it does `return value` there", gold, ids)
    short = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    x = 1\n+    x = 2\n"
    assert history.statement_leaks("x = 2 is printed", short, ids) == []


def test_test_script_stands_alone_and_names_no_test():
    script = history.test_script(
        TESTS,
        "tests/test_rgdemo.py::test_clamp_caps_at_high",
        local_modules={"tests"},
        pythonpath=["src"],
    )
    assert "test_clamp" not in script and "pytest" not in script  # unused imports dropped
    assert script.startswith("import sys\nsys.path.insert(0, 'src')\nfrom rgdemo import clamp")
    assert "f'expected {_expected!r}, got {_actual!r}'" in script
    case = history.test_script(TESTS, "tests/test_rgdemo.py::test_inside[7]")
    assert "value = 7" in case and "parametrize" not in case
    assert history.test_script(TESTS, "tests/test_rgdemo.py::test_inside[8]") is None
    fixture = (
        "import pytest\n\n@pytest.fixture\ndef doc():\n    return 1\n\n"
        "def test_doc(doc):\n    assert doc == 1\n"
    )
    assert "doc = 1\n" in history.test_script(fixture, "t.py::test_doc")  # plain code: inlined
    asks = fixture.replace("def doc():", "def doc(request):")
    assert history.test_script(asks, "t.py::test_doc") is None  # pytest's own: cannot make
    local = "from tests.util import helper\n\ndef test_h():\n    assert helper()\n"
    assert history.test_script(local, "tests/t.py::test_h", local_modules={"tests"}) is None
    unit = textwrap.dedent("""\
        import unittest
        from rgdemo import clamp

        class ClampTest(unittest.TestCase):
            def setUp(self):
                self.high = 10

            def test_high(self):
                self.assertEqual(clamp(15, 0, self.high), self.high)

            def test_other(self):
                pass
        """)
    script = history.test_script(unit, "t.py::ClampTest::test_high")
    assert "test_other" not in script and script.rstrip().endswith('Case("reproduce").debug()')
    compile(script, "reproduction.py", "exec")
    # the class's base comes with its import, however the module imports it (without it,
    # every script of a unittest test stopped at a NameError)
    assert script.startswith("import unittest\n")
    imported = unit.replace("import unittest", "from unittest import TestCase")
    script = history.test_script(
        imported.replace("(unittest.TestCase)", "(TestCase)"), "t.py::ClampTest::test_high"
    )
    assert "from unittest import TestCase\n" in script and "class Case(TestCase):" in script
    rgdemo = "def clamp(value, low, high):\n    return value\n"
    namespace: dict = {"__name__": "reproduction"}
    sys.modules["rgdemo"] = types.ModuleType("rgdemo")
    try:
        exec(rgdemo, sys.modules["rgdemo"].__dict__)
        with pytest.raises(AssertionError, match="15 != 10"):
            exec(compile(script, "reproduction.py", "exec"), namespace)
    finally:
        del sys.modules["rgdemo"]


def test_asserting_script_states_what_the_call_raised_and_keeps_its_own_assertions(tmp_path):
    from repogym.scenarios import bug_reports

    def run(script: str) -> tuple[int, str]:
        (tmp_path / "reproduction.py").write_text(script)
        done = subprocess.run(
            [sys.executable, "reproduction.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode, done.stderr

    library = "import json\n\n\ndef reproduce():\n    json.loads('{')\n\n\nreproduce()\n"
    code, out = run(library)
    assert code == 1 and not bug_reports.fails_itself(out)  # json's error, not the script's
    code, out = run(history.asserting_script(library))
    assert code == 1 and bug_reports.fails_itself(out) and "JSONDecodeError: Expecting" in out
    own = "def reproduce():\n    assert 1 == 2, 'expected 2, got 1'\n\n\nreproduce()\n"
    code, out = run(history.asserting_script(own))
    assert out.rstrip().endswith("\nAssertionError: expected 2, got 1")  # passed through
    assert "direct cause" not in out
    unit = (
        "import unittest\n\n\nclass Case(unittest.TestCase):\n    def reproduce(self):\n"
        "        self.assertEqual(1, 2)\n\n\nCase('reproduce').debug()\n"
    )
    code, out = run(history.asserting_script(unit))
    assert out.rstrip().endswith("\nAssertionError: 1 != 2") and bug_reports.fails_itself(out)
    assert "direct cause" not in out
    assert run(history.asserting_script("def reproduce():\n    pass\n\n\nreproduce()\n")) == (0, "")
    assert history.asserting_script("def reproduce():\n    pass\n") is None  # no call
    documented = history.asserting_script(
        '"""Reproduces it."""\nimport json\n\n\ndef reproduce():\n    pass\n\n\nreproduce()\n'
    )
    assert ast.get_docstring(ast.parse(documented)) == "Reproduces it."  # still first


#: A project's page of the simple index in its JSON form (PEP 691), with upload times
#: (PEP 700): two releases, one of them uploaded as a wheel a day before its sdist, and
#: files no release can be read from.
SIMPLE_PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "demo",
    "files": [
        {"filename": "demo-1.0.tar.gz", "upload-time": "2024-03-02T10:00:00.000000Z"},
        {"filename": "demo-1.0-py3-none-any.whl", "upload-time": "2024-03-01T23:59:59Z"},
        {"filename": "demo-1.1.tar.gz", "upload-time": "2025-07-09T08:00:00Z"},
        {"filename": "demo-2.0.tar.gz"},
        {"filename": "notes.txt", "upload-time": "2020-01-01T00:00:00Z"},
    ],
}


def test_a_release_date_is_its_first_upload_on_the_index(tmp_path, monkeypatch):
    from repogym.scenarios import history

    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    assert history.index_release_dates(SIMPLE_PAGE) == {"1.0": "2024-03-01", "1.1": "2025-07-09"}
    pages: list[str] = []

    def page(name: str) -> dict:
        pages.append(name)
        return SIMPLE_PAGE

    assert history.release_date("demo", "1.1", page) == "2025-07-09"
    assert history.release_date("demo", "1.0", page) == "2024-03-01"  # from the cache
    assert pages == ["demo"]
    with pytest.raises(history.HistoryError, match="lists no dated file of this release"):
        history.release_date("demo", "2.0", page)  # looked up again: still undated
    assert pages == ["demo", "demo"]
    with pytest.raises(ValueError, match="Fix: YYYY-MM-DD"):
        history.parse_day("last spring")


def test_a_time_split_fetches_only_the_releases_since_a_day(tmp_path, monkeypatch, capsys):
    """``suite fetch --since``: the releases the index dates on or after the day; none is
    an error that says so, before anything is downloaded."""
    from repogym import cli
    from repogym.cli import cmd_suite
    from repogym.scenarios import history, suites

    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    realpy = suites.load_suite("realpy")
    dated = {"tomlkit": {"0.15.1": "2026-01-05", "0.15.2": "2026-03-01"}}

    def page(name: str) -> dict:
        return {
            "files": [
                {"filename": f"{name}-{v}.tar.gz", "upload-time": f"{d}T00:00:00Z"}
                for v, d in dated.get(name, {}).items()
            ]
            + [
                {"filename": f"{name}-{e.version}.tar.gz", "upload-time": "2020-01-01T00:00:00Z"}
                for e in realpy.packages
                if e.distribution == name and e.version not in dated.get(name, {})
            ]
        }

    monkeypatch.setattr(history, "_project_page", page)
    # the manifest records each release's day: read offline, the index is not asked
    tomlkit = realpy.select(["tomlkit"])
    by_day = {e.name: e.released for e in tomlkit}
    assert by_day["tomlkit-0.15.2"] == "2026-10-16" and all(by_day.values())
    chosen = cmd_suite._released_since(tomlkit, "2026-07-17")
    assert [e.name for e in chosen] == ["tomlkit-0.15.1", "tomlkit-0.15.2", "tomlkit-0.15.3"]
    # an entry that records no day is dated by the index
    undated = [dataclasses.replace(e, released="") for e in tomlkit]
    chosen = cmd_suite._released_since(undated, "2026-02-01")
    assert [e.name for e in chosen] == ["tomlkit-0.15.2"]
    assert cli.main(["suite", "fetch", "realpy", "--since", "2027-01-01"]) == 2
    assert "no release of its packages reached the package index on 2027-01-01" in (
        capsys.readouterr().err
    )
    assert cli.main(["suite", "fetch", "realpy", "--since", "soon"]) == 2
    assert "Fix: YYYY-MM-DD" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entry", "change"),
    [
        ("Speed up membership tests (``key in ...``) on ``Container`` (#512).", "performance"),
        ("Use ``OrderedDict`` for defined and faster ``LFUCache`` eviction.", "performance"),
        ("Add a ``fold`` argument to ``DateTime`` and ``Time``, mirroring the stdlib.", "feature"),
        ("Support TypedLiterals in get_parameters (pr100, by Ilya Bezdetnyy).", "feature"),
        ("Splitting statements now allows to remove the semicolon at the end.", "feature"),
        ("Allow ``DateTime.astimezone()`` to use the local timezone.", "feature"),
        ("Deprecate the ``recursive`` argument of ``walk``.", "deprecation"),
        ("Properly support shallow copies of caches.", "bug"),
        ("Fix ``date()`` so that it now raises ``ValueError`` on a bad day.", "bug"),
        ("Two ``Bool`` items never comparing equal to each other.", "bug"),
    ],
)
def test_a_changelog_entry_says_what_kind_of_change_it_reverts(entry, change):
    assert history.classify_change(entry) == change
    statement = history.changelog_description("pkg", "1.0", entry)
    assert history.change_of(statement) == change
    assert history.change_of("`f` returns nothing instead of a result\n\nbody") == "bug"


def test_a_failure_that_shows_the_old_code_lacked_the_interface_is_a_feature():
    # wcwidth 0.8.0's `wrap(..., term_program=...)`: the older release took no such
    # argument; reverting the change takes the argument away, which is no bug
    def written(*failures: str) -> str:
        items = "".join(f"- {f}\n" for f in failures)
        return f"`pkg` fails\nCode that uses `pkg` fails with\n\n{items}\nFix the library code.\n"

    assert (
        history.change_of(
            written("TypeError: wrap() got an unexpected keyword argument 'term_program'")
        )
        == "feature"
    )
    assert (
        history.change_of(
            written(
                "TypeError: f() takes 2 positional arguments but 3 were given",
                "ImportError: cannot import name 'g' from 'pkg'",
            )
        )
        == "feature"
    )
    # one failure of behaviour among them, or a TypeError from inside the code: a bug
    assert (
        history.change_of(
            written(
                "TypeError: f() got an unexpected keyword argument 'x'",
                "AssertionError: expected 3, got 4",
            )
        )
        == "bug"
    )
    assert history.change_of(written("TypeError: unsupported operand type(s)")) == "bug"


#: The top of semver 3.1.0's CHANGELOG.rst (towncrier's layout), as in its sdist: 3.1.0's
#: section with its sub-sections and the start of 3.0.4's (lines too long for this file
#: are cut with a backslash, which joins them again; trailing spaces dropped).
SEMVER_CHANGELOG = """\
##########
Change Log
##########

.. towncrier release notes start

Version 3.1.0
=============

:Released: 2026-09-12
:Maintainer: Tom Schraitle


Bug Fixes
---------

* :pr:`478`: ``Version.parse()`` and ``Version.is_valid()`` now reject non-ASCII digits \
and
  trailing newlines, in accordance with the SemVer grammar. Optional minor and
  patch parsing applies the same character restrictions.

* :pr:`479`: Comparing a :class:`~semver.Version` with a ``dict``, ``tuple``, or \
``list`` that cannot construct a valid version (for example, an empty collection, wrong \
number of parts, non-numeric parts, or unknown keys) no longer raises internal errors \
from ``Version.__init__``. The comparison operators now return \
:py:const:`NotImplemented` for such operands, following the general rule for invalid \
comparison operand types: equality evaluates to ``False`` and ordering raises Python's \
standard :py:exc:`TypeError` (for example, ``'>' not supported between instances of \
'Version' and 'dict'``).

* :pr:`480`: (:meth:`~semver.version.Version.bump_build`) will now add ``.0`` to an \
existing build when the last segment of the current build metadata, split by dots \
(``.``), is not numeric. This is to ensure the bumped version contains a raised build \
instead of silently returning an unchanged version. For example, ``1.2.3+alpha`` is \
bumped to ``1.2.3+alpha.0``. This mirrors the corresponding fix for the prerelease part \
(:gh:`460`). Related to :gh:`466`.

* :gh:`460`: :meth:`~semver.version.Version.bump_prerelease` will now add `.0` to an
  existing prerelease when the last segment of the current prerelease, split by
  dots (`.`), is not numeric. This is to ensure the new prerelease is considered
  higher than the previous one.

  :meth:`~semver.version.Version.bump_prerelease` now also support an argument
  `bump_when_empty` which will bump the patch version if there is no existing
  prerelease, to ensure the resulting version is considered a higher version than
  the previous one.



Features
--------

* :pr:`476`: Added optional ``[native]`` extra to accelerate parsing on CPython via the
  ``fast-semver-rs-backend`` package. The pure-Python parser remains the default;
  the native backend is opt-in and only available on CPython.



Internal Changes
----------------

: Update GitHub Actions for astral-sh/setup-uv (version 0.10.1), github/codeql-action \
(version 4)



Trivial Changes
---------------

* :gh:`463`: Remove double code in :meth:`Version.bump_build`

: Improve test coverage to 100% by ignoring the optional Rust backend fallback.

: Improve test suite for comparisons and fix test coverage.

: Suppress deprecation warnings in test suite.



Version 3.0.4
=============

:Released: 2025-01-24
:Maintainer: Tom Schraitle


Bug Fixes
---------

* :gh:`459`: Fix 3.0.3:

  * :pr:`457`: Re-enable Trove license identifier
  * :pr:`456`: Fix source dist file
"""
#: Release 3.1.0's failing tests of the reverted ``Version.bump_build``, by name.
BUMP_BUILD_HINTS = ["Version", "bump_build", "test_bump_build_digitless_metadata_should_append_0"]


def test_changelog_entries_keep_their_sub_heading_and_end_at_it(tmp_path):
    (tmp_path / "CHANGELOG.rst").write_text(SEMVER_CHANGELOG)
    entries = history.changelog_entries(tmp_path, "3.1.0")
    assert [(e.heading, e.text.split(":", 3)[2].strip("`")) for e in entries] == [
        ("Bug Fixes", "478"),
        ("Bug Fixes", "479"),
        ("Bug Fixes", "480"),
        ("Bug Fixes", "460"),
        ("Features", "476"),
        ("Trivial Changes", "463"),
    ]
    assert history.changelog_section(tmp_path, "3.1.0") == [e.text for e in entries]
    trivial = entries[-1]
    assert trivial.text == ":gh:`463`: Remove double code in :meth:`Version.bump_build`"
    assert "the previous one. :meth:`~semver.version.Version.bump_prerelease` now also" in (
        entries[3].text  # an indented paragraph after a blank line stays the bullet's
    )
    assert entries[2].text.endswith("Related to :gh:`466`.")  # the backslashes joined it
    assert [history.heading_kind(e.heading) for e in entries] == [
        *["bug"] * 4,
        "feature",
        "internal",
    ]
    assert [history.quotable(e) for e in entries] == [True] * 5 + [False]
    assert history.changelog_entries(tmp_path, "3.0.4")[0] == history.ChangelogEntry(
        ":gh:`459`: Fix 3.0.3:", "Bug Fixes"
    )
    quotable = [e.text for e in entries if history.quotable(e)]
    picked = history.pick_entry(quotable, BUMP_BUILD_HINTS, ["Version", "bump_build"])
    assert picked is not None and picked.startswith(":pr:`480`: (:meth:`~semver.version.")
    # a dotted prefix names the function: ``~semver.version.Version.bump_build``
    assert history.pick_entry(
        [entries[2].text, "Speed up the docs build."], ["other"], ["bump_build"]
    ) == (entries[2].text)


def test_history_quotes_the_bug_fix_entry_with_its_heading(tmp_path):
    from types import SimpleNamespace

    from repogym.quality.synth_history import _description

    (tmp_path / "CHANGELOG.rst").write_text(SEMVER_CHANGELOG)
    task = SimpleNamespace(
        name="semver",
        fixed="3.1.0",
        repo=tmp_path,
        functions=(SimpleNamespace(qualname="Version.bump_build"),),
        fail_to_pass=["tests/test_bump.py::test_bump_build_digitless_metadata_should_append_0"],
        gold="",
    )
    text, source = _description(task, {}, lambda task, messages: "from the tests")
    assert source == "changelog" and "Remove double code" not in text
    assert 'The fix, as the changelog of `semver` 3.1.0 describes it (under "Bug Fixes"):' in text
    assert "> :pr:`480`: (:meth:`~semver.version.Version.bump_build`) will now add" in text
    assert history.change_of(text) == "bug"


def test_sub_headings_are_read_by_their_words_and_lines_of_their_own_are_headings(tmp_path):
    kinds = {
        "Bug Fixes": "bug",
        "Fixed": "bug",
        "\N{LADY BEETLE} Bug fixes:": "bug",
        "Security": "bug",
        "New Features": "feature",
        "Added": "feature",
        "Enhancements": "feature",
        "Deprecations and Removals": "deprecation",
        "Removed": "deprecation",
        "Performance": "performance",
        "Improved Documentation": "internal",
        "Internal Changes": "internal",
        "Trivial Changes": "internal",
        "Misc": "internal",
        "Changed": None,
        "Features and Bug Fixes": None,
        "": None,
    }
    assert {h: history.heading_kind(h) for h in kinds} == kinds
    (tmp_path / "CHANGES.md").write_text(
        "# Changes\n\n## 2.0\n\nBug fixes:\n\n- Fix `walk` on empty folders.\n"
        "Docs:\n- Explain `walk`.\n\nThis paragraph is no one's.\n\n"
        "**Added**\n\n- A `depth` argument to `walk`.\n\n## 1.0\n\n- First.\n"
    )
    assert history.changelog_entries(tmp_path, "2.0") == [
        history.ChangelogEntry("Fix `walk` on empty folders.", "Bug fixes"),
        history.ChangelogEntry("Explain `walk`.", "Docs"),
        history.ChangelogEntry("A `depth` argument to `walk`.", "Added"),
    ]


def test_the_sub_heading_decides_the_kind_of_change():
    assert history.classify_change("Fix parsing of empty input.") == "bug"
    assert history.classify_change("Fix parsing of empty input.", "Features") == "feature"
    assert history.classify_change("``parse`` now accepts a trailing newline.") == "feature"
    assert history.classify_change("``parse`` now accepts a trailing newline.", "Bug Fixes") == (
        "bug"
    )
    assert history.classify_change("Deprecate ``walk``.", "Changed") == "deprecation"  # no say
    assert history.classify_change("Deprecate ``walk``.", "Misc") == "deprecation"


def test_a_fix_that_takes_out_raise_not_implemented_is_a_feature():
    # num2words 0.5.8 implemented Russian ordinals; the revert makes to_ordinal raise
    # NotImplementedError again, which no release did by mistake
    statement = (
        "`num2words` says a supported case is not implemented (NotImplementedError)\n\n"
        "`num2words(1, lang='ru', to='ordinal')` raises `NotImplementedError`; it should "
        "return `'первый'`.\n"
    )
    gold = (
        "--- a/num2words/lang_RU.py\n+++ b/num2words/lang_RU.py\n@@ -137,2 +137,2 @@\n"
        "     def to_ordinal(self, number):\n-        raise NotImplementedError()\n"
        "+        return self._ordinal(number)\n"
    )
    assert history.change_of(statement, gold) == "feature"
    assert history.change_of(statement) == "bug"  # the statement alone cannot tell
    kept = gold.replace("-        raise NotImplementedError()", "-        return None")
    assert history.change_of(statement, kept) == "bug"
    quoted = history.changelog_description("num2words", "0.5.8", "Fix the ordinals of 100.")
    assert history.change_of(quoted, gold) == "bug"  # a quote says what the change is


@pytest.mark.parametrize(
    ("entry", "change"),
    [
        # arrow 1.1.0: a feature whose words alone read as a fix
        ('[NEW] Made the start of the week adjustable when using ``span("week")``.', "feature"),
        ("[FIX] Fixed a bug that caused ``humanize`` to show floats.", "bug"),
        ("**Bugfix** Added a missing width for U+1F6DC.", "bug"),
        ("Added: a ``depth`` argument to ``walk``.", "feature"),
        ("[CHANGED] Speed up ``humanize``.", "performance"),  # no say: the words decide
        ("Python: fix ``walk`` on empty folders.", "bug"),
    ],
)
def test_a_tag_an_entry_opens_with_says_its_kind_as_a_sub_heading_would(entry, change):
    assert history.classify_change(entry) == change
    statement = history.changelog_description("pkg", "1.0", entry)
    assert history.change_of(statement) == change


@pytest.mark.parametrize(
    ("heading", "change"),
    [("Features", "feature"), ("Bug Fixes", "bug"), ("Performance", "performance"), ("", "bug")],
)
def test_a_statement_names_the_heading_and_change_of_reads_it_back(heading, change):
    from repogym.scenarios import retitle

    entry = "Fix ``walk`` returning folders twice (#12)."
    statement = history.changelog_description("pkg", "1.0", entry, heading=heading)
    under = f' (under "{heading}")' if heading else ""
    assert f"The fix, as the changelog of `pkg` 1.0 describes it{under}:\n\n> Fix" in statement
    assert statement == history.changelog_description("pkg", "1.0", entry, heading=heading)
    assert history.change_of(statement) == change
    assert retitle.retitle(statement) == statement  # a current statement stays as it is


@pytest.mark.parametrize(
    ("text", "heading"),
    [
        ("Add tests for six behaviours that mutation testing showed were not covered", ""),
        ("Remove double code in X", "Trivial Changes"),
        ("Remove double code in :meth:`Version.bump_build`", ""),
        (":pr:`12`: Improve test coverage to 100%.", "Bug Fixes"),
        ("#12: Refactor the parser into smaller functions.", ""),
        ("Fix typo in the README.", "Fixed"),
        ("Update docs for ``walk``.", ""),
        ("Document the ``depth`` argument.", ""),
        ("Update GitHub Actions for astral-sh/setup-uv (version 0.10.1)", ""),
        ("Bump pytest from 8.0 to 8.1.", ""),
        ("Fix ``walk`` returning folders twice.", "Improved Documentation"),
        ("Fix ``walk`` returning folders twice.", "Internal Changes"),
    ],
)
def test_housekeeping_entries_are_not_quoted(text, heading):
    assert not history.quotable(history.ChangelogEntry(text, heading))


@pytest.mark.parametrize(
    "text",
    [
        "Fix ``walk`` returning folders twice.",
        ":pr:`480`: (:meth:`~semver.version.Version.bump_build`) will now add ``.0``.",
        "Documents with a BOM are read again.",
        "Test for membership no longer copies the container.",
        "Added a ``depth`` argument to ``walk``.",
    ],
)
def test_entries_about_the_library_are_quoted(text):
    assert history.quotable(history.ChangelogEntry(text, "Bug Fixes"))
    assert history.quotable(history.ChangelogEntry(text))


def test_a_reverted_function_gets_back_what_it_reads_that_the_newer_release_dropped(tmp_path):
    """marshmallow 4.2.3 rewrote ``OneOf.options`` without ``zip_longest`` and dropped the
    import: 4.2.2's method put back alone would raise a NameError no release raised. The
    import comes back (only the name needed), as do a dropped helper and constant; what
    the newer module still has is not repeated."""
    old = (
        '"""Mod."""\n\nimport re\nfrom itertools import chain, zip_longest\n\nPAD = ""\n\n\n'
        "def _pairs(a, b):\n    return zip_longest(a, b, fillvalue=PAD)\n\n\n"
        "class OneOf:\n    def options(self):\n"
        "        return [(str(c), l) for c, l in _pairs(self.choices, self.labels)]\n\n"
        "    def other(self):\n        return re.escape(PAD)\n"
    )
    new = (
        '"""Mod."""\n\nimport re\n\n\nclass OneOf:\n    def options(self):\n'
        "        return list(zip(self.choices, self.labels, strict=True))\n\n"
        "    def other(self):\n        return re.escape('')\n"
    )
    for version, text in (("old", old), ("new", new)):
        (tmp_path / version).mkdir()
        (tmp_path / version / "mod.py").write_text(text)
    changed = history.changed_functions(tmp_path / "old", tmp_path / "new", ["mod.py"])
    [fn] = [f for f in changed if f.qualname == "OneOf.options"]
    out = history.revert_all({"mod.py": new}, [fn], {"mod.py": old})["mod.py"]
    assert out.startswith('"""Mod."""\n\nimport re\nfrom itertools import zip_longest\n')
    assert "chain" not in out
    assert 'PAD = ""\n\n\ndef _pairs(a, b):\n    return zip_longest(a, b, fillvalue=PAD)' in out
    assert out.index("def _pairs") < out.index("class OneOf")
    namespace: dict = {}
    exec(compile(out, "mod.py", "exec"), namespace)
    one = namespace["OneOf"]()
    one.choices, one.labels = [1, 2], ["a"]
    assert one.options() == [("1", "a"), ("2", "")]
    # a method whose docstring has a line at the first column (semver's): read from N's
    # module, not from the method's text alone, which does not parse dedented
    odd = old.replace(
        "    def options(self):\n", '    def options(self):\n        """Pairs.\n\nDone."""\n'
    )
    (tmp_path / "old" / "mod.py").write_text(odd)
    changed = history.changed_functions(tmp_path / "old", tmp_path / "new", ["mod.py"])
    [fn_odd] = [f for f in changed if f.qualname == "OneOf.options"]
    got = history.revert_all({"mod.py": new}, [fn_odd], {"mod.py": odd})["mod.py"]
    assert "from itertools import zip_longest" in got and "def _pairs" in got
    # without the old module, or with nothing dropped, the revert is as before
    assert history.revert_all({"mod.py": new}, [fn])["mod.py"] == history.revert(new, fn)
    assert history.with_needed_names(old, old, [fn]) == old


def test_a_script_names_the_side_written_out_the_expected_one():
    text = "from rgdemo import clamp\n\n\ndef test_first():\n    assert 3 == clamp(9, 0, 3)\n"
    script = history.test_script(text, "tests/test_x.py::test_first")
    assert "_actual = clamp(9, 0, 3)\n" in script and "_expected = 3\n" in script
    other = text.replace("3 == clamp(9, 0, 3)", "clamp(9, 0, 3) == 3")
    assert "_expected = 3\n" in history.test_script(other, "tests/test_x.py::test_first")


def test_tests_that_read_the_wall_clock_are_found_through_helpers(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "perf_utils.py").write_text(
        "import time\n\n\ndef _measure(f):\n    t = time.perf_counter()\n    f()\n"
        "    return time.perf_counter() - t\n\n\ndef assert_near_linear(case, f):\n"
        "    case.assertLess(_measure(f), 0.5)\n"
    )
    (tmp_path / "tests" / "test_x.py").write_text(
        "import time as clock\nimport unittest\nfrom timeit import timeit\n\n"
        "from perf_utils import assert_near_linear\n\n\n"
        "def test_direct():\n    start = clock.monotonic()\n"
        "    assert clock.monotonic() - start < 1\n\n\n"
        "def test_timeit():\n    assert timeit('1', number=1) < 1\n\n\n"
        "def test_plain():\n    assert 1 + 1 == 2\n\n\n"
        "def test_sleeps():\n    f = debounce(g, 15)\n    clock.sleep(0.01)\n"
        "    assert f() is None\n\n\n"
        "class TestPerf(unittest.TestCase):\n"
        "    def elapsed(self):\n        return clock.perf_counter()\n\n"
        "    def test_helper(self):\n        assert_near_linear(self, lambda: None)\n\n"
        "    def test_method(self):\n        self.assertLess(self.elapsed(), 1e9)\n\n"
        "    def test_value(self):\n        self.assertEqual(str(1), '1')\n"
    )
    ids = [
        "tests/test_x.py::test_direct",
        "tests/test_x.py::test_timeit",
        "tests/test_x.py::test_plain",
        "tests/test_x.py::test_sleeps",
        "tests/test_x.py::TestPerf::test_helper",
        "tests/test_x.py::TestPerf::test_method",
        "tests/test_x.py::TestPerf::test_value",
    ]
    assert history.clock_tests(tmp_path, ids) == {
        "tests/test_x.py::test_direct",
        "tests/test_x.py::test_timeit",
        "tests/test_x.py::test_sleeps",
        "tests/test_x.py::TestPerf::test_helper",
        "tests/test_x.py::TestPerf::test_method",
    }


def test_a_tests_fixtures_from_its_conftests_are_inlined_and_the_script_runs(tmp_path):
    """A failing test that takes fixtures (its module's, or a conftest's above it, taking
    fixtures in turn, one yielding inside a ``with``) stands alone: each fixture's set-up
    comes before the test's body, its tear-down is left out; one that is not plain code
    (``params``, ``request``) or whose names clash with the test's gives no script."""
    conftest = textwrap.dedent("""\
        import contextlib
        import pytest


        @contextlib.contextmanager
        def entered(log):
            log.append("in")
            yield
            log.append("out")


        @pytest.fixture
        def log():
            \"\"\"The events.\"\"\"
            return []


        @pytest.fixture
        def box(log, tmp_path):
            with entered(log):
                found = {"log": log, "dir": tmp_path.is_dir()}
                yield found
            log.append("never in a script")


        @pytest.fixture(params=[1, 2])
        def many(request):
            return request.param
        """)
    tests = textwrap.dedent("""\
        import pytest


        @pytest.fixture
        def base():
            return 40


        def test_box(box, base):
            assert box["log"] == ["in"] and box["dir"]
            assert base + 2 == 42


        def test_many(many):
            assert many


        found = ["in"]


        def test_clash(box):
            assert box["log"] == found
        """)
    script = history.test_script(tests, "tests/test_x.py::test_box", conftests=[conftest])
    assert script is not None and "pytest" not in script and "never" not in script
    assert "with entered(log):" in script and "base = 40" in script
    (tmp_path / "reproduction.py").write_text(script)
    ran = subprocess.run(
        [sys.executable, "reproduction.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    # the same script fails when the fixture's value is not what the test expects
    broken = script.replace("return 40", "").replace("base = 40", "base = 41")
    (tmp_path / "reproduction.py").write_text(broken)
    ran = subprocess.run(
        [sys.executable, "reproduction.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode != 0 and "expected 42, got 43" in ran.stderr
    assert history.test_script(tests, "tests/test_x.py::test_many", conftests=[conftest]) is None
    # the fixture's own ``found`` would hide the module's, which the test reads
    assert history.test_script(tests, "tests/test_x.py::test_clash", conftests=[conftest]) is None
    # without the conftest, its fixtures cannot be found
    assert history.test_script(tests, "tests/test_x.py::test_box") is None
