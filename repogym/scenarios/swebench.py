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

Rows of the SWE-bench family are accepted with their own field names (:func:`row_format`):
SWE-Gym rows are SWE-bench rows; a SWE-smith row has no ``test_patch`` and its ``patch``
*makes* the bug (repo/ is ``base_commit`` with it applied, the gold fix its reverse, the
hidden tests the repository's own files of the listed tests; ``base_commit`` defaults to
the commit in the mirror's name ``owner__name.<commit>``); an R2E-Gym row (``repo_name``,
``commit_hash``, ``execution_result_content``) starts from the fix commit's parent, its
generated test files become the hidden tests and its tests' outcomes before and after the
fix (the row's pytest ``-rA`` logs) give FAIL_TO_PASS and PASS_TO_PASS. An instance's own
``requirements``/``pip_packages`` and ``python`` become the task's ``[environment]``.

A grading run runs the union of the files that hold the FAIL_TO_PASS and PASS_TO_PASS tests
and the test files the test patch touches (a listed test in a file the patch does not touch
runs, from the pristine repository). ``repo/`` is written from ``base_commit``'s tree
through a throw-away index, so no commit, tag, reflog or object of the clone (the future fix
included) reaches the task; the env then makes its own one-commit history. Where
the hidden tests land (``tests_dest``) follows one rule: the deepest folder holding every
hidden test file, when that folder is a test folder (a path part named ``test``, ``tests``
or ``testing``); otherwise ``"."`` (the repository root), with ``tests/`` mirroring the
repo's paths. With ``"."`` the grader guards test files (``test_*.py``, ``*_test.py``,
``conftest.py``) instead of a whole folder, so fixes beside the tests are still graded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.sandbox.workspace import make_diff
from repogym.scenarios import swebench_runner as runner
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.importing import (
    MAX_FILE_BYTES,
    UnsafeTaskFile,
    check_relpath,
    check_tree,
    copy_file,
    staged_task,
)
from repogym.scenarios.jsonl import read_jsonl
from repogym.scenarios.patches import is_test_file, split_diff

REQUIRED = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "problem_statement",
)
_TEST_PARTS = {"test", "tests", "testing"}
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "HOME": "/nonexistent",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_TERMINAL_PROMPT": "0",
}


class InstanceError(ValueError):
    """An instance cannot be imported; the message names the instance, the cause, the fix."""


def read_instances(path: str | Path) -> list[dict[str, Any]]:
    """Instances from a JSONL file (one object per line) or a JSON list."""
    path = Path(path)
    text = path.read_text()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return read_jsonl(path, error=InstanceError, what="instance object")


def _test_list(inst: dict, key: str) -> list[str]:
    value = inst[key]
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InstanceError(
            f"{inst['instance_id']}: {key} must be a list of test ids (or a JSON string of one)"
        )
    return value


def _pytest_only(iid: str, ids: list[str], fmt: str) -> None:
    bad = [t for t in ids if "::" not in t]
    if bad:
        raise InstanceError(
            f"{iid}: {bad[0]!r} is not a pytest node id, and {fmt} rows are "
            "graded with pytest. Fix: import pytest-based rows only (SWE-bench "
            "rows may name other runners' tests)"
        )


def _test_path(node_id: str, iid: str) -> str:
    """The file of a listed test, checked to be a path inside the repository."""
    try:
        return check_relpath(node_id.split("::")[0], f"{iid}: test {node_id!r}")
    except UnsafeTaskFile as e:
        raise InstanceError(str(e)) from e


def task_id_for(instance_id: str) -> str:
    """A valid repogym id from an instance id (lowercase; other characters become '-')."""
    return re.sub(r"[^a-z0-9._-]", "-", instance_id.lower()).lstrip("._-") or "instance"


def _git(
    args: list[str], *, cwd: Path | None = None, env: dict | None = None, stdin: bytes | None = None
) -> bytes:
    res = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**_GIT_ENV, **(env or {})},
        input=stdin,
        capture_output=True,
        check=False,
    )
    if res.returncode != 0:
        raise InstanceError(f"git {' '.join(args)} failed: {res.stderr.decode().strip()}")
    return res.stdout


def export_tree(clone: Path, commit: str, dest: Path) -> None:
    """Write ``commit``'s tree to ``dest`` with no ``.git`` (through a temporary index)."""
    gitdir = _git(["rev-parse", "--absolute-git-dir"], cwd=clone).decode().strip()
    with tempfile.TemporaryDirectory(prefix="repogym-idx-") as tmp:
        env = {
            "GIT_DIR": gitdir,
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_WORK_TREE": str(dest),
        }
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


def _apply(patch: str, tree: Path, what: str, instance_id: str, *, reverse: bool = False) -> None:
    # The ceiling keeps git from treating an enclosing repository as the patch's root.
    env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    flags = ["-R"] if reverse else []
    res = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *flags, "-"],
        cwd=tree,
        input=patch.encode(),
        capture_output=True,
        env=env,
        check=False,
    )
    if res.returncode != 0:
        raise InstanceError(
            f"{instance_id}: {what} does not apply at base_commit: "
            f"{res.stderr.decode().strip()}. Fix: check base_commit"
        )


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


# -- the three row formats, made one ---------------------------------------------------
@dataclasses.dataclass
class Instance:
    """An instance of any supported format, normalised.

    Attributes:
        instance_id: Its id.
        repo: The repository name recorded as provenance.
        clones: Folder names under ``--repos`` that may hold its clone, first found wins.
        base_commit: The commit whose tree the task starts from (before ``bug``).
        fix: Patch that fixes the bug (against the task's repo/).
        bug: Patch that makes the bug from ``base_commit`` (SWE-smith), or "".
        test_patch: Patch that adds or changes tests (SWE-bench), or "".
        test_files: Extra test files, path -> text (R2E-Gym's generated tests).
        f2p: FAIL_TO_PASS node ids.
        p2p: PASS_TO_PASS node ids.
        statement: What the agent is told.
        requirements: pip specifiers of its dependencies ([] for none).
        python: Its Python version constraint ("" for any).
        format: ``swebench``, ``swesmith`` or ``r2e``.
        parser: swebench's log parser of a non-pytest instance ("" for pytest ids; see
            :mod:`repogym.scenarios.swebench_runner`).
        eval_script: The row's ``eval_script`` (swebench 5), where its test command is.
    """

    instance_id: str
    repo: str
    clones: list[str]
    base_commit: str
    fix: str
    bug: str
    test_patch: str
    test_files: dict[str, str]
    f2p: list[str]
    p2p: list[str]
    statement: str
    requirements: list[str]
    python: str
    format: str
    parser: str = ""
    eval_script: str = ""


def row_format(inst: dict[str, Any]) -> str:
    """``swebench`` (SWE-bench, SWE-Gym: a ``test_patch``), ``r2e`` (R2E-Gym: an
    ``execution_result_content``) or ``swesmith`` (SWE-smith: ``patch`` makes the bug)."""
    if "test_patch" in inst:
        return "swebench"
    if "execution_result_content" in inst or "repo_name" in inst:
        return "r2e"
    return "swesmith"


def _missing(inst: dict, keys: tuple[str, ...], fmt: str) -> None:
    if missing := [k for k in keys if k not in inst]:
        iid = inst.get("instance_id", inst.get("commit_hash", "?"))
        raise InstanceError(
            f"{iid}: missing keys {missing} for a {fmt} row (the format is "
            f"told by the keys: a SWE-bench row has test_patch, an R2E-Gym row "
            f"execution_result_content). Fix: each {fmt} instance needs "
            f"{', '.join(keys)}; --format names the format"
        )


def _requirements(inst: dict) -> tuple[list[str], str]:
    """An instance's own dependencies: ``requirements`` or ``pip_packages`` (a list or a
    whitespace-separated string) and ``python`` (``"3.9"`` means ``==3.9.*``)."""
    reqs: list[str] = []
    for key in ("requirements", "pip_packages"):
        value = inst.get(key) or []
        reqs += value.split() if isinstance(value, str) else [str(v) for v in value]
    python = str(inst.get("python") or "").strip()
    if re.fullmatch(r"\d+\.\d+", python):
        python = f"=={python}.*"
    return reqs, python


def _clone_names(repo: str) -> list[str]:
    """``owner/name`` -> ``owner__name``; a SWE-smith mirror ``swesmith/owner__name.abcd1234``
    also as ``owner__name`` (a clone of the original repository)."""
    names = [repo.replace("/", "__")]
    short = repo.split("/", 1)[1] if repo.startswith("swesmith/") else repo
    names += [short, re.sub(r"\.[0-9a-f]{7,40}$", "", short)]
    return list(dict.fromkeys(names))


def _swebench(inst: dict) -> Instance:
    _missing(inst, REQUIRED, "SWE-bench")
    reqs, python = _requirements(inst)
    f2p, p2p = _test_list(inst, "FAIL_TO_PASS"), _test_list(inst, "PASS_TO_PASS")
    parser = ""
    if not runner.is_pytest_ids(f2p + p2p):
        try:
            parser = runner.parser_name(inst, inst["repo"])
        except runner.RunnerError as e:
            raise InstanceError(f"{inst['instance_id']}: {e}") from e
    return Instance(
        inst["instance_id"],
        inst["repo"],
        _clone_names(inst["repo"]),
        inst["base_commit"],
        inst["patch"],
        "",
        inst["test_patch"],
        {},
        f2p,
        p2p,
        inst["problem_statement"],
        reqs,
        python,
        "swebench",
        parser,
        str(inst.get("eval_script") or ""),
    )


def _failing_statement(f2p: list[str]) -> str:
    listed = "\n".join(f"- `{t}`" for t in f2p)
    return f"These tests fail; fix the code so that they pass:\n\n{listed}\n"


def _swesmith(inst: dict) -> Instance:
    _missing(inst, ("instance_id", "repo", "patch", "FAIL_TO_PASS", "PASS_TO_PASS"), "SWE-smith")
    f2p, p2p = _test_list(inst, "FAIL_TO_PASS"), _test_list(inst, "PASS_TO_PASS")
    _pytest_only(inst["instance_id"], f2p + p2p, "SWE-smith")
    base = inst.get("base_commit") or ""
    if not base and (m := re.search(r"\.([0-9a-f]{7,40})$", inst["repo"])):
        base = m.group(1)  # SWE-smith names the mirror after the commit it starts from
    if not base:
        raise InstanceError(
            f"{inst['instance_id']}: no base_commit and none in the repo name. "
            "Fix: add base_commit (the commit the bug patch applies to)"
        )
    reqs, python = _requirements(inst)
    return Instance(
        inst["instance_id"],
        inst["repo"],
        _clone_names(inst["repo"]),
        base,
        "",
        inst["patch"],
        "",
        {},
        f2p,
        p2p,
        inst.get("problem_statement") or _failing_statement(f2p),
        reqs,
        python,
        "swesmith",
    )


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+::\S+)")


def _log_statuses(log: str) -> dict[str, str]:
    """node id -> status from a pytest ``-rA`` log's summary lines."""
    out = {}
    for line in log.splitlines():
        if m := _SUMMARY.match(line.strip()):
            out[m.group(2)] = m.group(1)
    return out


def _r2e(inst: dict, clone_of) -> Instance:
    _missing(
        inst,
        ("repo_name", "commit_hash", "problem_statement", "execution_result_content"),
        "R2E-Gym",
    )
    iid = inst.get("instance_id") or f"{inst['repo_name']}-{inst['commit_hash'][:8]}"
    try:
        run = json.loads(inst["execution_result_content"])
        commit = json.loads(inst.get("parsed_commit_content") or "{}")
    except (TypeError, ValueError) as e:
        raise InstanceError(
            f"{iid}: execution_result_content or parsed_commit_content is not JSON ({e})"
        ) from e
    files = dict(zip(run.get("test_file_names", []), run.get("test_file_codes", []), strict=False))
    before = _log_statuses(run.get("old_commit_res_stdout") or "")
    after = _log_statuses(run.get("new_commit_res_stdout") or "")
    passing = sorted(t for t, s in after.items() if s == "PASSED")
    f2p = [t for t in passing if before.get(t) != "PASSED"]
    p2p = [t for t in passing if before.get(t) == "PASSED"]
    if not files or not f2p:
        raise InstanceError(
            f"{iid}: no test files or no test that the commit fixes in "
            "execution_result_content. Fix: use a row with test_file_names/"
            "test_file_codes and the old and new commits' pytest -rA output"
        )
    dest = posixpath.dirname(_test_path(f2p[0], iid))
    clone = clone_of(_clone_names(inst["repo_name"]), iid, inst["repo_name"])
    new = inst["commit_hash"]
    old = (
        commit.get("old_commit_hash") or _git(["rev-parse", f"{new}^"], cwd=clone).decode().strip()
    )
    changed = _git(["diff", "--name-only", old, new], cwd=clone).decode().split()
    code = [
        f for f in changed if not is_test_file(f) and not _TEST_PARTS & set(PurePosixPath(f).parts)
    ]
    fix = _git(["diff", "--binary", old, new, "--", *code], cwd=clone).decode() if code else ""
    reqs, python = _requirements(inst)
    try:
        generated = {
            check_relpath(posixpath.join(dest, Path(str(n)).name), f"{iid}: test file"): str(c)
            for n, c in files.items()
        }
    except UnsafeTaskFile as e:
        raise InstanceError(str(e)) from e
    return Instance(
        iid,
        inst["repo_name"],
        _clone_names(inst["repo_name"]),
        old,
        fix,
        "",
        "",
        generated,
        f2p,
        p2p,
        inst["problem_statement"],
        reqs,
        python,
        "r2e",
    )


def normalise(inst: dict[str, Any], clone_of, fmt: str = "auto") -> Instance:
    """An instance of ``fmt`` (``auto``: :func:`row_format`) as an :class:`Instance`."""
    fmt = row_format(inst) if fmt == "auto" else fmt
    if fmt == "swebench":
        return _swebench(inst)
    if fmt == "swesmith":
        return _swesmith(inst)
    if fmt == "r2e":
        return _r2e(inst, clone_of)
    raise InstanceError(f"unknown format {fmt!r}. Fix: use auto, swebench, swesmith or r2e")


# -- writing the task ----------------------------------------------------------------
def _task_toml(
    task_id: str,
    inst: Instance,
    split: str,
    dest: str,
    test_files: list[str],
    timeout_s: float,
    run: tuple[str, dict[str, str]] | None = None,
) -> str:
    """task.toml; ``run``: (test command, generated node id -> test id) of a non-pytest
    instance, whose generated tests are listed instead of its own."""
    cmd = "python -m pytest -rA --tb=no -p no:cacheprovider " + " ".join(test_files)
    f2p, p2p = inst.f2p, inst.p2p
    parser_line, runner_meta = 'log_parser = "swebench"\n', ""
    if run is not None:
        command, tests = run
        f2p, p2p = list(tests)[: len(inst.f2p)], list(tests)[len(inst.f2p) :]
        parser_line = ""  # the generated tests report through the grader's channel
        runner_meta = (
            f"log_parser = {_toml_str(inst.parser)}\ntest_command = "
            f"{_toml_str(command)}\n\n[swebench.tests]\n"
            + "".join(f"{_toml_str(k)} = {_toml_str(v)}\n" for k, v in tests.items())
        )
    lists = "\n".join(
        f"{k} = [{', '.join(_toml_str(t) for t in v)}]"
        for k, v in (("fail_to_pass", f2p), ("pass_to_pass", p2p))
    )
    env = ""
    if inst.requirements or inst.python:
        spec = DependencySpec(tuple(sorted(dict.fromkeys(inst.requirements))), inst.python)
        env = "\n" + spec.to_toml()
    return f"""# Imported from a {inst.format} instance by `repogym import-swebench`.
id = {_toml_str(task_id)}
version = 0
statement_file = "STATEMENT.md"
split = {_toml_str(split)}
tags = [{_toml_str(inst.format)}, {_toml_str(inst.repo)}]
max_steps = 50

[verifier]
tests_dest = {_toml_str(dest)}
command = {_toml_str(cmd.strip())}
timeout_s = {timeout_s}
{parser_line}{lists}

[swebench]
instance_id = {_toml_str(inst.instance_id)}
repo = {_toml_str(inst.repo)}
base_commit = {_toml_str(inst.base_commit)}
{runner_meta}{env}"""


def _find_clone(repos: Path, names: list[str], iid: str, repo: str) -> Path:
    for name in names:
        if (repos / name).is_dir():
            return repos / name
    raise InstanceError(
        f"{iid}: no clone at {repos / names[0]}. Fix: git clone "
        f"https://github.com/{repo} {repos / names[0]}"
    )


def import_instance(
    inst: dict[str, Any],
    repos: Path,
    out: Path,
    *,
    split: str = "test",
    timeout_s: float = 300.0,
    fmt: str = "auto",
) -> Path:
    """Write one instance as a task folder under ``out``; returns the folder.

    Args:
        inst: The instance: a SWE-bench/SWE-Gym, SWE-smith or R2E-Gym row (see the module
            docstring and :func:`row_format`).
        repos: Folder of local clones, ``<owner>__<name>`` per repository.
        out: Parent folder for task folders.
        split: The tasks' split.
        timeout_s: The test spec's timeout.
        fmt: ``auto`` (from the row's keys), ``swebench``, ``swesmith`` or ``r2e``.

    Raises:
        InstanceError: a key is missing, the clone or commit is absent, a patch does not
            apply, or a test id is not a pytest node id.
    """

    def clone_of(names: list[str], iid: str, repo: str) -> Path:
        return _find_clone(repos, names, iid, repo)

    norm = normalise(inst, clone_of, fmt)
    iid = norm.instance_id
    clone = clone_of(norm.clones, iid, norm.repo)
    try:
        _git(["cat-file", "-e", norm.base_commit + "^{commit}"], cwd=clone)
    except InstanceError as e:
        raise InstanceError(
            f"{iid}: base_commit {norm.base_commit} is not in {clone}. "
            f"Fix: git -C {clone} fetch origin {norm.base_commit}"
        ) from e
    task_id = task_id_for(iid)
    try:
        with staged_task(out, task_id) as root:
            _write_task(norm, clone, root, split, timeout_s)
    except FileExistsError as e:
        raise InstanceError(f"{iid}: {e}") from e
    except UnsafeTaskFile as e:
        raise InstanceError(f"{iid}: {e}") from e
    return out / task_id


def _reverse(bug: str, repo: Path, iid: str) -> str:
    """The fix of a bug patch: the diff from the buggy ``repo`` back to the clean tree."""
    changes: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(prefix="repogym-unbug-") as tmp:
        clean = Path(tmp) / "clean"
        shutil.copytree(repo, clean, symlinks=True)
        _apply(bug, clean, "the reverse of patch", iid, reverse=True)
        for fp in split_diff(bug):
            for rel in fp.paths:
                path = clean / rel
                changes[rel] = path.read_text() if path.is_file() else None
    return make_diff(repo, changes)


def _write_task(inst: Instance, clone: Path, root: Path, split: str, timeout_s: float) -> None:
    iid = inst.instance_id
    export_tree(clone, inst.base_commit, root / "repo")
    check_tree(root / "repo", internal_links=True)  # no link out of it, sizes capped
    if inst.bug:
        _apply(inst.bug, root / "repo", "patch (the bug)", iid)
        inst.fix = _reverse(inst.bug, root / "repo", iid)
    after = root.parent / "after"
    shutil.copytree(root / "repo", after, symlinks=True)
    if inst.test_patch:
        _apply(inst.test_patch, after, "test_patch", iid)
    for rel, text in inst.test_files.items():
        if len(text.encode()) > MAX_FILE_BYTES:
            raise InstanceError(
                f"{iid}: generated test file {rel} is over {MAX_FILE_BYTES} "
                "bytes. Fix: drop the row"
            )
        (after / rel).parent.mkdir(parents=True, exist_ok=True)
        if (after / rel).is_symlink():
            (after / rel).unlink()  # written as a file, never through a link
        (after / rel).write_text(text)
    gold_check = root.parent / "gold"
    shutil.copytree(root / "repo", gold_check, symlinks=True)
    _apply(inst.fix, gold_check, "patch", iid)
    listed = [] if inst.parser else sorted({_test_path(t, iid) for t in inst.f2p + inst.p2p})
    patched = {
        check_relpath(fp.new, f"{iid}: test_patch")
        for fp in split_diff(inst.test_patch)
        if fp.new and fp.new != "/dev/null"
    }
    touched = sorted({p for p in patched if (after / p).is_file()} | set(inst.test_files))
    missing = [f for f in listed if not (after / f).is_file()]
    if missing:
        raise InstanceError(
            f"{iid}: listed tests are in {missing}, which the repository at "
            "base_commit does not have (nor the test patch). Fix: check the "
            "instance's test lists and base_commit"
        )
    hidden = touched or listed
    if not hidden:
        raise InstanceError(
            f"{iid}: test_patch adds no test file and the test ids name no "
            "file. Fix: check test_patch"
        )
    dest = hidden_tests_dest(hidden)
    (root / "tests").mkdir()
    for rel in hidden:
        target = root / "tests" / (rel if dest == "." else posixpath.relpath(rel, dest))
        try:  # never through a link: a repository's link could name a host file
            copy_file(after / rel, target)
        except UnsafeTaskFile as e:
            raise InstanceError(f"{iid}: hidden test {rel}: {e}") from e
    if inst.parser:
        run = _write_runner(inst, root, after, dest, touched, timeout_s)
        test_files = [next(iter(run[1])).split("::")[0]]
    else:  # the union of the files the tests are listed in and the test files it touches
        run = None
        test_files = sorted({*listed, *(p for p in touched if is_test_file(p))})
    (root / "solution.patch").write_text(inst.fix)
    (root / "STATEMENT.md").write_text(inst.statement.strip() + "\n")
    (root / "task.toml").write_text(
        _task_toml(task_id_for(iid), inst, split, dest, test_files, timeout_s, run)
    )


def _write_runner(
    inst: Instance, root: Path, after: Path, dest: str, touched: list[str], timeout_s: float
) -> tuple[str, dict[str, str]]:
    """The generated pytest file and swebench's parsers among the hidden tests of a
    non-pytest instance; returns (its test command, generated node id -> test id)."""
    iid = inst.instance_id
    try:
        command = runner.test_command(
            {"eval_script": inst.eval_script}, inst.repo, [p for p in touched if p.endswith(".py")]
        )
    except runner.RunnerError as e:
        raise InstanceError(f"{iid}: {e}") from e
    tests = runner.node_ids(dest, inst.f2p, inst.p2p)
    path = next(iter(tests)).split("::")[0]
    if (after / path).exists() or (after / posixpath.dirname(path) / runner.VENDOR_DIR).exists():
        raise InstanceError(
            f"{iid}: the repository already has {path} or "
            f"{runner.VENDOR_DIR}/ beside it, where the generated runner goes. "
            "Fix: rename that file in the row's repository"
        )
    timeout = max(10.0, timeout_s - 30.0)  # inside the grading run's own timeout
    (root / "tests" / runner.RUNNER_FILE).write_text(
        runner.runner_source(
            iid, inst.parser, command, tests, set(list(tests)[len(inst.f2p) :]), timeout
        )
    )
    runner.vendor_parsers(root / "tests" / runner.VENDOR_DIR)
    return command, tests


def import_swebench(
    instances: str | Path,
    repos: str | Path,
    out: str | Path,
    *,
    split: str = "test",
    timeout_s: float = 300.0,
    fmt: str = "auto",
) -> tuple[list[Path], list[str]]:
    """Import every instance of a JSONL file. Returns (task folders, errors)."""
    done, errors = [], []
    for inst in read_instances(instances):
        try:
            done.append(
                import_instance(
                    inst, Path(repos), Path(out), split=split, timeout_s=timeout_s, fmt=fmt
                )
            )
        except InstanceError as e:
            errors.append(str(e))
    return done, errors
