"""The task folder format (docs/authoring.md) and its loader.

A task is a folder::

    <task>/
      task.toml            metadata, test spec ([verifier]) and dependencies
      repo/                the starting repository, as the agent sees it
      tests/               hidden tests (never inside the agent's sandbox)
      solution.patch       gold fix (git apply -p1 against repo/)
      alternatives/*.patch other correct fixes (must earn full reward)
      decoys/*.patch       wrong or test-gaming fixes (must not earn full reward)

Every problem found while loading raises :class:`TaskError` naming the file, the key and
the fix, so that a task written by someone else fails loudly and usefully.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from repogym.sandbox.base import PackageSite
from repogym.scenarios.dependencies import (
    ENV_KEYS,
    DependencySpec,
    SpecError,
    check_conflicts,
    locate,
    parse_spec,
)
from repogym.scenarios.patches import headerless

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
#: The splits a task can be in: ``train``, what a policy learns from; ``test``, held out
#: (a suite's evaluation split: for RealPy, bugs shipped in releases of packages that
#: ``train`` never holds); ``test_synthetic``, held out too, with bugs that were made
#: (mutations) rather than shipped.
SPLITS = ("train", "test", "test_synthetic")
#: The splits held out from training: a suite's package is in ``train`` or in these.
HELD_OUT = ("test", "test_synthetic")
#: What a task's pass_to_pass lists (``[verifier] p2p_scope``).
P2P_SCOPES = ("all", "module")

#: Every key task.toml may hold, table by table ("" is the top level). A table mapped to
#: None is accepted as it is: its contents are checked by the part that reads it. To add a
#: key, add it here (and document it in docs/authoring.md).
TASK_KEYS: dict[str, tuple[str, ...] | None] = {
    "": ("id", "version", "statement", "statement_file", "split", "tags", "max_steps"),
    "verifier": (
        "tests_dest",
        "command",
        "timeout_s",
        "fail_to_pass",
        "pass_to_pass",
        "weights",
        "log_parser",
        "ini_options",
        "rename_tests",
        "p2p_scope",
    ),
    "environment": ENV_KEYS,  # the task's own packages (repogym.scenarios.dependencies)
    "mutation": None,  # reviewed equivalent mutants (checked where they are used)
    # provenance of imported tasks; a non-pytest instance's runner (scenarios/swebench_runner)
    "swebench": ("instance_id", "repo", "base_commit", "log_parser", "test_command", "tests"),
    # provenance and image of a task imported from a Harbor folder (integrations/harbor_tasks)
    "harbor": (
        "name",
        "image",
        "workdir",
        "substituted",
        "missing",
        "noop_reward",
        "oracle_reward",
    ),
    # provenance of release-history tasks (repogym.scenarios.history)
    "history": ("package", "base", "fixed", "file", "function", "also", "statement_source"),
}
CandidateKind = Literal["gold", "alternative", "decoy"]
#: Options a test spec's command may not carry: they would select or stop the tests the grader
#: runs (its canaries included) or replace the grader's own configuration.
FORBIDDEN_OPTIONS = (
    "-k",
    "-m",
    "-x",
    "--exitfirst",
    "--maxfail",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--sw",
    "--stepwise",
    "--sw-skip",
    "--stepwise-skip",
    "--deselect",
    "--co",
    "--collect-only",
    "-c",
    "--config-file",
    "--rootdir",
    "--confcutdir",
    "--noconftest",
    "--pyargs",
    "-n",
    "--numprocesses",
    "--inifile",
)
#: The test command a task gets when task.toml names none.
DEFAULT_COMMAND = "python -m pytest -q -p no:cacheprovider"


#: Options a plugin's tests need to give the same outcomes in every grading: hypothesis
#: draws random examples unless seeded (a bug one grading finds, the next may not).
PLUGIN_OPTIONS = {"_hypothesis_pytestplugin": ("--hypothesis-seed=0",)}


def pytest_command(plugins: Iterable[str] = ()) -> str:
    """:data:`DEFAULT_COMMAND` loading ``plugins`` by name (``-p``; the grader turns plugin
    auto-loading off, so a task whose tests need a plugin of its dependencies names it),
    with the options of :data:`PLUGIN_OPTIONS`."""
    plugins = list(plugins)
    return " ".join(
        [
            DEFAULT_COMMAND,
            *(f"-p {p}" for p in plugins),
            *(o for p in plugins for o in PLUGIN_OPTIONS.get(p, ())),
        ]
    )


_PYTEST_PREFIXES = (
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
    ("pytest",),
    ("py.test",),
)


def pytest_args(command: str) -> list[str]:
    """The pytest arguments of a ``python -m pytest ...`` / ``pytest ...`` command.

    Raises:
        ValueError: not a pytest invocation, or an option the grader cannot allow (the
            message says the fix).
    """
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"cannot be parsed as a shell command ({e})") from e
    for prefix in _PYTEST_PREFIXES:
        if tuple(words[: len(prefix)]) == prefix:
            args = words[len(prefix) :]
            break
    else:
        raise ValueError(
            f"{command!r} does not run pytest. Fix: write it as 'python -m pytest "
            "[options] [test paths]'; the grader runs it with an isolated "
            "interpreter and its own configuration"
        )
    for a in args:
        name = a.split("=", 1)[0]
        short = any(len(o) == 2 and a.startswith(o) for o in FORBIDDEN_OPTIONS)
        if name in FORBIDDEN_OPTIONS or (short and not a.startswith("--")):
            raise ValueError(
                f"option {a!r} would select, stop or reconfigure the tests the "
                "grader runs. Fix: remove it; list the tests in fail_to_pass/"
                "pass_to_pass, and put pytest settings in [verifier] ini_options"
            )
        if any(ch in a for ch in ";|&$`<>\n"):
            raise ValueError(f"argument {a!r} has shell syntax. Fix: give pytest arguments only")
    return args


def folder_digest(root: Path) -> str:
    """sha256 of a folder's files: relative names, executable bits, bytes (symbolic links
    by their target, never followed; ``__pycache__`` and ``*.pyc`` left out)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.suffix == ".pyc":
                continue
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            if p.is_symlink():
                h.update(b"link\0" + os.readlink(p).encode())
            else:
                h.update(b"x" if os.access(p, os.X_OK) else b"-")
                h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


class TaskError(ValueError):
    """A task folder or its task.toml is malformed."""


def is_valid_id(task_id: str) -> bool:
    """True if ``task_id`` is a task id: one path component of lowercase letters, digits,
    '.', '_' and '-', starting with a letter or digit."""
    return bool(_ID_RE.fullmatch(task_id))


@dataclasses.dataclass(frozen=True)
class TestSpec:
    """A task's test spec: which hidden tests the grader runs, how, and how they score.

    Read from task.toml's ``[verifier]`` table (the format keeps that name; ``Verifier`` is
    this class's old name, kept as an alias).

    Attributes:
        command: The pytest command the tests run with (at the workspace root; the grader runs
            it through its isolated launcher, see :meth:`pytest_args`).
        tests_dest: Workspace-relative folder the hidden tests are copied into (merged).
        timeout_s: Wall-clock limit for a grading run.
        fail_to_pass: Node ids that fail before the fix and must pass after it.
        pass_to_pass: Node ids that pass before and must still pass after.
        weights: Optional per-node-id weights for partial credit (default 1.0).
        log_parser: ``junit`` (default: the grader's result channel) or ``swebench``
            (SWE-bench's pytest log parser, cross-checked with the channel).
        ini_options: pytest settings (``[pytest]`` ini keys) the tests need; the grader
            writes them into its own configuration, the only one pytest reads.
        rename_tests: Give the hidden tests fresh random names in every grading (default;
            turn off only for tests that depend on their own names).
        p2p_scope: Which passing tests pass_to_pass lists: ``all`` (every test that passes
            with the fix) or ``module`` (the test files that reach the changed code, and a
            sample of the rest: for a suite too slow to run whole in every grading).
        hash_seed: The ``PYTHONHASHSEED`` the tests run under (0; not a task.toml key:
            ``repogym suite audit --stability`` grades under another one to find tests
            whose outcome depends on it).
    """

    command: str
    tests_dest: str
    timeout_s: float
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    log_parser: str = "junit"
    ini_options: dict[str, str] = dataclasses.field(default_factory=dict)
    rename_tests: bool = True
    p2p_scope: str = "all"
    hash_seed: int = 0

    __test__ = False  # a name pytest would otherwise collect as a test class

    def pytest_args(self) -> list[str]:
        """The command's pytest arguments (checked when the task was loaded)."""
        return pytest_args(self.command)

    def plugins(self) -> tuple[str, ...]:
        """The plugins the command loads by name (``-p NAME``; :func:`pytest_command`'s
        ``plugins``), less the ``no:cacheprovider`` every command has."""
        words = self.command.split()
        return tuple(
            words[i + 1]
            for i, w in enumerate(words[:-1])
            if w == "-p" and words[i + 1] != "no:cacheprovider"
        )

    @property
    def all_tests(self) -> tuple[str, ...]:
        """Every listed node id, fail_to_pass first."""
        return self.fail_to_pass + self.pass_to_pass


#: Old name of :class:`TestSpec`.
Verifier = TestSpec


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One of a task's own patches: the gold fix, another correct fix, or a decoy.

    Attributes:
        kind: ``gold`` (solution.patch), ``alternative`` (must earn full reward) or ``decoy``
            (wrong or test-gaming: must not earn full reward).
        path: The patch file.
        name: Its path relative to the task folder (e.g. ``decoys/overfit.patch``).
    """

    kind: CandidateKind
    path: Path
    name: str

    @property
    def correct(self) -> bool:
        """True for the fixes that must earn full reward (gold and alternatives)."""
        return self.kind != "decoy"

    def read(self) -> str:
        return self.path.read_text(encoding="utf-8")


@dataclasses.dataclass(frozen=True)
class Task:
    """One bug-fix task loaded from a folder."""

    id: str
    version: int
    path: Path
    statement: str
    split: str
    tags: tuple[str, ...]
    max_steps: int
    test_spec: TestSpec
    #: The task's dependencies (``[environment]``), or None for the sandbox's default.
    dependencies: DependencySpec | None = None

    @property
    def verifier(self) -> TestSpec:
        """Old name of :attr:`test_spec`."""
        return self.test_spec

    @property
    def environment(self) -> DependencySpec | None:
        """Old name of :attr:`dependencies`."""
        return self.dependencies

    @property
    def env_id(self) -> str:
        """The Gymnasium id, ``repogym/<id>-v<version>``."""
        return f"repogym/{self.id}-v{self.version}"

    @property
    def repo_dir(self) -> Path:
        return self.path / "repo"

    def digest(self) -> str:
        """sha256 of every file of the task folder (names, modes and bytes; links by target,
        never followed): what a grading, a validation or a mutation score depends on."""
        return folder_digest(self.path)

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_patch(self) -> Path:
        return self.path / "solution.patch"

    @property
    def alternatives(self) -> list[Path]:
        return sorted((self.path / "alternatives").glob("*.patch"))

    @property
    def decoys(self) -> list[Path]:
        return sorted((self.path / "decoys").glob("*.patch"))

    def candidates(self) -> list[Candidate]:
        """Every patch the task ships (gold first, then alternatives, then decoys)."""

        def make(kind: CandidateKind, p: Path) -> Candidate:
            return Candidate(kind, p, str(p.relative_to(self.path)))

        return (
            [make("gold", self.solution_patch)]
            + [make("alternative", p) for p in self.alternatives]
            + [make("decoy", p) for p in self.decoys]
        )

    def sandbox_dependencies(self) -> PackageSite | None:
        """What this task's sandboxes bind: its built dependencies (None without any).

        Raises:
            DependenciesUnavailable: not built here, the interpreter does not meet its
                ``python`` constraint, or it installs a module repo/ provides (each message
                says the fix).
        """
        if self.dependencies is None:
            return None
        env = locate(self.dependencies, f"task {self.id!r}", str(self.path))
        paths = self.test_spec.ini_options.get("pythonpath", "").split()
        check_conflicts(env, self.repo_dir, paths, f"task {self.id!r}")
        return env.sandbox

    def sandbox_environment(self) -> PackageSite | None:
        """Old name of :meth:`sandbox_dependencies`."""
        return self.sandbox_dependencies()

    def info(self) -> dict[str, Any]:
        """What an agent may be told about the task (no hidden tests, no gold patch)."""
        return {
            "id": self.id,
            "env_id": self.env_id,
            "statement": self.statement,
            "split": self.split,
            "tags": list(self.tags),
            "max_steps": self.max_steps,
        }


def _err(file: Path, key: str, problem: str, fix: str) -> TaskError:
    return TaskError(f"{file}: key '{key}': {problem}. Fix: {fix}")


def _unknown_key(file: Path, table: str, key: str, allowed: Iterable[str]) -> TaskError:
    where = f"{table}.{key}" if table else key
    owner = next((t for t, keys in TASK_KEYS.items() if t != table and keys and key in keys), None)
    if owner is not None:
        place = f"the [{owner}] table" if owner else "the top level (before any [table])"
        fix = f"move {key!r} to {place}"
    else:
        near = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        known = ", ".join(sorted(allowed))
        fix = (f"did you mean {near[0]!r}? " if near else "") + (
            f"The known keys {'in [' + table + ']' if table else 'at the top level'} are: {known}"
        )
    return _err(file, where, "unknown key", fix)


def _check_keys(data: dict, file: Path) -> None:
    """Refuse keys that :data:`TASK_KEYS` does not know (typos would be silently ignored)."""
    for table, known in TASK_KEYS.items():
        section = data if table == "" else data.get(table)
        if known is None or not isinstance(section, dict):
            continue
        allowed = known + tuple(t for t in TASK_KEYS if t) if table == "" else known
        for key in section:
            if key not in allowed:
                raise _unknown_key(file, table, key, allowed)


def _get(data: dict, file: Path, key: str, typ: type | tuple, *, default: Any = ..., fix: str):
    if key not in data:
        if default is ...:
            raise _err(file, key, "missing", fix)
        return default
    value = data[key]
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is not bool):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise _err(file, key, f"expected {name}, got {type(value).__name__} {value!r}", fix)
    return value


def _node_ids(data: dict, file: Path, key: str) -> tuple[str, ...]:
    ids = _get(data, file, key, list, default=[], fix=f'set {key} = ["tests/test_x.py::test_y"]')
    for node in ids:
        if not isinstance(node, str) or "::" not in node:
            raise _err(
                file,
                f"verifier.{key}",
                f"{node!r} is not a pytest node id",
                "write ids as 'path/to/test_file.py::test_name' relative to the repo root",
            )
    return tuple(ids)


def _load_test_spec(data: dict, file: Path) -> TestSpec:
    if "verifier" not in data or not isinstance(data["verifier"], dict):
        raise _err(
            file,
            "verifier",
            "missing [verifier] table",
            "add a [verifier] table with command, fail_to_pass and pass_to_pass",
        )
    v = data["verifier"]
    f2p = _node_ids(v, file, "fail_to_pass")
    p2p = _node_ids(v, file, "pass_to_pass")
    if not f2p and not p2p:
        raise _err(
            file,
            "verifier.fail_to_pass",
            "no tests listed",
            "list at least one node id in fail_to_pass or pass_to_pass",
        )
    weights = _get(v, file, "weights", dict, default={}, fix="use a table of node id = number")
    for node, w in weights.items():
        if node not in f2p + p2p or not isinstance(w, int | float) or w < 0:
            raise _err(
                file,
                f"verifier.weights.{node}",
                "unknown node id or negative weight",
                "weight only listed node ids, with numbers >= 0",
            )
    tests_dest = _get(v, file, "tests_dest", str, default="tests", fix='e.g. tests_dest = "tests"')
    if tests_dest.startswith("/") or ".." in Path(tests_dest).parts:
        raise _err(
            file,
            "verifier.tests_dest",
            f"{tests_dest!r} leaves the workspace",
            "use a relative path inside the repo, e.g. 'tests'",
        )
    parser = _get(v, file, "log_parser", str, default="junit", fix='"junit" or "swebench"')
    if parser not in ("junit", "swebench"):
        raise _err(
            file, "verifier.log_parser", f"unknown parser {parser!r}", 'use "junit" or "swebench"'
        )
    command = _get(
        v, file, "command", str, default=DEFAULT_COMMAND, fix='e.g. command = "python -m pytest -q"'
    )
    try:
        pytest_args(command)
    except ValueError as e:
        raise _err(
            file, "verifier.command", str(e).split(". Fix: ")[0], str(e).split(". Fix: ")[-1]
        ) from e
    ini = _get(
        v,
        file,
        "ini_options",
        dict,
        default={},
        fix='a table of pytest ini keys, e.g. ini_options = { markers = "slow" }',
    )
    for key, value in ini.items():
        if not isinstance(value, str | int | float | bool | list) or key == "addopts":
            raise _err(
                file,
                f"verifier.ini_options.{key}",
                "not a pytest setting the grader can write (addopts is the grader's)",
                "use a string, number, boolean "
                "or list of strings; put options in the command instead of addopts",
            )
    return TestSpec(
        command=command,
        tests_dest=tests_dest,
        timeout_s=_get(v, file, "timeout_s", float, default=120.0, fix="a number of seconds"),
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        weights={k: float(w) for k, w in weights.items()},
        log_parser=parser,
        ini_options={
            k: "\n".join(map(str, x)) if isinstance(x, list) else str(x) for k, x in ini.items()
        },
        rename_tests=_get(v, file, "rename_tests", bool, default=True, fix="true or false"),
        p2p_scope=_scope(v, file),
    )


def _scope(v: dict, file: Path) -> str:
    scope = _get(v, file, "p2p_scope", str, default="all", fix='"all" or "module"')
    if scope not in P2P_SCOPES:
        raise _err(
            file,
            "verifier.p2p_scope",
            f"unknown scope {scope!r}",
            'use "all" (every other passing test is listed) or "module"',
        )
    return scope


def load_task(path: str | Path) -> Task:
    """Load and check one task folder.

    Raises:
        TaskError: naming the file, the key and the fix.
    """
    path = Path(path).resolve()
    file = path / "task.toml"
    if not file.is_file():
        raise TaskError(
            f"{path}: no task.toml. Fix: a task folder needs task.toml, repo/, "
            "tests/ and solution.patch (see docs/authoring.md)"
        )
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{file}: invalid TOML: {e}. Fix: correct the syntax") from e
    _check_keys(data, file)

    task_id = _get(data, file, "id", str, default=path.name, fix='e.g. id = "retry-zero"')
    if not is_valid_id(task_id):
        raise _err(
            file,
            "id",
            f"{task_id!r} is not a valid id",
            "use lowercase letters, digits, '.', '_' and '-'",
        )
    statement = _get(data, file, "statement", str, default="", fix="a string")
    if "statement_file" in data:
        sfile = path / _get(data, file, "statement_file", str, fix="a file name in the task folder")
        if sfile.is_symlink() or not sfile.resolve().is_relative_to(path):
            raise _err(
                file,
                "statement_file",
                f"{sfile} is a link or lies outside the task folder",
                "put the statement file itself in the task folder",
            )
        if not sfile.is_file():
            raise _err(
                file, "statement_file", f"{sfile} does not exist", "create it or fix the name"
            )
        statement = sfile.read_text()
    if not statement.strip():
        raise _err(
            file,
            "statement",
            "missing or empty",
            'add statement = "..." or statement_file = "STATEMENT.md"',
        )
    split = _get(data, file, "split", str, default="train", fix=f"one of {SPLITS}")
    if split not in SPLITS:
        raise _err(file, "split", f"{split!r} is not a split", f"use one of {SPLITS}")
    tags = _get(data, file, "tags", list, default=[], fix='e.g. tags = ["bugfix"]')
    max_steps = _get(data, file, "max_steps", int, default=30, fix="a positive integer")
    if max_steps < 1:
        raise _err(file, "max_steps", f"{max_steps} is not positive", "use e.g. max_steps = 30")
    version = _get(data, file, "version", int, default=0, fix="an integer >= 0")

    for name, kind in (("repo", "folder"), ("tests", "folder"), ("solution.patch", "file")):
        p = path / name
        if not (p.is_dir() if kind == "folder" else p.is_file()):
            raise TaskError(
                f"{path}: {name} {kind} missing. Fix: add {name} (see docs/authoring.md)"
            )
    for patch in [path / "solution.patch", *(path / "alternatives").glob("*.patch")] + [
        *(path / "decoys").glob("*.patch")
    ]:
        if patch.is_file() and headerless(patch.read_text(errors="surrogateescape")):
            raise TaskError(
                f"{patch}: a diff with no 'diff --git a/PATH b/PATH' file headers (a plain "
                "unified diff), which grading would read as no change. Fix: write it with "
                "`git diff` (or `git diff --no-index OLD NEW` and fix the paths), see "
                "docs/authoring.md"
            )
    if (path / "repo" / ".git").exists():
        raise TaskError(
            f"{path / 'repo' / '.git'}: repo/ must not contain .git. Fix: delete it; "
            "the env makes a one-commit history itself"
        )
    test_spec = _load_test_spec(data, file)
    _check_no_links(path, test_spec)
    return Task(
        id=task_id,
        version=version,
        path=path,
        statement=statement.strip() + "\n",
        split=split,
        tags=tuple(str(t) for t in tags),
        max_steps=max_steps,
        test_spec=test_spec,
        dependencies=_load_dependencies(data, file),
    )


def _check_no_links(path: Path, spec: TestSpec) -> None:
    """Refuse symbolic links where grading reads files on the host: anywhere in tests/
    (copied into every grading sandbox), the task's own folders and patches, and the
    repository's files of the listed tests (planted pristine at grading)."""
    for name in ("repo", "tests", "solution.patch", "alternatives", "decoys"):
        if (path / name).is_symlink():
            raise TaskError(
                f"{path / name}: a symbolic link. Fix: make it a real "
                f"{'file' if name.endswith('.patch') else 'folder'}"
            )
    for dirpath, dirnames, filenames in os.walk(path / "tests", followlinks=False):
        for name in dirnames + filenames:
            if os.path.islink(os.path.join(dirpath, name)):
                link = Path(dirpath, name)
                raise TaskError(
                    f"{link}: a symbolic link in the hidden tests (grading "
                    "would copy what it names on the host). Fix: replace it with "
                    "the file itself"
                )
    repo = path / "repo"
    for node in spec.all_tests:
        rel = node.split("::", 1)[0]
        target = repo / rel
        parts = [repo.joinpath(*Path(rel).parts[: i + 1]) for i in range(len(Path(rel).parts))]
        if ".." in Path(rel).parts or any(p.is_symlink() for p in parts):
            raise TaskError(
                f"{target}: the listed test's file is a symbolic link or leaves "
                "repo/ (grading copies it from the host). Fix: list tests by "
                "their real path inside the repository"
            )


def _load_dependencies(data: dict, file: Path) -> DependencySpec | None:
    if "environment" not in data:
        return None
    try:
        return parse_spec(data["environment"], file.parent)
    except SpecError as e:
        key = "environment" if e.key == "environment" else f"environment.{e.key}"
        raise _err(file, key, e.problem, e.fix) from e


def find_task_dirs(path: str | Path) -> list[Path]:
    """A task folder itself, or the task folders directly inside ``path``."""
    path = Path(path)
    if (path / "task.toml").is_file():
        return [path]
    if not path.is_dir():
        raise TaskError(f"{path}: not a folder. Fix: pass a task folder or a folder of them")
    dirs = sorted(p.parent for p in path.glob("*/task.toml"))
    if not dirs:
        raise TaskError(
            f"{path}: no task.toml here or in its sub-folders. Fix: pass a task "
            "folder (with task.toml) or a folder of task folders"
        )
    return dirs


def load_tasks(path: str | Path) -> list[Task]:
    """Load one task folder or every task folder inside ``path``."""
    return [load_task(p) for p in find_task_dirs(path)]


def select_tasks(
    tasks: Iterable[Task],
    *,
    split: str | None = None,
    tags: Iterable[str] | None = None,
    task_ids: Iterable[str] | None = None,
) -> list[Task]:
    """The one task filter (env, runner, trainers and CLI all use it), sorted by id.

    Args:
        tasks: The pool to choose from.
        split: Keep only tasks of this split (one of :data:`SPLITS`); None keeps every split.
        tags: Keep tasks that have any of these tags; None or empty keeps every task.
        task_ids: Keep exactly these ids; each must be in the pool (after ``split``/``tags``).

    Raises:
        ValueError: an unknown split or task id, or nothing left (the message says the fix).
    """
    pool = sorted(tasks, key=lambda t: t.id)
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}. Fix: use one of {SPLITS}")
    if split is not None:
        pool = [t for t in pool if t.split == split]
    tags = set(tags or ())
    if tags:
        pool = [t for t in pool if tags & set(t.tags)]
    if task_ids is not None:
        wanted = list(dict.fromkeys(task_ids))
        by_id = {t.id: t for t in pool}
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            hints = [m for u in unknown for m in difflib.get_close_matches(u, by_id, n=1)]
            near = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise ValueError(
                f"unknown task ids {unknown}{near} among the "
                f"{len(by_id)} tasks left after split={split!r}, "
                f"tags={sorted(tags) or None}. Fix: pick from `repogym tasks`"
            )
        pool = [by_id[i] for i in sorted(wanted)]
    if not pool:
        raise ValueError(
            f"no task matches split={split!r}, tags={sorted(tags) or None}, "
            f"task_ids={task_ids}. Fix: relax the filters (see `repogym tasks`)"
        )
    return pool
