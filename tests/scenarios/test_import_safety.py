"""Hostile task folders and rows: no write outside ``--out``, no host file read through a link.

Each importer (Harbor, SWE-bench, R2E-Gym) and the task loader are fed the inputs an
attacker would write: an id with ``..``, a node id that leaves the repository, a symbolic
link in the hidden tests or in the repository naming a host file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repogym.integrations.harbor import export_task, import_task
from repogym.scenarios.importing import UnsafeTaskFile, copy_tree
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.swebench import InstanceError, import_instance
from repogym.scenarios.task import TaskError, load_task
from tests.conftest import write_task

from ._tasks import git


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def exported(tmp_path):
    return export_task(registered_tasks()["retry-zero"], tmp_path / "harbor")


def test_harbor_id_with_dotdot_writes_nothing_anywhere(exported, tmp_path):
    meta = exported / "tests" / "repogym.toml"
    meta.write_text(meta.read_text().replace('id = "retry-zero"', 'id = "../escaped-task"'))
    out = tmp_path / "area" / "out"
    before = _tree(tmp_path)
    with pytest.raises(TaskError, match=r"id '\.\./escaped-task' is not a valid task id"):
        import_task(exported, out)
    assert _tree(tmp_path) - before <= {"area"}  # at most --out's parent, made empty
    assert not (tmp_path / "area" / "escaped-task").exists()


def test_harbor_link_in_hidden_tests_is_refused_and_nothing_is_left(exported, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST_SECRET_31337\n")
    os.symlink(secret, exported / "tests" / "hidden" / "test_leak.py")
    out = tmp_path / "out"
    with pytest.raises(TaskError, match=r"test_leak\.py: a symbolic link"):
        import_task(exported, out)
    assert not out.exists() or not any(out.iterdir())


def test_harbor_failed_load_after_copying_leaves_nothing(exported, tmp_path):
    meta = exported / "tests" / "repogym.toml"
    meta.write_text(meta.read_text().replace("max_steps = ", "max_steps = -"))
    out = tmp_path / "out"
    with pytest.raises(TaskError, match="max_steps"):
        import_task(exported, out)
    assert not any(out.iterdir())  # the staged copy was removed


def test_loader_refuses_links_where_grading_reads_host_files(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST_SECRET\n")
    folder = write_task(tmp_path)
    load_task(folder)
    os.symlink(secret, folder / "tests" / "data.txt")
    with pytest.raises(TaskError, match=r"tests/data\.txt: a symbolic link in the hidden tests"):
        load_task(folder)
    (folder / "tests" / "data.txt").unlink()
    # the repository's own copy of a listed test file is planted from the host at grading
    (folder / "repo" / "tests").mkdir()
    os.symlink(secret, folder / "repo" / "tests" / "test_clamp.py")
    with pytest.raises(TaskError, match="listed test's file is a symbolic link"):
        load_task(folder)
    (folder / "repo" / "tests" / "test_clamp.py").unlink()
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            'statement = "', f'statement_file = "../{secret.name}"\nxstatement = "'
        )
    )
    with pytest.raises(TaskError, match="statement_file"):
        load_task(folder)


def test_copy_tree_keeps_links_inside_a_repository_and_refuses_the_rest(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("x = 1\n")
    os.symlink("pkg/a.py", src / "alias.py")
    copy_tree(src, tmp_path / "copy", internal_links=True)
    assert os.readlink(tmp_path / "copy" / "alias.py") == "pkg/a.py"
    with pytest.raises(UnsafeTaskFile, match="alias.py: a symbolic link"):
        copy_tree(src, tmp_path / "copy2")
    os.symlink("../../outside", src / "pkg" / "out")
    with pytest.raises(UnsafeTaskFile, match="leaves the repository"):
        copy_tree(src, tmp_path / "copy3", internal_links=True)
    (src / "pkg" / "out").unlink()
    os.mkfifo(src / "fifo")
    with pytest.raises(UnsafeTaskFile, match="not a regular file"):
        copy_tree(src, tmp_path / "copy4", internal_links=True)


# -- SWE-bench / R2E-Gym rows ----------------------------------------------------------
@pytest.fixture
def linked_repo(tmp_path):
    """repos/acme__linky: a commit whose test file is a link to a host file."""
    secret = tmp_path / "host-secret.py"
    secret.write_text("def test_secret():\n    assert 'HOST_SECRET'\n")
    clone = tmp_path / "repos" / "acme__linky"
    (clone / "tests").mkdir(parents=True)
    (clone / "mod.py").write_text("def f():\n    return 1\n")
    (clone / "tests" / "test_ok.py").write_text(
        "from mod import f\n\n\ndef test_f():\n    assert f() == 2\n"
    )
    os.symlink(secret, clone / "tests" / "test_link.py")
    git("init", "-q", "-b", "main", cwd=clone)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "base", cwd=clone)
    base = git("rev-parse", "HEAD", cwd=clone).strip()
    fix = (
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -1,2 +1,2 @@\n"
        " def f():\n-    return 1\n+    return 2\n"
    )
    inst = {
        "instance_id": "acme__linky-1",
        "repo": "acme/linky",
        "base_commit": base,
        "patch": fix,
        "test_patch": "",
        "problem_statement": "f() must return 2.",
        "FAIL_TO_PASS": ["tests/test_ok.py::test_f"],
        "PASS_TO_PASS": [],
    }
    return {"repos": tmp_path / "repos", "inst": inst, "secret": secret}


def test_swebench_repository_link_to_a_host_file_is_refused(linked_repo, tmp_path):
    out = tmp_path / "out"
    inst = {**linked_repo["inst"], "PASS_TO_PASS": ["tests/test_link.py::test_secret"]}
    with pytest.raises(
        InstanceError,
        match=r"test_link\.py: a symbolic link .* leaves the "
        r"repository",
    ):
        import_instance(inst, linked_repo["repos"], out)
    assert not out.exists() or not any(out.iterdir())


def test_swebench_node_id_leaving_the_repository_is_refused(linked_repo, tmp_path):
    (linked_repo["repos"] / "acme__linky" / "tests" / "test_link.py").unlink()
    git("commit", "-qam", "drop the link", cwd=linked_repo["repos"] / "acme__linky")
    base = git("rev-parse", "HEAD", cwd=linked_repo["repos"] / "acme__linky").strip()
    out = tmp_path / "out"
    for bad in ("../../../../etc/hostname.py::test_x", "/etc/hostname.py::test_x"):
        inst = {**linked_repo["inst"], "base_commit": base, "PASS_TO_PASS": [bad]}
        with pytest.raises(InstanceError, match="absolute or leaves its folder"):
            import_instance(inst, linked_repo["repos"], out)
    assert not out.exists() or not any(out.iterdir())


def test_r2e_generated_test_path_leaving_the_repository_is_refused(linked_repo, tmp_path):
    clone = linked_repo["repos"] / "acme__linky"
    (clone / "tests" / "test_link.py").unlink()
    git("commit", "-qam", "drop the link", cwd=clone)
    old = git("rev-parse", "HEAD", cwd=clone).strip()
    (clone / "mod.py").write_text("def f():\n    return 2\n")
    git("commit", "-qam", "fix", cwd=clone)
    new = git("rev-parse", "HEAD", cwd=clone).strip()
    row = {
        "repo_name": "acme__linky",
        "commit_hash": new,
        "problem_statement": "x",
        "parsed_commit_content": json.dumps({"old_commit_hash": old}),
        "execution_result_content": json.dumps(
            {
                "test_file_names": ["test_1.py"],
                "test_file_codes": ["def test_a(): pass\n"],
                "old_commit_res_stdout": "FAILED ../../escape/test_1.py::test_a\n",
                "new_commit_res_stdout": "PASSED ../../escape/test_1.py::test_a\n",
            }
        ),
    }
    out = tmp_path / "out"
    with pytest.raises(InstanceError, match="absolute or leaves its folder"):
        import_instance(row, linked_repo["repos"], out)
    assert not (tmp_path / "escape").exists() and not (linked_repo["repos"] / "escape").exists()
