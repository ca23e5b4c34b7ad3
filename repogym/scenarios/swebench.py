"""Import SWE-bench-format instances as repogym task folders.

An instance (one JSON object per line: ``instance_id``, ``repo``, ``base_commit``,
``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``problem_statement``; the
two test lists may be JSON strings, as in the SWE-bench datasets) becomes::

    <out>/<instance_id>/
      task.toml        log_parser = "swebench"; the test lists; provenance under [swebench]
      STATEMENT.md     problem_statement
      repo/            the tree at base_commit, exported without any git history
      tests/           the files test_patch touches, as they are after test_patch
      solution.patch   patch

``repo/`` is written from ``base_commit``'s tree through a throw-away index, so no
commit, tag, reflog or object of the clone (the future fix included) reaches the task;
the environment then makes its own one-commit history. Where the hidden tests land
(``tests_dest``) follows one rule: the deepest folder holding every file ``test_patch``
touches, when that folder is a test folder (a path part named ``test``, ``tests`` or
``testing``); otherwise ``"."`` (the repository root), with ``tests/`` mirroring the repo's
paths. With ``"."`` the grader guards test files (``test_*.py``, ``*_test.py``,
``conftest.py``) instead of a whole folder, so fixes beside the tests are still graded.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.scenarios.patches import is_test_file, split_diff

REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS",
            "PASS_TO_PASS", "problem_statement")
_TEST_PARTS = {"test", "tests", "testing"}
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
            "HOME": "/nonexistent", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_TERMINAL_PROMPT": "0"}


class InstanceError(ValueError):
    """An instance cannot be imported; the message names the instance, the cause, the fix."""


def read_instances(path: str | Path) -> list[dict[str, Any]]:
    """Instances from a JSONL file (one object per line) or a JSON list."""
    path = Path(path)
    text = path.read_text()
    if text.lstrip().startswith("["):
        return json.loads(text)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InstanceError(f"{path}:{n}: invalid JSON ({e}). Fix: one instance "
                                   "object per line") from e
    return out


def _test_list(inst: dict, key: str) -> list[str]:
    value = inst[key]
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InstanceError(f"{inst['instance_id']}: {key} must be a list of test ids (or a "
                           "JSON string of one)")
    bad = [t for t in value if "::" not in t]
    if bad:
        raise InstanceError(f"{inst['instance_id']}: {key} holds {bad[0]!r}, not a pytest "
                           "node id. Fix: only pytest-based instances can be imported")
    return value


def task_id_for(instance_id: str) -> str:
    """A valid repogym id from an instance id (lowercase; other characters become '-')."""
    return re.sub(r"[^a-z0-9._-]", "-", instance_id.lower()).lstrip("._-") or "instance"


def _git(args: list[str], *, cwd: Path | None = None, env: dict | None = None,
         stdin: bytes | None = None) -> bytes:
    res = subprocess.run(["git", *args], cwd=cwd, env={**_GIT_ENV, **(env or {})},
                         input=stdin, capture_output=True, check=False)
    if res.returncode != 0:
        raise InstanceError(f"git {' '.join(args)} failed: {res.stderr.decode().strip()}")
    return res.stdout


def export_tree(clone: Path, commit: str, dest: Path) -> None:
    """Write ``commit``'s tree to ``dest`` with no ``.git`` (through a temporary index)."""
    gitdir = _git(["rev-parse", "--absolute-git-dir"], cwd=clone).decode().strip()
    with tempfile.TemporaryDirectory(prefix="repogym-idx-") as tmp:
        env = {"GIT_DIR": gitdir, "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_WORK_TREE": str(dest)}
        dest.mkdir(parents=True)
        _git(["read-tree", commit], cwd=dest, env=env)
        _git(["checkout-index", "-a", "-f"], cwd=dest, env=env)


def hidden_tests_dest(paths: list[str]) -> str:
    """The workspace folder hidden tests go to (see the module docstring for the rule)."""
    parents = [posixpath.dirname(p) for p in paths]
    common = posixpath.commonpath(parents) if parents and all(parents) else ""
    if common and _TEST_PARTS & set(PurePosixPath(common).parts):
        return common
    return "."


def _apply(patch: str, tree: Path, what: str, instance_id: str) -> None:
    # The ceiling keeps git from treating an enclosing repository as the patch's root.
    env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    res = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=tree,
                         input=patch.encode(), capture_output=True, env=env, check=False)
    if res.returncode != 0:
        raise InstanceError(f"{instance_id}: {what} does not apply at base_commit: "
                           f"{res.stderr.decode().strip()}. Fix: check base_commit")


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def _task_toml(task_id: str, inst: dict, split: str, dest: str, test_files: list[str],
               f2p: list[str], p2p: list[str], timeout_s: float) -> str:
    cmd = "python -m pytest -rA --tb=no -p no:cacheprovider " + " ".join(test_files)
    lists = "\n".join(f"{k} = [{', '.join(_toml_str(t) for t in v)}]"
                      for k, v in (("fail_to_pass", f2p), ("pass_to_pass", p2p)))
    return f"""# Imported from a SWE-bench-format instance by `repogym import-swebench`.
id = {_toml_str(task_id)}
version = 0
statement_file = "STATEMENT.md"
split = {_toml_str(split)}
tags = ["swebench", {_toml_str(inst["repo"])}]
max_steps = 50

[verifier]
tests_dest = {_toml_str(dest)}
command = {_toml_str(cmd.strip())}
timeout_s = {timeout_s}
log_parser = "swebench"
{lists}

[swebench]
instance_id = {_toml_str(inst["instance_id"])}
repo = {_toml_str(inst["repo"])}
base_commit = {_toml_str(inst["base_commit"])}
"""


def import_instance(inst: dict[str, Any], repos: Path, out: Path, *, split: str = "test",
                    timeout_s: float = 300.0) -> Path:
    """Write one instance as a task folder under ``out``; returns the folder.

    Args:
        inst: The instance (see the module docstring for its keys).
        repos: Folder of local clones, ``<owner>__<name>`` per repository.
        out: Parent folder for task folders.
        split: The tasks' split.
        timeout_s: The verifier's timeout.

    Raises:
        InstanceError: a key is missing, the clone or commit is absent, a patch does not
            apply, or a test id is not a pytest node id.
    """
    missing = [k for k in REQUIRED if k not in inst]
    if missing:
        raise InstanceError(f"{inst.get('instance_id', '?')}: missing keys {missing}. Fix: "
                           f"each instance needs {', '.join(REQUIRED)}")
    iid = inst["instance_id"]
    f2p, p2p = _test_list(inst, "FAIL_TO_PASS"), _test_list(inst, "PASS_TO_PASS")
    clone = repos / inst["repo"].replace("/", "__")
    if not clone.is_dir():
        raise InstanceError(f"{iid}: no clone at {clone}. Fix: git clone "
                           f"https://github.com/{inst['repo']} {clone}")
    try:
        _git(["cat-file", "-e", inst["base_commit"] + "^{commit}"], cwd=clone)
    except InstanceError as e:
        raise InstanceError(f"{iid}: base_commit {inst['base_commit']} is not in {clone}. "
                           f"Fix: git -C {clone} fetch origin {inst['base_commit']}") from e
    root = out / task_id_for(iid)
    if root.exists():
        raise InstanceError(f"{iid}: {root} exists. Fix: remove it or choose another --out")
    staging = Path(tempfile.mkdtemp(prefix="repogym-import-"))
    try:
        _write_task(inst, clone, staging / "task", f2p, p2p, split, timeout_s)
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(staging / "task", root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def _write_task(inst: dict, clone: Path, root: Path, f2p: list[str], p2p: list[str],
                split: str, timeout_s: float) -> None:
    iid = inst["instance_id"]
    export_tree(clone, inst["base_commit"], root / "repo")
    after = root.parent / "after"
    shutil.copytree(root / "repo", after, symlinks=True)
    _apply(inst["test_patch"], after, "test_patch", iid)
    gold_check = root.parent / "gold"
    shutil.copytree(root / "repo", gold_check, symlinks=True)
    _apply(inst["patch"], gold_check, "patch", iid)
    touched = sorted({fp.new for fp in split_diff(inst["test_patch"])
                      if (after / fp.new).is_file()})
    if not touched:
        raise InstanceError(f"{iid}: test_patch adds or changes no file. Fix: check the "
                           "instance's test_patch")
    dest = hidden_tests_dest(touched)
    (root / "tests").mkdir()
    for rel in touched:
        target = root / "tests" / (rel if dest == "." else posixpath.relpath(rel, dest))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(after / rel, target)
    test_files = [p for p in touched if is_test_file(p)] or sorted(
        {t.split("::")[0] for t in f2p + p2p})
    (root / "solution.patch").write_text(inst["patch"])
    (root / "STATEMENT.md").write_text(inst["problem_statement"].strip() + "\n")
    (root / "task.toml").write_text(_task_toml(task_id_for(iid), inst, split, dest,
                                               test_files, f2p, p2p, timeout_s))


def import_swebench(instances: str | Path, repos: str | Path, out: str | Path, *,
                    split: str = "test", timeout_s: float = 300.0
                    ) -> tuple[list[Path], list[str]]:
    """Import every instance of a JSONL file. Returns (task folders, errors)."""
    done, errors = [], []
    for inst in read_instances(instances):
        try:
            done.append(import_instance(inst, Path(repos), Path(out), split=split,
                                        timeout_s=timeout_s))
        except InstanceError as e:
            errors.append(str(e))
    return done, errors
