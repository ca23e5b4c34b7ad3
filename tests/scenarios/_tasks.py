"""Helpers that write small task folders (and their patches) for the tests."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "HOME": "/tmp",
    "PATH": os.environ["PATH"],
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}

#: A small pure-Python package on PyPI with its tests in the sdist, used by no suite.
PROJECT = "munch==4.0.0"

BUGGY = '''\
def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return value
'''
FIXED = BUGGY.replace(
    "    return value\n", "    if value > high:\n        return high\n    return value\n"
)
TESTS = """\
from mod import clamp


def test_upper():
    assert clamp(15, 0, 10) == 10


def test_inside():
    assert clamp(5, 0, 10) == 5
"""


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout


def diff(files: dict[str, str], changed: dict[str, str]) -> str:
    """The git diff that turns ``files`` into ``files`` updated with ``changed``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        git("init", "-q", cwd=root)
        git("add", "-A", cwd=root)
        git("commit", "-qm", "base", cwd=root)
        for name, text in changed.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        git("add", "-A", cwd=root)
        return git("diff", "--cached", cwd=root)


def write_task(
    root: Path,
    *,
    tests: str = TESTS,
    gold: str = FIXED,
    decoys: dict[str, str] | None = None,
    alternatives: dict[str, str] | None = None,
    f2p: tuple[str, ...] = ("tests/test_mod.py::test_upper",),
    p2p: tuple[str, ...] = ("tests/test_mod.py::test_inside",),
) -> Path:
    """A clamp task: repo/mod.py (buggy), hidden tests/test_mod.py; patches are new mod.py
    texts, turned into diffs."""
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "mod.py").write_text(BUGGY)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text(tests)
    base = {"mod.py": BUGGY}
    (root / "solution.patch").write_text(diff(base, {"mod.py": gold}))
    for folder, patches in (("decoys", decoys or {}), ("alternatives", alternatives or {})):
        (root / folder).mkdir()
        for name, text in patches.items():
            (root / folder / f"{name}.patch").write_text(diff(base, {"mod.py": text}))
    q = ", ".join
    (root / "task.toml").write_text(
        textwrap.dedent(f"""\
        id = "{root.name}"
        statement = "clamp ignores its upper bound"
        [verifier]
        tests_dest = "tests"
        command = "python -m pytest -q -p no:cacheprovider"
        timeout_s = 60
        fail_to_pass = [{q(f'"{t}"' for t in f2p)}]
        pass_to_pass = [{q(f'"{t}"' for t in p2p)}]
        """)
    )
    return root
