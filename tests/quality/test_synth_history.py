"""The release-history miner (repogym/quality/synth_history.py) on a two-release package
built here (its sdists are placed in the download cache, so nothing is fetched)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from repogym.scenarios import pypi
from repogym.scenarios.task import load_task
from tests.scenarios._history import CHANGES, NEW, OLD, TESTS


def _sdist(
    folder: Path, version: str, module: str, tests: str = TESTS, extra: dict[str, str] | None = None
) -> Path:
    """An sdist of rgdemo ``version`` (the package, its tests, a changelog) in ``folder``."""
    files = {
        "rgdemo/__init__.py": module,
        "tests/test_rgdemo.py": tests,
        "CHANGES.rst": CHANGES,
        "PKG-INFO": f"Metadata-Version: 2.1\nName: rgdemo\nVersion: {version}\n",
        **(extra or {}),
    }
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


def _reproduce(
    task, folder: Path, script: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess, int]:
    """``script`` run as ``python reproduction.py`` at the root of a copy of the task's
    repo/, as the contract says: (the run without the fix, its exit code with the gold
    patch applied)."""
    work = tmp_path / "run"
    subprocess.run(["cp", "-r", str(task.repo_dir), str(work)], check=True)
    (work / "reproduction.py").write_text(script)
    before = subprocess.run(
        [sys.executable, "reproduction.py"], cwd=work, capture_output=True, text=True, check=False
    )
    subprocess.run(["git", "apply", str(folder / "solution.patch")], cwd=work, check=True)
    return before, subprocess.run(
        [sys.executable, "reproduction.py"], cwd=work, check=False
    ).returncode


def _mine(tmp_path, monkeypatch, releases, tests=TESTS, extra=None, out="out", **options):
    """``mine_history`` of rgdemo over ``releases`` (version -> module text), its sdists
    placed in the download cache (built with ``tests`` and ``extra`` files)."""
    from repogym.quality.synth_history import mine_history

    sdists = tmp_path / "sdists"
    for version, module in releases.items():
        if not (sdists / f"rgdemo-{version}").exists():
            _sdist(sdists, version, module, tests, extra)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    options.setdefault("say", lambda m: None)
    return mine_history("rgdemo", tmp_path / out, versions=list(releases), reruns=1, **options)


# -- the miner, in the sandbox --------------------------------------------------------------
def test_history_mines_a_validated_task_with_the_changelog_entry_and_a_reproduction(
    tmp_path, monkeypatch
):
    sdists = tmp_path / "sdists"
    _sdist(sdists, "1.0", OLD)
    _sdist(sdists, "1.1", NEW)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    from repogym.quality.synth_history import mine_history

    out = tmp_path / "out"
    res = mine_history(
        "rgdemo", out, versions=["1.1", "1.0", "1.1rc1"], reruns=1, say=lambda m: None
    )
    [pair] = res.pairs
    assert (pair.base, pair.fixed, pair.changed, pair.error) == ("1.0", "1.1", 2, None)
    assert pair.skipped == {"rgdemo/__init__.py::unused": "no test fails with N's version"}
    [folder] = res.written
    assert res.dropped == {}
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::test_clamp_caps_at_high",)
    assert set(task.test_spec.pass_to_pass) == {
        "tests/test_rgdemo.py::test_inside[3]",
        "tests/test_rgdemo.py::test_inside[7]",
        "tests/test_rgdemo.py::test_describe",
    }
    assert "history" in task.tags
    assert "Fix ``clamp`` ignoring its upper bound (#12)." in task.statement
    assert "test_clamp" not in task.statement and "value > high" not in task.statement
    script = (folder / "reproduction.py").read_text()
    assert f"Reproduction:\n\n```python\n{script}```" in task.statement
    assert not list(task.repo_dir.rglob("test_*.py")) and (task.repo_dir / "CHANGES.rst").is_file()
    toml = (folder / "task.toml").read_text()
    assert 'base = "1.0"\nfixed = "1.1"\nfile = "rgdemo/__init__.py"\nfunction = "clamp"' in toml
    assert 'statement_source = "changelog"' in toml
    # the test's own body said `_actual = clamp(15, 0, 10)`, `_expected = 10`: the hidden
    # check's expected value, so the miner restated it on another input
    assert "clamp(15, 0, 10)" not in script and "clamp(16, 0, 10)" in script
    # the reproduction fails on repo/ and passes with the gold fix, run as the contract says
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and "expected 10, got 16" in before.stderr
    assert after == 0


def test_mining_for_a_suite_skips_before_validation_what_a_suite_would_not_serve(
    tmp_path, monkeypatch
):
    """``--for-suite``: a candidate without a verified reproduction is not validated nor
    written (a suite takes none), and the pair's report says why."""
    from repogym.quality import synth_history

    validated = []
    real = synth_history._validate
    monkeypatch.setattr(
        synth_history,
        "_validate",
        lambda folders, *a, **k: validated.extend(folders) or real(folders, *a, **k),
    )
    res = _mine(
        tmp_path,
        monkeypatch,
        {"1.0": OLD, "1.1": NEW},
        reproduce=lambda task, folder: None,
        for_suite=True,
    )
    [pair] = res.pairs
    assert pair.skipped["rgdemo/__init__.py::clamp"].startswith("no verified reproduction")
    assert res.written == [] and validated == [] and pair.candidates == []


def test_a_helper_of_tests_kept_inside_the_package_is_no_fix_to_revert(tmp_path, monkeypatch):
    """Tests kept in the package's own folder (croniter's ``src/croniter/tests/``) are hidden
    test files: a helper of theirs that changed between the releases is not reverted."""
    from repogym.quality.synth_history import mine_history

    sdists = tmp_path / "sdists"
    for version, module, value in (("1.0", OLD, 1), ("1.1", NEW, 2)):
        inside = f"def helper():\n    return {value}\n\n\ndef test_helper():\n    assert helper()\n"
        extra = {"rgdemo/tests/__init__.py": "", "rgdemo/tests/test_inside.py": inside}
        _sdist(sdists, version, module, extra=extra)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    res = mine_history("rgdemo", tmp_path / "out", versions=["1.0", "1.1"], say=lambda m: None)
    [pair] = res.pairs
    assert pair.changed == 2 and not [k for k in pair.skipped if "tests/" in k], pair.skipped
    [folder] = res.written
    assert not (load_task(folder).repo_dir / "rgdemo/tests/test_inside.py").exists()  # hidden


def test_a_failing_tests_conftest_fixture_is_inlined_and_one_of_pytests_own_gets_a_call_report(
    tmp_path, monkeypatch
):
    """A failing test that takes a conftest's fixture of plain code stands alone with the
    fixture's set-up inlined. One whose fixture takes pytest's ``request`` does not, so the
    reproduction is the call the reverted code answers differently, recorded while the test
    ran, as synthesised bugs' reports are; the changelog quote stays either way."""
    tests = TESTS.replace(
        "def test_clamp_caps_at_high():\n"
        '    """The upper bound holds."""\n'
        "    assert clamp(15, 0, 10) == 10\n",
        "def test_clamp_caps_at_high(high):\n    assert clamp(15, 0, high) == high\n",
    )
    assert "(high)" in tests
    conftest = "import pytest\n\n\n@pytest.fixture\ndef high():\n    yield 10\n    print('done')\n"
    for name, fixture, inlined in (
        ("plain", conftest, True),
        ("own", conftest.replace("def high():", "def high(request):"), False),
    ):
        res = _mine(
            tmp_path / name,
            monkeypatch,
            {"1.0": OLD, "1.1": NEW},
            tests,
            extra={"tests/conftest.py": fixture},
            for_suite=True,
        )
        [folder] = res.written
        task = load_task(folder)
        script = (folder / "reproduction.py").read_text()
        assert "def high" not in script and "done" not in script and "pytest" not in script
        if inlined:  # the test's own body, after the fixture's set-up
            assert "high = 10\n" in script and "clamp(15, 0, high)" in script
        else:
            assert "clamp(15, 0, 10)" in script
        assert "Fix ``clamp`` ignoring its upper bound (#12)." in task.statement
        assert f"```python\n{script}```" in task.statement
        before, after = _reproduce(task, folder, script, tmp_path / name)
        assert before.returncode != 0 and "AssertionError" in before.stderr and after == 0


# One fix that changed two functions: clamp passes a new argument to a helper that takes it.
OLD_PAIR = '''\
"""A demo package."""


def _cap_high(value, high):
    return value


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return _cap_high(value, high)
'''
NEW_PAIR = '''\
"""A demo package."""


def _cap_high(value, high, strict=False):
    if strict and value > high:
        return high
    return value


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return _cap_high(value, high, strict=True)
'''
TESTS_PAIR = TESTS.replace("from rgdemo import clamp, describe", "from rgdemo import clamp").split(
    "\n\ndef test_describe"
)[0]
CHANGES_PAIR = CHANGES.replace(
    "Fix ``clamp`` ignoring its upper bound (#12).",
    "Fix ``clamp`` ignoring its upper bound: ``_cap_high`` caps at ``high`` (#12).",
)


def test_the_functions_one_fix_changed_are_reverted_together(tmp_path, monkeypatch):
    """Both functions the changelog entry's fix changed are one task: reverting the helper
    alone would leave ``clamp`` calling it with an argument no release's helper took (a
    TypeError no release had); the task puts release 1.0's code back in both."""
    releases = {"1.0": OLD_PAIR, "1.1": NEW_PAIR}
    res = _mine(tmp_path, monkeypatch, releases, TESTS_PAIR, {"CHANGES.rst": CHANGES_PAIR})
    [pair] = res.pairs
    assert (pair.changed, pair.error, pair.skipped) == (2, None, {})
    [folder] = res.written
    task = load_task(folder)
    toml = (folder / "task.toml").read_text()
    assert 'function = "_cap_high"\nalso = ["rgdemo/__init__.py::clamp"]' in toml
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::test_clamp_caps_at_high",)
    assert "ignoring its upper bound" in task.statement
    buggy = (task.repo_dir / "rgdemo" / "__init__.py").read_text()
    assert buggy == OLD_PAIR  # release 1.0's code, both functions
    gold = (folder / "solution.patch").read_text()
    assert "+    return _cap_high(value, high, strict=True)" in gold
    assert "+def _cap_high(value, high, strict=False):" in gold


def test_functions_whose_reverts_fail_the_same_test_are_one_task(tmp_path, monkeypatch):
    """The changelog names ``clamp`` only, so the quote does not tie the helper to it; the
    test both reverts fail does: one task, release 1.0's code in both, not two tasks (one
    of them a helper reverted under a caller no release had) with the same failure."""
    releases = {"1.0": OLD_PAIR, "1.1": NEW_PAIR}
    res = _mine(tmp_path, monkeypatch, releases, TESTS_PAIR)
    [pair] = res.pairs
    assert (pair.changed, pair.error, pair.skipped) == (2, None, {})
    [folder] = res.written
    task = load_task(folder)
    assert (task.repo_dir / "rgdemo" / "__init__.py").read_text() == OLD_PAIR
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::test_clamp_caps_at_high",)
    assert "also = [" in (folder / "task.toml").read_text()


PLUGIN_TESTS = (
    TESTS
    + """

import importlib.metadata
import unittest


class TestPlugin(unittest.TestCase):
    def setUp(self):  # finds its plugin by name, as markdown finds its extensions
        [ep] = importlib.metadata.entry_points(group="rgdemo.plugins", name="double")
        self.plugin = ep.load()

    def test_plugin(self):
        self.assertEqual(self.plugin(2), 4)
"""
)
EGG_INFO = {
    "rgdemo.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: rgdemo\nVersion: 1.1\n",
    "rgdemo.egg-info/entry_points.txt": "[rgdemo.plugins]\ndouble = rgdemo.plugins:double\n",
    "rgdemo.egg-info/SOURCES.txt": "rgdemo/__init__.py\ntests/test_rgdemo.py\n",
    "rgdemo/plugins.py": "def double(x):\n    return 2 * x\n",
}


def test_a_package_that_finds_its_own_plugins_by_entry_point_keeps_them(tmp_path, monkeypatch):
    """The workspace keeps the project's metadata with its entry points (the file list
    goes): tests that load a plugin by name pass there, graded as mined. Without them
    every test of such a class failed, and its must-pass canaries with them, so no task of
    the package validated (markdown: 12 of 12 dropped)."""
    res = _mine(tmp_path, monkeypatch, {"1.0": OLD, "1.1": NEW}, PLUGIN_TESTS, EGG_INFO)
    [folder] = res.written
    task = load_task(folder)
    assert "tests/test_rgdemo.py::TestPlugin::test_plugin" in task.test_spec.pass_to_pass
    info = task.repo_dir / "rgdemo.egg-info"
    assert sorted(p.name for p in info.iterdir()) == ["PKG-INFO", "entry_points.txt"]


RAISING = NEW.replace(
    '''    """Limit value to [low, high]."""
''',
    '''    """Limit value to [low, high]."""
    if low > high:
        raise ValueError("low is above high")
''',
)
RAISING_TESTS = (
    TESTS
    + """

def test_clamp_rejects_reversed_bounds():
    with pytest.raises(ValueError):
        clamp(1, 5, 0)
"""
)


def test_a_reproduction_of_an_expected_exception_fails_by_its_own_assertion(tmp_path, monkeypatch):
    """The fix makes ``clamp`` raise, and the test says so with ``pytest.raises``: run
    without the fix, the test's body fails by pytest's ``DID NOT RAISE``, which is not the
    script's own AssertionError. The miner writes the wrapped script instead, which the
    suite audit accepts: it fails by stating what went wrong and passes with the fix."""
    from repogym.quality.synth_history import mine_history
    from repogym.scenarios import reports

    sdists = tmp_path / "sdists"
    _sdist(sdists, "1.1", NEW, RAISING_TESTS)
    _sdist(sdists, "1.2", RAISING, RAISING_TESTS)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    res = mine_history(
        "rgdemo", tmp_path / "out", versions=["1.1", "1.2"], reruns=1, say=lambda m: None
    )
    [folder] = res.written
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == (
        "tests/test_rgdemo.py::test_clamp_rejects_reversed_bounds",
    )
    script = (folder / "reproduction.py").read_text()
    assert "pytest.raises(ValueError)" in script and "raise AssertionError(" in script
    assert f"Reproduction:\n\n```python\n{script}```" in task.statement
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and reports.fails_itself(before.stderr), before.stderr
    assert before.stderr.rstrip().endswith("AssertionError: Failed: DID NOT RAISE ValueError")
    assert after == 0


def test_a_statement_from_failures_shows_no_memory_address():
    """sqlparse's failures read `<Identifier 'foo' at 0x7FFB7DCE7BD0>`: an address differs
    on every run and says nothing of the bug."""
    from types import SimpleNamespace

    from repogym.quality.synth_history import failure_description

    gold = "--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-    return tokens[:2]\n+    return tokens\n"
    task = SimpleNamespace(name="sqlparse", gold=gold, fail_to_pass=["tests/t.py::test_a"])
    text = failure_description(
        task,
        {
            "tests/t.py::test_a": (
                "AssertionError: assert 2 == 4 + where 2 = len("
                "[<Identifier 'foo' at 0x7FFB7DCE7BD0>, "
                "<Parenthesis '(c1)' at 0x7FFB7DCE41D0>])"
            )
        },
    )
    assert text is not None and "<Identifier 'foo'>" in text and "0x" not in text, text


MIXIN_INIT = """\
class ClampMixin:
    high = 10

    def test_caps_at_high(self):
        self.assertEqual(self.clamp(15, 0, self.high), self.high)

    def test_keeps_inside(self):
        self.assertEqual(self.clamp(3, 0, self.high), 3)
"""
MIXIN_TESTS = """\
import unittest

from rgdemo import clamp, describe

from . import ClampMixin


class ClampTest(ClampMixin, unittest.TestCase):
    clamp = staticmethod(clamp)

    def test_describe(self):
        self.assertEqual(describe(2), "value 2")
"""


def test_a_failing_test_a_unittest_mixin_defines_gets_a_reproduction(tmp_path, monkeypatch):
    """cachetools' layout: the test methods live in a mixin of the tests package and use a
    class attribute of the concrete TestCase (``self.clamp``). The test alone cannot stand
    as a script, so the miner inlines its body with what it uses of the class and the
    mixin, as synthesised bugs' reports do, and checks that script in the sandbox."""
    from repogym.quality.synth_history import mine_history
    from repogym.scenarios import reports

    sdists = tmp_path / "sdists"
    extra = {"tests/__init__.py": MIXIN_INIT}
    _sdist(sdists, "1.0", OLD, MIXIN_TESTS, extra)
    _sdist(sdists, "1.1", NEW, MIXIN_TESTS, extra)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)
    res = mine_history(
        "rgdemo", tmp_path / "out", versions=["1.0", "1.1"], reruns=1, say=lambda m: None
    )
    [folder] = res.written
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::ClampTest::test_caps_at_high",)
    script = (folder / "reproduction.py").read_text()
    assert "high = 10" in script and "clamp = staticmethod(clamp)" in script, script
    assert "ClampMixin" not in script and "test_caps" not in script
    assert "def clamp" not in script  # test code is inlined, never the package's own
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and reports.fails_itself(before.stderr), before.stderr
    assert "AssertionError: 15 != 10" in before.stderr
    assert after == 0


# release 1.1 moved a space from describe into a module constant: describe put back alone
# (the constant is 1.1's) says "value  2", which release 1.0's own test_describe rejects
OLD_CONST = OLD.replace(
    '"""A demo package."""\n', '"""A demo package."""\n\nPREFIX = "value"\n'
).replace('return f"value {value}"', 'return f"{PREFIX} {value}"')
NEW_CONST = NEW.replace(
    '"""A demo package."""\n', '"""A demo package."""\n\nPREFIX = "value "\n'
).replace('return f"value {value}"', 'return f"{PREFIX}{value}"')


def test_a_revert_that_fails_the_older_releases_own_tests_is_no_task(tmp_path, monkeypatch):
    """``describe`` put back alone, beside 1.1's constant, fails release 1.0's own
    ``test_describe``, which 1.1's code passes: a state no release shipped, and no task,
    though 1.1's test fails there too. ``clamp`` put back fails only the test 1.0 itself
    failed (its bug): a task."""
    releases = {"1.0": OLD_CONST, "1.1": NEW_CONST}
    res = _mine(tmp_path, monkeypatch, releases)
    [pair] = res.pairs
    why = pair.skipped["rgdemo/__init__.py::describe"]
    assert why.startswith("reverted, it fails 1 of release 1.0's own tests that 1.1's code")
    assert "tests/test_rgdemo.py::test_describe" in why and why.endswith("no release shipped")
    [folder] = res.written
    toml = (folder / "task.toml").read_text()
    assert 'function = "clamp"' in toml and "also" not in toml
    # without the check, describe's revert is a task of its own
    res = _mine(tmp_path, monkeypatch, releases, out="unchecked", old_tests=False)
    assert len(res.written) == 2


def _cli_cache(tmp_path: Path) -> dict[str, str]:
    """A cache whose sdists are rgdemo's (written here), with environments, the sandbox's
    root file system and interpreter shared (built once by `make setup`)."""
    import os

    from repogym.sandbox.runtime import cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    for shared in ("envs", "rootfs", "python"):
        (cache_dir() / shared).mkdir(parents=True, exist_ok=True)
        (cache / shared).symlink_to(cache_dir() / shared)
    _sdist(cache / "sdists", "1.0", OLD)
    _sdist(cache / "sdists", "1.1", NEW)
    return {**os.environ, "REPOGYM_CACHE": str(cache), "COLUMNS": "200"}


def test_history_mines_several_packages_one_failing_without_stopping_the_others(
    tmp_path, monkeypatch, capsys
):
    """``repogym history A B``: each package in turn; one that cannot be mined says why and
    the others go on; ``--report`` lists every package mined."""
    import json

    from repogym import cli
    from repogym.scenarios import history

    sdists = tmp_path / "sdists"
    _sdist(sdists, "1.0", OLD)
    _sdist(sdists, "1.1", NEW)
    monkeypatch.setattr(pypi, "sdists_dir", lambda: sdists)

    def versions(name: str) -> list[str]:
        if name != "rgdemo":
            raise history.HistoryError(f"{name}: not on the package index")
        return ["1.0", "1.1"]

    monkeypatch.setattr(history, "release_versions", versions)
    report = tmp_path / "report.json"
    args = ["history", "rgnothing", "rgdemo", "--out", str(tmp_path / "out"), "--reruns", "1"]
    assert cli.main([*args, "--report", str(report)]) == 0
    captured = capsys.readouterr()
    assert "rgnothing: not on the package index" in captured.err
    assert "1 validated tasks from 1 release pairs of rgdemo" in captured.out
    data = json.loads(report.read_text())
    assert [p["name"] for p in data["packages"]] == ["rgdemo"]
    assert cli.main(["history", "a", "b", "--versions", "1.0,1.1", "--out", "x"]) == 2
    assert "--versions names one package's releases" in capsys.readouterr().err


def test_history_on_ray_writes_what_a_plain_run_writes(tmp_path):
    """``--ray local``: the package is mined as a Ray task (real Ray, real sandbox), its
    tasks written under --out as a plain run writes them."""
    pytest.importorskip("ray")
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "history", "rgdemo", "--versions", "1.0,1.1"]
        + ["--out", str(out), "--reruns", "1", "--workers", "1", "--ray", "local"],
        env=_cli_cache(tmp_path),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "1 validated tasks from 1 release pairs of rgdemo (0 dropped)" in res.stdout
    [folder] = [p for p in out.iterdir() if p.is_dir()]
    assert load_task(folder).test_spec.fail_to_pass == (
        "tests/test_rgdemo.py::test_clamp_caps_at_high",
    )


def test_a_mined_report_that_states_the_hidden_value_is_restated_on_other_inputs(
    tmp_path, monkeypatch
):
    """The failing test made a script asserts the literal the hidden test is sealed against
    ('the value is 2'); the miner writes the report on another input, its expected value
    computed with the fix in the sandbox, and says so."""
    from repogym.quality import restate

    old = OLD.replace('return f"value {value}"', 'return f"value: {value}"')
    new = OLD.replace('return f"value {value}"', 'return f"the value is {value}"')
    tests = TESTS.replace('describe(2) == "value 2"', 'describe(2) == "the value is 2"')
    said: list[str] = []
    res = _mine(tmp_path, monkeypatch, {"1.0": old, "1.1": new}, tests=tests, say=said.append)
    [folder] = res.written
    task = load_task(folder)
    assert task.test_spec.fail_to_pass == ("tests/test_rgdemo.py::test_describe",)
    assert [s for s in said if "report restated (" in s], "\n".join(said)
    assert "the value is 2" not in task.statement and not restate.leaked_in(task, task.statement)
    script = (folder / "reproduction.py").read_text()
    assert "the value is 3" in script and f"```python\n{script}```" in task.statement
    before, after = _reproduce(task, folder, script, tmp_path)
    assert before.returncode != 0 and after == 0


def test_a_replayed_report_beside_a_changelog_quote_keeps_the_statement_within_its_limit(
    tmp_path,
):
    """A task whose statement quotes the changelog gets a replayed report's script only if
    quote and script together fit the statement's limit (the report was cut to fit alone)."""
    from repogym.quality import synth_history
    from repogym.scenarios import history

    repo = tmp_path / "repo"
    (repo / "rgdemo").mkdir(parents=True)
    (repo / "rgdemo" / "__init__.py").write_text(NEW)
    fn = history.ChangedFunction("rgdemo/__init__.py", "clamp", "old", "new")
    quote = "From the changelog: clamp ignores its upper bound.\n"
    task = history.HistoryTask(
        "rgdemo", "1.0", "1.1", fn, repo, ["tests/test_rgdemo.py"], "tests",
        ["tests/test_rgdemo.py::test_clamp_caps_at_high"], [], OLD, quote, "changelog",
    )  # fmt: skip

    class Reporter:
        def __init__(self, script: str) -> None:
            self.script = script

        def report(self, *_):
            return "A report.\n", self.script

    fits = "from rgdemo import clamp\n\nassert clamp(15, 0, 10) == 10\n"
    room = history.MAX_STATEMENT_CHARS - len(history.full_statement(quote, fits))
    too_long = fits + "#" * (room + 1) + "\n"
    assert not synth_history._replayed(task, Reporter(too_long), {})
    assert task.reproduction is None
    assert synth_history._replayed(task, Reporter(fits), {})
    assert task.reproduction == fits and task.description == quote
    assert len(task.statement) <= history.MAX_STATEMENT_CHARS
