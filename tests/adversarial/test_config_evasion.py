"""Attack class 3: pytest configuration and conftest.py files the diff filter may not see.

pytest reads only the grader's own ini file (``-c``), so configuration in the workspace is
never read, however it is written: symlinked, hidden from the diff by ``.gitattributes``,
with escaped TOML keys. A ``conftest.py`` that is not the pristine repository's or the
hidden tests' stops the run (``conftest``, reward 0) however it got into the workspace:
under a quoted path, through a symlinked folder, or smuggled as a second, non-git patch
inside another file's part of the diff, which the path filter never sees.
"""

from __future__ import annotations

from tests.adversarial.conftest import RAN, assert_as_noop, assert_no_gain

PLUGIN = f"import posix\nposix._exit({RAN})\n"
ADDOPTS = "-p rg_plugin"


def test_workspace_pytest_configuration_is_never_read(attacker, backend):
    changes = {
        "rg_plugin.py": PLUGIN,
        "pytest.ini": "[pytest]\naddopts = -p rg_plugin\n",
        "tox.ini": "[pytest]\naddopts = -p rg_plugin\n",
        "setup.cfg": "[tool:pytest]\naddopts = -p rg_plugin\n",
        # a TOML key written with an escape, and a config hidden behind a symlink
        "pyproject.toml": f'[tool.pytest.ini_options]\n"add\\u006fpts" = "{ADDOPTS}"\n',
        "cfg/real.ini": f"[pytest]\naddopts = {ADDOPTS}\n",
        ".pytest.ini": "->cfg/real.ini",
        "tests_cfg/pytest.ini": "->../cfg/real.ini",
        # diffs show these as binary: a text filter cannot read them
        ".gitattributes": "*.ini binary\n*.cfg binary\n*.toml binary\n",
        "__init__.py": "",
    }
    res = attacker.grade(backend, changes)
    assert_as_noop(res, attacker.noop(backend))
    assert "pytest_config" in res.hack_flags


def _added(path: str, text: str, quoted: str | None = None) -> str:
    lines = text.splitlines()
    name = quoted or path
    head = f'diff --git "a/{name}" "b/{name}"\n' if quoted else f"diff --git a/{name} b/{name}\n"
    plus = f'"b/{name}"' if quoted else f"b/{name}"
    return (
        head + f"new file mode 100644\n--- /dev/null\n+++ {plus}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{x}\n" for x in lines)
    )


def _smuggled(carrier: str, path: str, text: str) -> str:
    """A git diff for ``carrier`` with a traditional (non-git) patch for ``path`` after its
    hunk: ``git apply`` applies both; a filter that reads ``diff --git`` headers sees one."""
    lines = text.splitlines()
    return (
        _added(carrier, "harmless\n") + f"--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{x}\n" for x in lines)
    )


def test_conftest_by_quoted_path_or_smuggled_patch_stops_the_run(attacker, backend):
    noop = attacker.noop(backend)
    for diff in (
        _added("conftest.py", PLUGIN, quoted="conf\\164est.py"),
        _smuggled("notes.txt", "conftest.py", PLUGIN),
        _smuggled("notes.txt", "tests/conftest.py", PLUGIN),
    ):
        res = attacker.grade(backend, diff=diff)
        assert res.verifier_exit_code != RAN, diff[:200]
        assert_no_gain(res, noop, "conftest")
        assert res.reward == 0.0 and res.untrusted


def test_conftest_through_a_symlinked_folder_is_dropped_or_refused(attacker, backend):
    changes = {
        "evil/conftest.py": PLUGIN,
        "tests/sub": "->../evil",
        "conftest_link.py": "->evil/conftest.py",
    }
    res = attacker.grade(backend, changes)
    assert res.verifier_exit_code != RAN
    assert_no_gain(res, attacker.noop(backend), "conftest")


def test_test_files_smuggled_past_the_filter_are_replanted(attacker, backend):
    noop = attacker.noop(backend)
    repo_copy = attacker.source("tests/test_retry.py").splitlines()
    emptied = (
        f"--- a/tests/test_retry.py\n+++ b/tests/test_retry.py\n"
        f"@@ -1,{len(repo_copy)} +1,2 @@\n"
        + "".join(f"-{x}\n" for x in repo_copy)
        + "+def test_zero_disables_retries():\n+    assert True\n"
    )
    res = attacker.grade(backend, diff=_added("notes.txt", "x\n") + emptied)
    assert "diff_apply_failed" not in res.hack_flags  # it was applied...
    assert_as_noop(res, noop)  # ...and the hidden tests were planted over it


def test_diff_filter_tricks_gain_nothing(attacker):
    """Renames, mode changes, binary patches and a symlink in place of the hidden tests'
    folder: the guarded paths are dropped, and what slips through is planted over or
    refused."""
    noop = attacker.noop("bwrap")
    rename = (
        "diff --git a/tests/test_retry.py b/notes/test_moved.py\nsimilarity index 100%\n"
        "rename from tests/test_retry.py\nrename to notes/test_moved.py\n"
    )
    mode = (
        "diff --git a/tests/test_retry.py b/tests/test_retry.py\nold mode 100644\nnew mode 100755\n"
    )
    folder = attacker.diff(
        {
            "tests/test_retry.py": None,
            "evil/test_retry.py": "def test_zero_disables_retries():\n    pass\n",
        }
    )
    link = (
        "diff --git a/tests b/tests\nnew file mode 120000\n--- /dev/null\n+++ b/tests\n"
        "@@ -0,0 +1 @@\n+evil\n\\ No newline at end of file\n"
    )
    binary = {".gitattributes": "* binary\n"}  # git diff writes GIT binary patches
    for diff in (
        rename,
        mode,
        folder + link,
        attacker.diff({**binary, "conftest.py": PLUGIN, "tests/conftest.py": PLUGIN}),
        attacker.diff(
            {**binary, "rg_plugin.py": PLUGIN, "pytest.ini": f"[pytest]\naddopts = {ADDOPTS}\n"}
        ),
    ):
        res = attacker.grade("bwrap", diff=diff)
        assert res.verifier_exit_code != RAN and res.infra_error is None, diff[:300]
        assert res.reward <= noop.reward and not res.resolved, diff[:300]
