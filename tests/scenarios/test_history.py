"""Release-history tasks: the parts that run nothing, and the miner on a two-release package
built here (its sdists are placed in the download cache, so nothing is fetched)."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

from repogym.scenarios import history, pypi
from repogym.scenarios.task import load_task

OLD = '''\
"""A demo package."""


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return value


def describe(value):
    """Say what value is."""
    return f"value {value}"


def unused(value):
    return value + 1
'''
NEW = OLD.replace('''    if value < low:
        return low
    return value
''', '''    if value < low:
        return low
    if value > high:
        return high
    return value
''').replace('"""Say what value is."""', '"""Describe ``value`` (docs only)."""').replace(
    "return value + 1", "return value + 2")
TESTS = '''\
import pytest

from rgdemo import clamp, describe


def test_clamp_caps_at_high():
    """The upper bound holds."""
    assert clamp(15, 0, 10) == 10


@pytest.mark.parametrize("value", [3, 7])
def test_inside(value):
    assert clamp(value, 0, 10) == value


def test_describe():
    assert describe(2) == "value 2"
'''
CHANGES = '''\
Changes
=======

1.1 (2026-01-02)
----------------

- Fix ``clamp`` ignoring its upper bound (#12).
- Speed up the docs build.

1.0 (2026-01-01)
----------------

- First release.
'''


def _sdist(folder: Path, version: str, module: str, tests: str = TESTS,
           extra: dict[str, str] | None = None) -> Path:
    """An sdist of rgdemo ``version`` (the package, its tests, a changelog) in ``folder``."""
    files = {**(extra or {}), "rgdemo/__init__.py": module, "tests/test_rgdemo.py": tests,
             "CHANGES.rst": CHANGES, "PKG-INFO": f"Metadata-Version: 2.1\nName: rgdemo\n"
                                                 f"Version: {version}\n"}
    dest = folder / f"rgdemo-{version}"
    dest.mkdir(parents=True)
    archive = dest / f"rgdemo-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"rgdemo-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def _reproduce(task, folder: Path, script: str, tmp_path: Path
               ) -> tuple[subprocess.CompletedProcess, int]:
    """``script`` run as ``python reproduction.py`` at the root of a copy of the task's
    repo/, as the contract says: (the run without the fix, its exit code with the gold
    patch applied)."""
    work = tmp_path / "run"
    subprocess.run(["cp", "-r", str(task.repo_dir), str(work)], check=True)
    (work / "reproduction.py").write_text(script)
    before = subprocess.run([sys.executable, "reproduction.py"], cwd=work, capture_output=True,
                            text=True, check=False)
    subprocess.run(["git", "apply", str(folder / "solution.patch")], cwd=work, check=True)
    return before, subprocess.run([sys.executable, "reproduction.py"], cwd=work,
                                  check=False).returncode


# -- pure parts ----------------------------------------------------------------------------
def test_changed_functions_ignore_docstrings_and_revert_puts_the_old_code_back(tmp_path):
    for version, text in (("old", OLD), ("new", NEW)):
        (tmp_path / version / "rgdemo").mkdir(parents=True)
        (tmp_path / version / "rgdemo" / "__init__.py").write_text(text)
    changed = history.changed_functions(tmp_path / "old", tmp_path / "new",
                                        ["rgdemo/__init__.py"])
    assert [c.qualname for c in changed] == ["clamp", "unused"]  # describe: docstring only
    buggy = history.revert(NEW, changed[0])
    assert "if value > high" not in buggy
    assert 'Describe ``value``' in buggy and "value + 2" in buggy  # the rest stays N+1's
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
    (md / "CHANGELOG.md").write_text("# Log\n\n## [0.2.1] - 2025\n\n### Fixed\n\n- Fix the "
                                     "parser on [#3](https://x.org/3) empty input.\n\n"
                                     "## [0.2.0]\n\n- Older.\n")
    assert history.changelog_section(md, "0.2.1") == ["Fix the parser on #3 empty input."]
    assert history.changelog_section(md, "0.2") is None  # 0.2 is not 0.2.0 or 0.2.1


def test_statement_leaks_name_the_fix_lines_and_test_ids():
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return value\n+    return min(value, high)\n"
    ids = ["tests/test_rgdemo.py::test_clamp_caps_at_high"]
    assert history.statement_leaks("clamp ignores high", gold, ids) == []
    assert history.statement_leaks("use return min(value, high)", gold, ids)
    assert history.statement_leaks("see test_clamp_caps_at_high", gold, ids)


def test_test_script_stands_alone_and_names_no_test():
    script = history.test_script(TESTS, "tests/test_rgdemo.py::test_clamp_caps_at_high",
                                 local_modules={"tests"}, pythonpath=["src"])
    assert "test_clamp" not in script and "pytest" not in script  # unused imports dropped
    assert script.startswith("import sys\nsys.path.insert(0, 'src')\nfrom rgdemo import clamp")
    assert "f'expected {_expected!r}, got {_actual!r}'" in script
    case = history.test_script(TESTS, "tests/test_rgdemo.py::test_inside[7]")
    assert "value = 7" in case and "parametrize" not in case
    assert history.test_script(TESTS, "tests/test_rgdemo.py::test_inside[8]") is None
    fixture = "import pytest\n\n@pytest.fixture\ndef doc():\n    return 1\n\n" \
              "def test_doc(doc):\n    assert doc == 1\n"
    assert history.test_script(fixture, "t.py::test_doc") is None  # a fixture it cannot make
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


# -- the miner, in the sandbox --------------------------------------------------------------
def test_history_mines_a_validated_task_with_the_changelog_entry_and_a_reproduction(
        tmp_path, monkeypatch):
    sdists = tmp_path / "sdists"
    _sdist(sdists, "1.0", OLD)
    _sdist(sdists, "1.1", NEW)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    from repogym.quality.synth_history import mine_history

    out = tmp_path / "out"
    res = mine_history("rgdemo", out, versions=["1.1", "1.0", "1.1rc1"], reruns=1,
                       say=lambda m: None)
    [pair] = res.pairs
    assert (pair.base, pair.fixed, pair.changed, pair.error) == ("1.0", "1.1", 2, None)
    assert pair.skipped == {"rgdemo/__init__.py::unused": "no test fails with N's version"}
    [folder] = res.written
    assert res.dropped == {}
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::test_clamp_caps_at_high",)
    assert set(task.test_spec.pass_to_pass) == {"tests/test_rgdemo.py::test_inside[3]",
                                               "tests/test_rgdemo.py::test_inside[7]",
                                               "tests/test_rgdemo.py::test_describe"}
    assert "history" in task.tags
    assert "Fix ``clamp`` ignoring its upper bound (#12)." in task.statement
    assert "test_clamp" not in task.statement and "value > high" not in task.statement
    script = (folder / "reproduction.py").read_text()
    assert f"Reproduction:\n\n```python\n{script}```" in task.statement
    assert not list(task.repo_dir.rglob("test_*.py")) and (task.repo_dir / "CHANGES.rst").is_file()
    toml = (folder / "task.toml").read_text()
    assert 'base = "1.0"\nfixed = "1.1"\nfile = "rgdemo/__init__.py"\nfunction = "clamp"' in toml
    assert 'statement_source = "changelog"' in toml
    # the reproduction fails on repo/ and passes with the gold fix, run as the contract says
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and "expected 10, got 15" in before.stderr
    assert after == 0


RAISING = NEW.replace('''    """Limit value to [low, high]."""
''', '''    """Limit value to [low, high]."""
    if low > high:
        raise ValueError("low is above high")
''')
RAISING_TESTS = TESTS + '''

def test_clamp_rejects_reversed_bounds():
    with pytest.raises(ValueError):
        clamp(1, 5, 0)
'''


def test_a_reproduction_of_an_expected_exception_fails_by_its_own_assertion(
        tmp_path, monkeypatch):
    """The fix makes ``clamp`` raise, and the test says so with ``pytest.raises``: run
    without the fix, the test's body fails by pytest's ``DID NOT RAISE``, which is not the
    script's own AssertionError. The miner writes the wrapped script instead, which the
    suite audit accepts: it fails by stating what went wrong and passes with the fix."""
    from repogym.quality.synth_history import mine_history
    from repogym.scenarios import bug_reports

    sdists = tmp_path / "sdists"
    _sdist(sdists, "1.1", NEW, RAISING_TESTS)
    _sdist(sdists, "1.2", RAISING, RAISING_TESTS)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    res = mine_history("rgdemo", tmp_path / "out", versions=["1.1", "1.2"], reruns=1,
                       say=lambda m: None)
    [folder] = res.written
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == (
        "tests/test_rgdemo.py::test_clamp_rejects_reversed_bounds",)
    script = (folder / "reproduction.py").read_text()
    assert "pytest.raises(ValueError)" in script and "raise AssertionError(" in script
    assert f"Reproduction:\n\n```python\n{script}```" in task.statement
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and bug_reports.fails_itself(before.stderr), before.stderr
    assert before.stderr.rstrip().endswith("AssertionError: Failed: DID NOT RAISE ValueError")
    assert after == 0


def test_asserting_script_states_what_the_call_raised_and_keeps_its_own_assertions(tmp_path):
    from repogym.scenarios import bug_reports

    def run(script: str) -> tuple[int, str]:
        (tmp_path / "reproduction.py").write_text(script)
        done = subprocess.run([sys.executable, "reproduction.py"], cwd=tmp_path,
                              capture_output=True, text=True, check=False)
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
    unit = ("import unittest\n\n\nclass Case(unittest.TestCase):\n    def reproduce(self):\n"
            "        self.assertEqual(1, 2)\n\n\nCase('reproduce').debug()\n")
    code, out = run(history.asserting_script(unit))
    assert out.rstrip().endswith("\nAssertionError: 1 != 2") and bug_reports.fails_itself(out)
    assert "direct cause" not in out
    assert run(history.asserting_script("def reproduce():\n    pass\n\n\nreproduce()\n")) \
        == (0, "")
    assert history.asserting_script("def reproduce():\n    pass\n") is None  # no call
    documented = history.asserting_script(
        '"""Reproduces it."""\nimport json\n\n\ndef reproduce():\n    pass\n\n\nreproduce()\n')
    assert ast.get_docstring(ast.parse(documented)) == "Reproduces it."  # still first


def test_a_statement_from_failures_shows_no_memory_address():
    """sqlparse's failures read `<Identifier 'foo' at 0x7FFB7DCE7BD0>`: an address differs
    on every run and says nothing of the bug."""
    from types import SimpleNamespace

    from repogym.quality.synth_history import failure_description

    gold = ("--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-    return tokens[:2]\n"
            "+    return tokens\n")
    task = SimpleNamespace(name="sqlparse", gold=gold, fail_to_pass=["tests/t.py::test_a"])
    text = failure_description(task, {"tests/t.py::test_a": (
        "AssertionError: assert 2 == 4 + where 2 = len("
        "[<Identifier 'foo' at 0x7FFB7DCE7BD0>, <Parenthesis '(c1)' at 0x7FFB7DCE41D0>])")})
    assert text is not None and "<Identifier 'foo'>" in text and "0x" not in text, text


MIXIN_INIT = '''\
class ClampMixin:
    high = 10

    def test_caps_at_high(self):
        self.assertEqual(self.clamp(15, 0, self.high), self.high)

    def test_keeps_inside(self):
        self.assertEqual(self.clamp(3, 0, self.high), 3)
'''
MIXIN_TESTS = '''\
import unittest

from rgdemo import clamp, describe

from . import ClampMixin


class ClampTest(ClampMixin, unittest.TestCase):
    clamp = staticmethod(clamp)

    def test_describe(self):
        self.assertEqual(describe(2), "value 2")
'''


def test_a_failing_test_a_unittest_mixin_defines_gets_a_reproduction(tmp_path, monkeypatch):
    """cachetools' layout: the test methods live in a mixin of the tests package and use a
    class attribute of the concrete TestCase (``self.clamp``). The test alone cannot stand
    as a script, so the miner inlines its body with what it uses of the class and the
    mixin, as synthesised bugs' reports do, and checks that script in the sandbox."""
    from repogym.quality.synth_history import mine_history
    from repogym.scenarios import bug_reports

    sdists = tmp_path / "sdists"
    extra = {"tests/__init__.py": MIXIN_INIT}
    _sdist(sdists, "1.0", OLD, MIXIN_TESTS, extra)
    _sdist(sdists, "1.1", NEW, MIXIN_TESTS, extra)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    res = mine_history("rgdemo", tmp_path / "out", versions=["1.0", "1.1"], reruns=1,
                       say=lambda m: None)
    [folder] = res.written
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::ClampTest::test_caps_at_high",)
    script = (folder / "reproduction.py").read_text()
    assert "high = 10" in script and "clamp = staticmethod(clamp)" in script, script
    assert "ClampMixin" not in script and "test_caps" not in script
    assert "def clamp" not in script  # test code is inlined, never the package's own
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and bug_reports.fails_itself(before.stderr), before.stderr
    assert "AssertionError: 15 != 10" in before.stderr
    assert after == 0
