"""``.ci/strip_fmt_markers.py``: formatter markers go, nothing else changes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "strip_fmt_markers.py"


def _module():
    spec = importlib.util.spec_from_file_location("strip_fmt_markers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BEFORE = '''"""Docstring that mentions # fmt: skip stays."""
x = [1,  2]  # fmt: skip
# fmt: off
y = {"a":1}
    # fmt: on
z = f(a)  # noqa: E501  # fmt: skip
s = """
w = 1  # fmt: skip
"""
t = "# fmt: off"
u = 1  # a comment that stays
'''

AFTER = '''"""Docstring that mentions # fmt: skip stays."""
x = [1,  2]
y = {"a":1}
z = f(a)  # noqa: E501
s = """
w = 1  # fmt: skip
"""
t = "# fmt: off"
u = 1  # a comment that stays
'''


def test_only_the_marker_comments_go():
    strip = _module().strip
    assert strip(BEFORE) == AFTER
    assert strip(AFTER) == AFTER  # nothing left to strip
    crlf = BEFORE.replace("\n", "\r\n")
    assert strip(crlf) == AFTER.replace("\n", "\r\n")  # line endings kept


def test_the_script_strips_a_tree_and_leaves_the_task_folders(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ruff]\nextend-exclude = ["repogym/scenarios/builtin"]\n'
    )
    ours = tmp_path / "repogym" / "m.py"
    theirs = tmp_path / "repogym" / "scenarios" / "builtin" / "t" / "m.py"
    for path in (ours, theirs, tmp_path / "tests" / "t.py", tmp_path / "bench" / "b.py"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BEFORE)
    check = [sys.executable, str(SCRIPT), "--check", str(tmp_path)]
    assert subprocess.run(check, capture_output=True, check=False).returncode == 1
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], check=True, capture_output=True)
    assert ours.read_text() == AFTER
    assert (tmp_path / "tests" / "t.py").read_text() == AFTER
    assert (tmp_path / "bench" / "b.py").read_text() == AFTER
    assert theirs.read_text() == BEFORE  # a task folder holds user code: untouched
    assert subprocess.run(check, capture_output=True, check=False).returncode == 0
