"""task.toml errors that tell the truth: unknown keys are refused with the nearest valid one,
and messages point only to files the project has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repogym.scenarios.task import TASK_KEYS, TaskError, load_task
from tests.conftest import write_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return write_task(tmp_path, "keys")


def load_error(folder: Path, old: str, new: str) -> str:
    toml = folder / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    with pytest.raises(TaskError) as e:
        load_task(folder)
    msg = str(e.value)
    assert msg.startswith(f"{toml}: ") and "Fix: " in msg
    return msg


@pytest.mark.parametrize(
    "old, new, expect",
    [
        (
            "fail_to_pass =",
            "fail_to_pas =",
            "key 'verifier.fail_to_pas': unknown key. Fix: did you mean 'fail_to_pass'?",
        ),
        (
            "timeout_s =",
            "timeout =",
            "key 'verifier.timeout': unknown key. Fix: did you mean 'timeout_s'?",
        ),
        (
            "max_steps =",
            "max_step =",
            "key 'max_step': unknown key. Fix: did you mean 'max_steps'?",
        ),
        ("[verifier]", "[verifer]", "key 'verifer': unknown key. Fix: did you mean 'verifier'?"),
        (
            'split = "test"',
            'split = "test"\nfail_to_pass = []',
            "key 'fail_to_pass': unknown key. Fix: move 'fail_to_pass' to the [verifier] table",
        ),
        (
            'tests_dest = "tests"',
            'tests_dest = "tests"\nsplit = "train"',
            "key 'verifier.split': unknown key. Fix: move 'split' to the top level",
        ),
        ('split = "test"', 'split = "test"\nzzz = 1', "The known keys at the top level are: "),
    ],
)
def test_unknown_keys_name_the_file_the_key_and_the_nearest_valid_one(task_dir, old, new, expect):
    assert expect in load_error(task_dir, old, new)


def test_unknown_key_is_reported_before_its_consequences(task_dir):
    # without the key check, the typo would surface as "no tests listed"
    text = (task_dir / "task.toml").read_text()
    (task_dir / "task.toml").write_text(
        re.sub(r"fail_to_pass = \[.*?\]\n", "", text, flags=re.DOTALL)
    )
    assert "did you mean 'pass_to_pass'" in load_error(task_dir, "pass_to_pass =", "pass_to_pas =")


def test_tables_owned_elsewhere_are_accepted_and_every_declared_key_loads(task_dir):
    toml = task_dir / "task.toml"
    extra = (
        '\n[environment]\nrequirements = ["attrs"]\n'
        '\n[mutation]\nequivalent = ["m1"]\n'
        '\n[swebench]\ninstance_id = "o__r-1"\nrepo = "o/r"\nbase_commit = "abc"\n'
    )
    text = toml.read_text().replace(
        "timeout_s = 60",
        'timeout_s = 60\nlog_parser = "junit"\n'
        'weights = { "tests/test_clamp.py::test_above" = 2.0 }\n'
        'ini_options = { markers = "slow: long tests" }',
    )
    toml.write_text(text + extra)
    task = load_task(task_dir)
    assert task.test_spec.weights == {"tests/test_clamp.py::test_above": 2.0}
    assert task.test_spec.ini_options == {"markers": "slow: long tests"}
    assert task.dependencies is not None and task.dependencies.requirements == ("attrs",)
    assert TASK_KEYS["mutation"] is None
    assert "did you mean 'base_commit'" in load_error(task_dir, "base_commit =", "base_comit =")


def test_every_known_key_is_documented():
    doc = (ROOT / "docs" / "authoring.md").read_text()
    for table, keys in TASK_KEYS.items():
        if table:
            assert f"[{table}]" in doc, table
        for key in keys or ():
            assert re.search(rf"\b{key}\b", doc), f"{table}.{key} is not in docs/authoring.md"


SHIPPED = [
    *(ROOT / "repogym").rglob("*.py"),
    *(ROOT / "bench").rglob("*.py"),
    *(ROOT / "docs").glob("*.md"),
    ROOT / "README.md",
    ROOT / "Makefile",
    ROOT / "pyproject.toml",
]


def test_nothing_shipped_cites_team_internal_files():
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        for stale in ("DESIGN.md", "FIELD-NOTES", "FIELD_NOTES", "../shared"):
            assert stale not in text, f"{path} cites {stale}"


def test_every_cited_doc_exists(task_dir):
    cited = {
        (path, doc)
        for path in SHIPPED
        for doc in re.findall(r"docs/([\w.-]+\.md)", path.read_text(encoding="utf-8"))
    }
    missing = sorted(
        f"{path.relative_to(ROOT)} cites docs/{doc}"
        for path, doc in cited
        if not (ROOT / "docs" / doc).is_file()
    )
    assert not missing, missing
    (task_dir / "solution.patch").unlink()
    with pytest.raises(
        TaskError,
        match=r"solution.patch file missing. Fix: add solution.patch "
        r"\(see docs/authoring.md\)",
    ):
        load_task(task_dir)


def test_a_plain_unified_diff_is_refused_not_graded_as_no_change(task_dir: Path):
    patch = task_dir / "solution.patch"
    with_headers = patch.read_text()
    assert with_headers.startswith("diff --git ")
    plain = with_headers[with_headers.index("--- ") :]  # what `diff -u` writes
    patch.write_text(plain)
    with pytest.raises(TaskError) as e:
        load_task(task_dir)
    msg = str(e.value)
    assert msg.startswith(f"{patch}: ") and "no 'diff --git a/PATH b/PATH'" in msg
    assert "Fix: write it with `git diff`" in msg
    patch.write_text(with_headers)
    assert load_task(task_dir).solution_patch.read_text() == with_headers
