"""Suites of tasks made from real PyPI packages: a committed manifest, materialised on demand.

A suite (docs/suites.md) is a folder ``suites/<name>/`` of package data holding
``suite.json`` (id, description) and one ``<package>.json`` per package: name, version,
the sdist's file name and sha256, its split (``train``, or a held-out one: ``test`` or
``test_synthetic``; a package is never in ``train`` and a held-out split both, so
evaluation is on packages never seen in training), its kind, the
pinned dependencies, its pytest plugins and settings, the hidden test files, every test
that passes on the sdist, and per task the gold patch (the reverse of the bug), the
failing tests, the pass_to_pass scope (``all``: every other passing test, not repeated per
task; ``module``: the list is given), the statement (a bug report), the reproduction
script, the decoys and where the bug comes from (``mutation``, ``combined``, ``history``).
No source of any package is committed.

:func:`materialise` turns a package entry into task folders under
``<cache>/suites/<name>/<package>/`` (the sdist downloaded with pip and hash-checked,
unpacked once; each task's ``repo/`` is the sdist without its test files and with the bug,
sharing unchanged files with the unpacked copy by hard links). A task folder is rewritten
only when its manifest entry changed, so materialising is idempotent and resumable. Which
tasks passed validation is recorded in ``index.json`` (:func:`record_validated`); those are
the tasks :func:`validated_tasks` returns and the registry registers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from repogym.sandbox.runtime import cache_dir
from repogym.scenarios.dependencies import DependencySpec, parse_spec
from repogym.scenarios.history import CHANGES
from repogym.scenarios.task import (
    HELD_OUT,
    P2P_SCOPES,
    SPLITS,
    Task,
    load_task,
    pytest_command,
)

MANIFESTS = Path(__file__).parent / "suites"
MAX_STEPS = 40
#: Changes when what an unpacked sdist holds changes (older copies are unpacked again).
_SOURCE_LAYOUT = "clean-1"
_GIT_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


class SuiteError(ValueError):
    """An unknown suite, a malformed manifest or a package that cannot be materialised."""


#: Where a task's bug comes from.
ORIGINS = ("mutation", "combined", "history")


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    """One task of a package: ``gold`` fixes the bug (``git apply -R`` makes it); ``decoys``
    besides the test-deletion ones, which are made from the sdist when materialising;
    ``pass_to_pass`` is every other passing test of the package when ``p2p_scope`` is
    ``all``."""

    id: str
    gold: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    statement: str
    decoys: dict[str, str]
    reproduction: str = ""
    p2p_scope: str = "all"
    origin: str = "mutation"
    #: The mutants of a synthesised bug (``file::function::operator(variant)@line:col``).
    mutants: tuple[str, ...] = ()
    #: What the change a history task reverts is, as its changelog entry says
    #: (:data:`CHANGES`): a task that reverts anything but a ``bug`` fix is withheld.
    change: str = "bug"

    @property
    def digest(self) -> str:
        """Changes whenever the entry does (a materialised folder is then rewritten); a
        ``change`` left at ``bug`` is not part of it (entries written before it existed
        keep their digest)."""
        fields = dataclasses.asdict(self)
        if fields["change"] == "bug":
            del fields["change"]
        data = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class PackageEntry:
    """One package of a suite (see the module docstring)."""

    name: str
    version: str
    sdist: str
    sha256: str
    split: str
    kind: str
    environment: DependencySpec
    ini_options: dict[str, str]
    tests_dest: str
    hidden: tuple[str, ...]
    tasks: tuple[TaskEntry, ...]
    tests: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    timeout_s: int = 120
    pypi: str = ""
    #: The day (``YYYY-MM-DD``) the release reached the package index: what a time split
    #: (``suite fetch --since``) compares; "" where not recorded (then looked up).
    released: str = ""

    @property
    def distribution(self) -> str:
        """The PyPI project: ``pypi`` for an entry of another release of a package
        (``semver-3.0.1``), else the entry's name."""
        return self.pypi or self.name

    @property
    def project(self) -> str:
        return f"{self.distribution}=={self.version}"

    def to_json(self) -> dict:
        head = {"pypi": self.pypi} if self.pypi else {}
        return {
            "name": self.name,
            **head,
            "version": self.version,
            **({"released": self.released} if self.released else {}),
            "sdist": self.sdist,
            "sha256": self.sha256,
            "split": self.split,
            "kind": self.kind,
            "environment": _spec_json(self.environment),
            "plugins": list(self.plugins),
            "ini_options": self.ini_options,
            "timeout_s": self.timeout_s,
            "tests_dest": self.tests_dest,
            "hidden": list(self.hidden),
            "tests": list(self.tests),
            "tasks": [self._task_json(t) for t in self.tasks],
        }

    def _task_json(self, t: TaskEntry) -> dict:
        out: dict = {
            "id": t.id,
            "origin": t.origin,
            **({"change": t.change} if t.change != "bug" else {}),
            **({"mutants": list(t.mutants)} if t.mutants else {}),
            "gold": t.gold,
            "fail_to_pass": list(t.fail_to_pass),
            "p2p_scope": t.p2p_scope,
        }
        if t.p2p_scope != "all" or t.pass_to_pass != all_others(self.tests, t.fail_to_pass):
            out["pass_to_pass"] = list(t.pass_to_pass)
        return {**out, "statement": t.statement, "reproduction": t.reproduction, "decoys": t.decoys}


def all_others(tests: Iterable[str], failing: Iterable[str]) -> tuple[str, ...]:
    """Every test of ``tests`` but the ``failing`` ones, in order (a task's pass_to_pass
    when its scope is ``all``)."""
    drop = set(failing)
    return tuple(t for t in tests if t not in drop)


@dataclasses.dataclass(frozen=True)
class Suite:
    """A suite's manifest: its gym id, description and packages."""

    name: str
    env_id: str
    description: str
    packages: tuple[PackageEntry, ...]

    @property
    def tasks(self) -> int:
        return sum(len(p.tasks) for p in self.packages)

    def select(self, names: Iterable[str] | None = None) -> list[PackageEntry]:
        """The entries of ``names`` (packages, or entries such as ``semver-3.0.1``; a
        package name selects every release of it); every entry for None.

        Raises:
            SuiteError: a name the suite does not have.
        """
        if names is None:
            return list(self.packages)
        out: list[PackageEntry] = []
        for name in names:
            found = [p for p in self.packages if name in (p.name, p.distribution)]
            if not found:
                raise SuiteError(
                    f"suite {self.name!r} has no package {name!r}. Fix: pick one "
                    f"of {sorted({p.distribution for p in self.packages})}"
                )
            out += [p for p in found if p not in out]
        return out


def _spec_json(spec: DependencySpec) -> dict:
    out: dict = {"requirements": list(spec.requirements)}
    for key in ("python", "setup", "exclude"):
        if value := getattr(spec, key):
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def suite_names() -> list[str]:
    """The suites repogym ships."""
    return sorted(p.parent.name for p in MANIFESTS.glob("*/suite.json"))


def package_from_json(data: dict, where: Path) -> PackageEntry:
    """A package entry from its JSON (``where``: the file, for messages).

    Raises:
        SuiteError: a malformed entry (naming the file and the fix).
    """
    return _package(data, where.with_suffix(""))


def _package(data: dict, where: Path) -> PackageEntry:
    try:
        tests = tuple(data.get("tests", ()))
        tasks = tuple(
            TaskEntry(
                t["id"],
                t["gold"],
                tuple(t["fail_to_pass"]),
                tuple(t["pass_to_pass"])
                if "pass_to_pass" in t
                else all_others(tests, t["fail_to_pass"]),
                t["statement"],
                dict(t["decoys"]),
                reproduction=t.get("reproduction", ""),
                p2p_scope=t.get("p2p_scope", "all"),
                origin=t.get("origin", "mutation"),
                mutants=tuple(t.get("mutants", ())),
                change=t.get("change", "bug"),
            )
            for t in data["tasks"]
        )
        entry = PackageEntry(
            name=data["name"],
            version=data["version"],
            sdist=data["sdist"],
            sha256=data["sha256"],
            split=data["split"],
            kind=data["kind"],
            environment=parse_spec(data["environment"], where.parent),
            ini_options=dict(data["ini_options"]),
            tests_dest=data["tests_dest"],
            hidden=tuple(data["hidden"]),
            tasks=tasks,
            tests=tests,
            plugins=tuple(data.get("plugins", ())),
            timeout_s=int(data.get("timeout_s", 120)),
            pypi=data.get("pypi", ""),
            released=str(data.get("released", "")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SuiteError(
            f"{where}: malformed package entry ({type(e).__name__}: {e}). Fix: "
            "rebuild it with `repogym suite build`"
        ) from e
    if entry.split not in SPLITS:
        raise SuiteError(f"{where}: split {entry.split!r}. Fix: use one of {SPLITS}")
    if entry.released and not re.fullmatch(r"\d{4}-\d\d-\d\d", entry.released):
        raise SuiteError(
            f"{where}: released {entry.released!r} is not a day. Fix: write it as YYYY-MM-DD"
        )
    for t in entry.tasks:
        if t.origin not in ORIGINS or t.p2p_scope not in P2P_SCOPES or t.change not in CHANGES:
            raise SuiteError(
                f"{where}: task {t.id}: origin {t.origin!r} / p2p_scope "
                f"{t.p2p_scope!r} / change {t.change!r}. Fix: use one of {ORIGINS} / "
                f"{P2P_SCOPES} / {CHANGES}"
            )
        if not t.pass_to_pass and not entry.tests:
            raise SuiteError(
                f"{where}: task {t.id} lists no pass_to_pass and the package "
                "no tests. Fix: rebuild it with `repogym suite build`"
            )
    return entry


def suite_meta(name: str) -> dict:
    """A shipped suite's ``suite.json`` (name, env_id, description, packages).

    Raises:
        SuiteError: no such suite.
    """
    path = MANIFESTS / name.lower() / "suite.json"
    if not path.is_file():
        raise SuiteError(f"unknown suite {name!r}. Fix: use one of {suite_names()}")
    return json.loads(path.read_text())


def load_suite(name: str) -> Suite:
    """A shipped suite's manifest.

    Raises:
        SuiteError: no such suite, or a malformed manifest file (named).
    """
    meta = suite_meta(name)
    folder = MANIFESTS / name.lower()
    packages = tuple(
        _package(json.loads((folder / f"{p}.json").read_text()), folder / p)
        for p in meta["packages"]
    )
    splits: dict[str, set[str]] = {}
    for p in packages:
        splits.setdefault(p.distribution, set()).add(p.split)
    if mixed := sorted(d for d, s in splits.items() if "train" in s and len(s) > 1):
        held = sorted(splits[mixed[0]] - {"train"})
        raise SuiteError(
            f"{folder}: {mixed[0]} has entries in train and in {held}. Fix: put every "
            f"entry of a package in train, or every one in the held-out splits {HELD_OUT}"
        )
    return Suite(meta["name"], meta["env_id"], meta["description"], packages)


# -- materialising ------------------------------------------------------------------------
def suite_root(name: str, root: Path | None = None) -> Path:
    """Where a suite is materialised: ``root`` or ``<cache>/suites/<name>``."""
    return Path(root) if root is not None else cache_dir() / "suites" / name.lower()


def _source(entry: PackageEntry, folder: Path) -> Path:
    """The unpacked sdist (downloaded and hash-checked on first use)."""
    from repogym.scenarios import pypi  # tarfile, zipfile, email: only when materialising

    src = folder / ".src"
    stamp = folder / ".src.sha256"
    want = f"{entry.sha256} {_SOURCE_LAYOUT}"
    if src.is_dir() and stamp.is_file() and stamp.read_text().strip() == want:
        return src
    sdist = pypi.download(entry.project, sha256=entry.sha256)
    shutil.rmtree(src, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    pypi.unpack(sdist, src)  # without compiled files and packaging metadata
    stamp.write_text(want + "\n")
    return src


def _link_tree(src: Path, dest: Path, skip: set[str]) -> None:
    """``dest`` as a copy of ``src`` made of hard links, without the paths in ``skip``."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        dirnames[:] = [d for d in dirnames if str(rel / d) not in skip]
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            if str(rel / f) in skip:
                continue
            s, d = Path(dirpath) / f, dest / rel / f
            if s.is_symlink():
                os.symlink(os.readlink(s), d)
            else:
                os.link(s, d)


def _git_apply(patch: str, cwd: Path, *args: str) -> None:
    env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": str(cwd.parent)}
    res = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *args, "-"],
        cwd=cwd,
        input=patch.encode(),
        capture_output=True,
        env=env,
        check=False,
    )
    if res.returncode != 0:
        raise SuiteError(
            f"{cwd}: a patch does not apply ({res.stderr.decode().strip()}). "
            "Fix: the sdist differs from the one the manifest was built from; "
            "rebuild the manifest"
        )


def _patched_files(patch: str) -> list[str]:
    return [
        line.split(" b/", 1)[1].strip()
        for line in patch.splitlines()
        if line.startswith("diff --git ")
    ]


def _tags(entry: PackageEntry, task: TaskEntry) -> list[str]:
    """A materialised task's tags: the suite, its package, where its bug comes from
    (``mutation``, ``combined``, ``history``), ``released:YYYY-MM-DD`` (the day its
    release reached the package index) where the manifest records it and, for a history
    task that reverts anything but a bug fix, that change's kind."""
    return (
        ["realpy", entry.distribution, task.origin]
        + ([f"released:{entry.released}"] if entry.released else [])
        + ([task.change] if task.change != "bug" else [])
    )


def _task_toml(entry: PackageEntry, task: TaskEntry) -> str:
    q = json.dumps
    ini = "".join(f"{k} = {q(v)}\n" for k, v in sorted(entry.ini_options.items()))
    command = pytest_command(entry.plugins)
    return (
        f"# Materialised from repogym's suite manifest ({entry.name} {entry.version}; "
        f"bug: {task.origin}).\n"
        f'id = {q(task.id)}\nversion = 0\nstatement_file = "STATEMENT.md"\n'
        f"split = {q(entry.split)}\ntags = {json.dumps(_tags(entry, task))}\n"
        f"max_steps = {MAX_STEPS}\n\n[verifier]\ntests_dest = {q(entry.tests_dest)}\n"
        f"command = {q(command)}\ntimeout_s = {entry.timeout_s}\n"
        f"p2p_scope = {q(task.p2p_scope)}\n"
        f"fail_to_pass = {json.dumps(list(task.fail_to_pass))}\n"
        f"pass_to_pass = {json.dumps(list(task.pass_to_pass))}\n"
        + (f"\n[verifier.ini_options]\n{ini}" if ini else "")
        + "\n"
        + entry.environment.to_toml()
    )


def _write_task(entry: PackageEntry, task: TaskEntry, src: Path, dest: Path) -> None:
    from repogym.scenarios.synth import deletion_decoys  # libcst: only when writing tasks

    tmp = Path(tempfile.mkdtemp(prefix=f".{task.id}-", dir=dest.parent))
    try:
        _link_tree(src, tmp / "repo", set(entry.hidden))
        for rel in _patched_files(task.gold):  # never write through a shared link
            path = tmp / "repo" / rel
            if path.is_file():
                data = path.read_bytes()
                if "\r" not in task.gold:
                    # a history miner reads a module as text (CRLF ends become LF), so its
                    # gold patch fits the module with LF ends: the task's file has them
                    data = data.replace(b"\r\n", b"\n")
                path.unlink()
                path.write_bytes(data)
        _git_apply(task.gold, tmp / "repo", "-R")
        for rel in entry.hidden:
            inside = (
                rel
                if entry.tests_dest == "."
                else str(PurePosixPath(rel).relative_to(entry.tests_dest))
            )
            (tmp / "tests" / inside).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, tmp / "tests" / inside)
        (tmp / "tests").mkdir(exist_ok=True)
        (tmp / "solution.patch").write_text(task.gold)
        (tmp / "decoys").mkdir()
        decoys = {**deletion_decoys(src, list(task.fail_to_pass)), **task.decoys}
        for name, patch in sorted(decoys.items()):
            (tmp / "decoys" / name).write_text(patch)
        (tmp / "STATEMENT.md").write_text(task.statement)
        if task.reproduction:
            (tmp / "reproduction.py").write_text(task.reproduction)
        (tmp / "HINTS.md").write_text(
            "The tests that fail with the bug:\n\n"
            + "".join(f"- `{t}`\n" for t in task.fail_to_pass)
        )
        (tmp / "task.toml").write_text(_task_toml(entry, task))
        (tmp / ".manifest").write_text(_stamp(entry, task) + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _stamp(entry: PackageEntry, task: TaskEntry) -> str:
    """What a materialised folder was written from: the task's digest, and its package's
    split and release day (which task.toml records, and which do not change how the task
    grades)."""
    return f"{task.digest} {entry.split} {entry.released}".rstrip()


def materialise(
    entry: PackageEntry,
    root: Path,
    tasks: Iterable[str] | None = None,
    *,
    failed: dict[str, str] | None = None,
) -> Iterator[tuple[TaskEntry, Path, bool]]:
    """Write ``entry``'s task folders under ``root/<package>/`` (only ``tasks`` ids if given).

    Args:
        failed: If given, a task whose patch does not apply to the sdist is recorded here
            (id -> the error) and left out, and the other tasks are written; if not, its
            error is raised.

    Yields:
        (task entry, its folder, whether it was (re)written now).

    Raises:
        PypiError: the sdist cannot be downloaded or its hash differs.
        SuiteError: a patch does not apply to the sdist (``failed`` not given).
    """
    folder = root / entry.name
    wanted = None if tasks is None else set(tasks)
    src: Path | None = None
    for task in entry.tasks:
        if wanted is not None and task.id not in wanted:
            continue
        dest = folder / task.id
        stamp = dest / ".manifest"
        if stamp.is_file() and stamp.read_text().strip() == _stamp(entry, task):
            yield task, dest, False
            continue
        src = src or _source(entry, folder)
        try:
            _write_task(entry, task, src, dest)
        except SuiteError as e:
            if failed is None:
                raise
            failed[task.id] = str(e)
            continue
        yield task, dest, True


# -- which tasks are usable -----------------------------------------------------------------
def _index_path(root: Path) -> Path:
    return root / "index.json"


def read_index(root: Path) -> dict[str, dict]:
    """Task id -> ``{"package", "split", "path", "digest"}`` of the validated tasks."""
    try:
        return dict(json.loads(_index_path(root).read_text())["tasks"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _write_index(root: Path, index: dict[str, dict]) -> None:
    tmp = _index_path(root).with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    root.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps({"tasks": dict(sorted(index.items()))}, indent=1) + "\n")
    os.replace(tmp, _index_path(root))


@contextlib.contextmanager
def _index_lock(root: Path) -> Iterator[None]:
    """Held while the index is read, changed and written: fetches of several packages at
    once (threads, or processes such as Ray tasks) must not lose each other's records."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".index.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def record_validated(
    root: Path,
    entry: PackageEntry,
    task: TaskEntry,
    folder: Path,
    ok: bool,
    seals: dict | None = None,
) -> None:
    """Add (``ok``) or remove a task from the index of validated tasks; ``seals`` is its
    seal measure (:func:`record_seals`)."""
    with _index_lock(root):
        index = read_index(root)
        if ok:
            index[task.id] = {
                "package": entry.distribution,
                "split": entry.split,
                "path": str(folder),
                "digest": task.digest,
                **({"change": task.change} if task.change != "bug" else {}),
            }
            if seals is not None:
                index[task.id]["seals"] = seals
        else:
            index.pop(task.id, None)
        _write_index(root, index)


#: The share of a task's fail_to_pass tests that a value seal must witness (their failure
#: on the unfixed code shown by a check whose hidden value a forger would have to name)
#: for a suite to serve the task by default.
SEAL_FLOOR = 0.9


def record_seals(root: Path, task_id: str, seals: dict) -> None:
    """Store a validated task's seal measure: ``{"grader": <grading code digest>,
    "witnessed": <fail_to_pass tests a value seal witnesses>, "f2p": <their number>}``."""
    with _index_lock(root):
        index = read_index(root)
        if task_id in index:
            index[task_id]["seals"] = seals
            _write_index(root, index)


def drop_validated(root: Path, task_id: str) -> None:
    """Take a task out of the index of validated tasks (the next fetch validates it anew)."""
    with _index_lock(root):
        index = read_index(root)
        if index.pop(task_id, None) is not None:
            _write_index(root, index)


def record_scope(root: Path, task_id: str, reaching: int | None) -> None:
    """Store how many of a validated task's pass_to_pass tests reach the code its fix
    changes, on the fixed code (``None``: the fix changes code outside every function,
    which every test may reach): ``repogym.quality.audit.scope``."""
    with _index_lock(root):
        index = read_index(root)
        if task_id in index:
            index[task_id]["scope"] = {"p2p_reaching": reaching}
            _write_index(root, index)


def withheld_reason(info: dict, grader: str | None = None) -> str | None:
    """Why an index entry is not served by default (None: it is): its fail_to_pass tests
    witnessed by a value seal are under :data:`SEAL_FLOOR`, or were never measured (or
    measured by other grading code than ``grader``, when given); or no pass_to_pass test
    reaches the code its fix changes (:func:`record_scope`), so gold with a regression
    elsewhere in that code would earn full reward."""
    if (change := info.get("change", "bug")) != "bug":
        return (
            f"it reverts a {change} change, not a bug fix (its changelog entry says so): "
            "the task asks for the change, not for a fix"
        )
    scope = info.get("scope")
    if isinstance(scope, dict) and scope.get("p2p_reaching") == 0:
        return (
            "no pass_to_pass test reaches the code its fix changes: a fix that breaks "
            "something else there would still earn full reward (`repogym suite audit --scope`)"
        )
    seals = info.get("seals")
    if not isinstance(seals, dict) or not seals.get("f2p"):
        return "seal floor not measured (run `repogym suite fetch` again)"
    if grader is not None and seals.get("grader") != grader:
        return "seal floor measured by another repogym (run `repogym suite fetch` again)"
    share = seals.get("witnessed", 0) / seals["f2p"]
    if share < SEAL_FLOOR:
        return (
            f"{seals.get('witnessed', 0)} of {seals['f2p']} fail_to_pass tests witnessed "
            f"by a value seal ({share:.0%} < {SEAL_FLOOR:.0%}): a forger that flips "
            "pytest's reports could earn the rest"
        )
    return None


def is_validated(root: Path, entry: PackageEntry, task: TaskEntry) -> bool:
    """True when the index holds this exact version of the task. A task validated while
    its package was in another split is still validated (the split does not change how it
    grades): the index is told the split it is in now."""
    with _index_lock(root):
        index = read_index(root)
        info = index.get(task.id, {})
        if info.get("digest") != task.digest:
            return False
        if info.get("split") != entry.split:
            info["split"] = entry.split
            _write_index(root, index)
    return True


def withheld_tasks(name: str, root: Path | None = None) -> dict[str, str]:
    """The validated tasks of a suite it does not serve by default, with why
    (:func:`withheld_reason`)."""
    index = read_index(suite_root(name, root))
    return {
        tid: why
        for tid, info in sorted(index.items())
        if (why := withheld_reason(info)) is not None
    }


def validated_tasks(
    name: str,
    root: Path | None = None,
    *,
    split: str | None = None,
    packages: Iterable[str] | None = None,
    withheld: bool = False,
) -> list[Task]:
    """The tasks of a suite that were materialised and validated here, as the suite's
    manifest has them now: a task the manifest no longer holds, or holds changed since it
    was validated (a newer repogym), is not one of them until fetched again. A task under
    the seal floor (:func:`withheld_reason`) is left out unless ``withheld`` (ask for it by
    name: ``repogym run --tasks ID``, ``gym.make("repogym/<id>-v0")``). ``packages`` names
    packages (``jinja2``) or entries of them (``jinja2-3.1.0``, one release's).

    Raises:
        SuiteError: none are (the message says how to fetch the suite).
    """
    suite = load_suite(name)
    base = suite_root(name, root)
    index = read_index(base)
    current = {t.id: (t.digest, p.split) for p in suite.packages for t in p.tasks}
    keep = None if packages is None else set(packages)
    chosen = {
        tid: info
        for tid, info in sorted(index.items())
        if (split is None or info["split"] == split)
        # a package's name, or one of its entries' (``jinja2-3.1.0``, as `suite fetch`
        # takes them): the folder a task is materialised in is its entry's
        and (keep is None or {info["package"], Path(info["path"]).parent.name} & keep)
        and Path(info["path"]).is_dir()
    }
    fresh = {
        tid: info
        for tid, info in chosen.items()
        if current.get(tid) == (info.get("digest"), info.get("split"))
    }
    served = {tid: info for tid, info in fresh.items() if withheld or withheld_reason(info) is None}
    out = [load_task(Path(info["path"])) for info in served.values()]
    if not out:
        stale = (
            f" ({len(chosen) - len(fresh)} validated from another version of its manifest)"
            if len(fresh) < len(chosen)
            else ""
        )
        held = (
            f" ({len(fresh)} withheld, under the seal floor or unreached by pass_to_pass "
            f"tests: `repogym suite show "
            f"{suite.name}` says why)"
            if fresh
            else ""
        )
        raise SuiteError(
            f"no validated task of suite {suite.name!r} here (split={split!r}, "
            f"packages={sorted(keep) if keep else 'all'}) under {base}{stale}"
            f"{held}. Fix: `repogym suite fetch {suite.name}` (downloads, builds "
            "and validates it)"
        )
    return out
