"""Fetching a shipped suite (``repogym suite fetch``) and building a manifest entry
(``repogym suite build``).

:func:`fetch` materialises a suite's packages (:mod:`repogym.scenarios.suites`): for each
package the sdist (downloaded with pip, hash-checked), its dependencies (built once), its
task folders, then ``repogym validate`` on every task not yet validated in this exact
version; the index of validated tasks is updated as each task finishes, so an interrupted
fetch resumes where it stopped and a second fetch does nothing.

:func:`build_entry` makes a package's manifest entry from ``repogym synth --pypi``'s
validated tasks (numbered ``<package>-<n>``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import json
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from repogym.grading.grader import GradeResult, code_digest
from repogym.quality import audit, leaks, restate
from repogym.quality.adversarial import AttackResult, forger_check
from repogym.quality.pool import grading_pool
from repogym.quality.ray_map import ray_map
from repogym.quality.synthesis import dropped_line, from_pypi
from repogym.quality.validate import PatchGrader, TaskReport, validate_tasks
from repogym.scenarios import dependencies as deps
from repogym.scenarios import history, suites
from repogym.scenarios.task import Task, load_task


@dataclasses.dataclass
class FetchReport:
    """What :func:`fetch` did.

    Attributes:
        validated: Task ids validated by this call.
        already: Task ids that were validated before (nothing done).
        failed: Task id -> its first validation failure.
        seconds: Wall time per phase (download+unpack, dependencies, validation, the
            adversarial check).
        forger_checked: Tasks validated by this call that the strongest task-blind attack
            (:func:`repogym.quality.adversarial.forger_check`) was graded on.
        forged: Of those, task id -> what the attack earned, for each task where it beat
            noop (resolved it in binary mode, without a fix).
    """

    validated: list[str] = dataclasses.field(default_factory=list)
    already: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    forger_checked: list[str] = dataclasses.field(default_factory=list)
    forged: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def usable(self) -> int:
        return len(self.validated) + len(self.already)


Events = Callable[[str, str], None]


def fetch(
    name: str,
    *,
    root: Path | None = None,
    packages: Iterable[str] | None = None,
    per_package: int | None = None,
    sandbox: str = "bwrap",
    workers: int = 1,
    reruns: int = 2,
    adversarial: bool = True,
    on_event: Events = lambda kind, text: None,
    ray: str | None = None,
) -> FetchReport:
    """Materialise and validate a suite (see the module docstring).

    Args:
        name: A shipped suite (``realpy``).
        root: Where to put it (default ``<cache>/suites/<name>``).
        packages: Only these packages.
        per_package: Only the first N tasks of each package (a sample).
        sandbox: Backend for validation.
        workers: Parallel grading runs.
        reruns: Gold runs per task in validation.
        adversarial: Also grade the strongest task-blind attack (binary mode, once) on each
            task validated now, through the same grader (templates) as validation.
        on_event: Called with ``(kind, text)``: ``package``, ``env``, ``task`` (a task is
            done; text is its id), ``fail``.
        ray: ``local`` or a Ray cluster's address: each package is fetched by a Ray task
            that reserves ``workers`` CPUs (:mod:`repogym.quality.ray_map`); ``root`` must
            then be a folder every node sees. Events come as each package finishes.

    Raises:
        SuiteError: unknown suite or package. (A task whose manifest patch does not apply
            to its sdist is a failed task of the report, with the fix; its package's
            other tasks go on.)
        PypiError: a download failed or its hash differs.
        DependenciesUnavailable: dependencies cannot be built.
    """
    suite = suites.load_suite(name)
    base = suites.suite_root(name, root)
    chosen = suite.select(packages)
    report = _new_report()
    jobs = [
        _PackageJob(name, str(base), e.name, per_package, sandbox, workers, reruns, adversarial)
        for e in chosen
    ]
    if not ray:  # one package after another, with live events
        for job, entry in zip(jobs, chosen, strict=True):
            on_event("package", f"{entry.name} {entry.version} ({entry.split}, {entry.kind})")
            merge_report(report, _fetch_job(job, on_event), base, job.package)
        return report
    for job, part in ray_map(_fetch_job, jobs, address=ray, cpus_each=workers):
        on_event("package", job.package)
        merge_report(report, part, base, job.package)
        for tid in [*part.validated, *part.already, *part.failed]:
            if tid in part.failed:
                on_event("fail", f"{tid}: {part.failed[tid]}")
            on_event("task", tid)
    return report


def _new_report() -> FetchReport:
    return FetchReport(
        seconds={"materialise": 0.0, "environments": 0.0, "validate": 0.0, "adversarial": 0.0}
    )


@dataclasses.dataclass(frozen=True)
class _PackageJob:
    """One package of a fetch, as a Ray task gets it (:func:`_fetch_job`)."""

    suite: str
    root: str
    package: str
    per_package: int | None
    sandbox: str
    workers: int
    reruns: int
    adversarial: bool


def _fetch_job(job: _PackageJob, on_event: Events = lambda kind, text: None) -> FetchReport:
    """Fetch one package of a suite (in this process, or as a Ray task)."""
    entry = next(e for e in suites.load_suite(job.suite).packages if e.name == job.package)
    report = _new_report()
    _fetch_package(entry, job, report, on_event)
    return report


def merge_report(report: FetchReport, part: FetchReport, base: Path, package: str) -> None:
    """Add ``part``, what fetching ``package`` did, to ``report``, once its tasks are in
    the index at ``base`` (a Ray task on a node that does not see ``base`` wrote them
    elsewhere).

    Raises:
        SuiteError: a task ``part`` validated is not in the index, with the fix.
    """
    index = suites.read_index(base)
    lost = [t for t in [*part.validated, *part.already] if t not in index]
    if lost:
        raise suites.SuiteError(
            f"{package}: the Ray task that fetched it recorded {len(lost)} tasks "
            f"({', '.join(lost[:3])}) that the index at {base} does not hold: it ran on a "
            "node that does not see this folder. Fix: --root on a file system every node "
            "mounts at the same path (e.g. NFS), or --ray local"
        )
    report.validated += part.validated
    report.already += part.already
    report.failed.update(part.failed)
    report.forger_checked += part.forger_checked
    report.forged.update(part.forged)
    for phase, seconds in part.seconds.items():
        report.seconds[phase] = report.seconds.get(phase, 0.0) + seconds


def _fetch_package(
    entry: suites.PackageEntry, job: _PackageJob, report: FetchReport, on_event: Events
) -> None:
    base, per_package, workers = Path(job.root), job.per_package, job.workers
    sandbox, reruns, adversarial = job.sandbox, job.reruns, job.adversarial
    start = time.monotonic()
    deps.build(
        entry.environment,
        on_start=lambda: on_event("env", f"building the dependencies of {entry.name}"),
    )
    report.seconds["environments"] += time.monotonic() - start
    start = time.monotonic()
    todo: dict[str, tuple[suites.TaskEntry, Path]] = {}
    ids = [t.id for t in entry.tasks][:per_package]
    unwritten: dict[str, str] = {}
    for task, folder, _written in suites.materialise(entry, base, ids, failed=unwritten):
        if suites.is_validated(base, entry, task):
            report.already.append(task.id)
            on_event("task", task.id)
        else:
            todo[task.id] = (task, folder)
    for task_id, error in unwritten.items():  # the package's other tasks go on
        suites.drop_validated(base, task_id)
        report.failed[task_id] = error
        on_event("fail", f"{task_id}: {error}")
        on_event("task", task_id)
    report.seconds["materialise"] += time.monotonic() - start

    noops: dict[str, dict[str, str]] = {}

    def done(r: TaskReport) -> None:
        task, folder = todo[r.task_id]
        noops[r.task_id] = r.noop_tests
        seals = seal_record(r.strongly, r.witnessed[1]) if r.witnessed else None
        suites.record_validated(base, entry, task, folder, r.ok, seals)
        if r.ok:
            report.validated.append(r.task_id)
        else:
            report.failed[r.task_id] = r.failures[0] if r.failures else "failed"
            on_event("fail", f"{r.task_id}: {report.failed[r.task_id]}")
        on_event("task", r.task_id)

    start = time.monotonic()
    tasks = [load_task(f) for _, f in todo.values()]
    with PatchGrader(sandbox) as grader:
        if tasks:
            validate_tasks(
                tasks,
                sandbox=sandbox,
                reruns=reruns,
                workers=workers,
                on_report=done,
                grader=grader,
            )
        report.seconds["validate"] += time.monotonic() - start
        if adversarial and tasks:
            start = time.monotonic()
            checked = [t for t in tasks if t.id in report.validated]
            _forger_checks(checked, grader, report, workers, base, noops)
            report.seconds["adversarial"] += time.monotonic() - start
        start = time.monotonic()
        index = suites.read_index(base)
        stale = [
            load_task(Path(index[t]["path"]))
            for t in report.already
            if t in index and index[t].get("seals", {}).get("grader") != measure_digest()
        ]
        broken = set()
        for task, seals in measure_seals(stale, grader=grader, workers=workers):
            if isinstance(seals, str):  # gold fails under this grading code: not validated
                broken.add(task.id)
                suites.drop_validated(base, task.id)
                report.already.remove(task.id)
                report.failed[task.id] = seals
                on_event("fail", f"{task.id}: {seals}")
            else:
                suites.record_seals(base, task.id, seals)
        stale = [t for t in stale if t.id not in broken]
        if adversarial and stale:
            _forger_checks(stale, grader, report, workers, base, {})
        report.seconds["seals"] = report.seconds.get("seals", 0.0) + time.monotonic() - start
    start = time.monotonic()
    _record_scope(base, sandbox, entry.distribution)
    report.seconds["scope"] = report.seconds.get("scope", 0.0) + time.monotonic() - start


def _record_scope(base: Path, sandbox: str, package: str) -> None:
    """Record, for each validated task of ``package`` that has none yet, how many of its
    pass_to_pass tests reach the code its fix changes (:func:`audit.scope`: the package's
    suite run once, traced, on the fixed code)."""
    index = suites.read_index(base)
    todo = [
        load_task(Path(info["path"]))
        for info in index.values()
        if info.get("package") == package and "scope" not in info
    ]
    for found in audit.scope(todo, sandbox=sandbox):
        for task_id, reaching in found.reaching().items():
            suites.record_scope(base, task_id, reaching)


def measure_digest() -> str:
    """The digest a seal measure is recorded under: the grading code's
    (:func:`repogym.grading.grader.code_digest`) and the leak scan's, which decides which
    seals count as weak (a task measured before either changed is measured again)."""
    return hashlib.sha256((code_digest() + _file_digest(leaks.__file__)).encode()).hexdigest()


@functools.cache
def _file_digest(path: str) -> str:
    """sha256 of a file's bytes, read once per path (a fetch asks for each task)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def seal_record(witnessed: int, f2p: int) -> dict:
    """A task's seal measure as the suite index keeps it (:func:`suites.record_seals`)."""
    return {"grader": measure_digest(), "witnessed": witnessed, "f2p": f2p}


def measure_seals(
    tasks: list[Task], *, grader: PatchGrader, workers: int = 1
) -> Iterator[tuple[Task, dict | str]]:
    """Each task's fail_to_pass tests witnessed by a value seal, for tasks validated under
    other grading code: noop graded (gold recorded first where its checks need it), and the
    tests whose failure a strong check showed (less those the strongest attack passed, where
    its check is recorded). Gold is graded again too: a task whose gold patch does not
    resolve it under this grading code (a new seal form that breaks a test, or a test that
    does not hold on every run) comes with why (a ``str``) instead of its measure."""

    def both(task: Task) -> tuple[GradeResult, GradeResult]:
        gold = grader.grade(task, task.solution_patch.read_text(errors="surrogateescape"))
        return gold, grader.grade(task, "")

    with grading_pool(workers) as pool:
        for task, (gold, noop) in zip(tasks, pool.map(both, tasks), strict=True):
            if gold.infra_error or noop.infra_error:
                continue
            if not gold.resolved:
                failing = [t for t, s in sorted(gold.tests.items()) if s != "passed"]
                yield (
                    task,
                    (
                        f"graded again under this grading code ({code_digest()[:12]}), the "
                        f"gold patch does not resolve the task: {len(failing)} listed tests "
                        f"fail, e.g. {', '.join(failing[:3])}"
                        + (f"; {gold.untrusted}" if gold.untrusted else "")
                        + " (a grading change that breaks a test, or a test that does not "
                        "hold on every run: the next fetch validates the task anew)"
                    ),
                )
                continue
            f2p = len(task.test_spec.fail_to_pass)
            yield task, seal_record(len(noop.witnessed or ()), f2p)


def _forger_checks(
    tasks: list[Task],
    grader: PatchGrader,
    report: FetchReport,
    workers: int,
    base: Path,
    noops: dict[str, dict[str, str]],
) -> None:
    """The strongest task-blind attack on each validated task (one grading, every reward
    mode). The fail_to_pass tests it passed no longer count as witnessed, so each task's
    seal measure is recorded again from what is left."""

    def check(task: Task) -> AttackResult:
        return forger_check(task, grader, noops.get(task.id) or None)

    with grading_pool(workers) as pool:
        for task, res in zip(tasks, pool.map(check, tasks), strict=True):
            report.forger_checked.append(task.id)
            if res.beats_noop or res.error:
                report.forged[task.id] = res.error or (
                    f"{res.mode} reward {res.reward:.3f} (noop {res.noop_reward:.3f})"
                )
            if res.witnessed is not None:
                f2p = len(task.test_spec.fail_to_pass)
                suites.record_seals(base, task.id, seal_record(len(res.witnessed), f2p))


@dataclasses.dataclass(frozen=True)
class _BuildJob:
    """One package of a build, as a Ray task gets it (:func:`_build_job`)."""

    project: str
    options: tuple[tuple[str, object], ...]


def _build_job(
    job: _BuildJob, say: Callable[[str], None] = lambda m: None
) -> suites.PackageEntry | str:
    """:func:`build_entry` for one package (run as a Ray task, where nothing is said); a
    failure comes back as its message, so the other packages go on."""
    from repogym.scenarios.dependencies import DependenciesUnavailable
    from repogym.scenarios.pypi import PypiError
    from repogym.scenarios.synth import SynthError

    try:
        return build_entry(job.project, say=say, **dict(job.options))
    except (suites.SuiteError, PypiError, DependenciesUnavailable, SynthError) as e:
        return str(e)


def build_entries(
    projects: list[str], *, ray: str | None = None, say: Callable[[str], None] = print, **options
) -> Iterator[tuple[str, suites.PackageEntry | str]]:
    """:func:`build_entry` for each of ``projects`` (``options`` are its keyword
    arguments), as each one finishes: the entry, or why it failed. With ``ray`` (``local``
    or a cluster's address) each package is a Ray task that reserves ``workers`` CPUs;
    without it they are built one after another."""
    jobs = [_BuildJob(p, tuple(sorted(options.items()))) for p in projects]
    if ray:
        workers = int(options.get("workers", 1))
        for job, entry in ray_map(_build_job, jobs, address=ray, cpus_each=workers):
            yield job.project, entry
        return
    for job in jobs:
        yield job.project, _build_job(job, say)


def build_entry(
    project: str,
    *,
    split: str,
    kind: str,
    max_tasks: int,
    seed: int = 0,
    combined: float = 0.0,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
    sandbox: str = "bwrap",
    workers: int = 1,
    say: Callable[[str], None] = print,
) -> suites.PackageEntry:
    """A package's manifest entry from its validated synthesised tasks that a suite would
    serve (the seal floor after the forger's check, and a pass_to_pass test reaching each
    fix; :func:`repogym.quality.synthesis.screen`) (``combined``: the share of tasks with
    several bugs).

    Raises:
        SuiteError: no task validated.
    """
    with tempfile.TemporaryDirectory(prefix="repogym-suite-build-") as tmp:
        res = from_pypi(
            project,
            Path(tmp) / "tasks",
            max_tasks=max_tasks,
            seed=seed,
            combined=combined,
            extra=extra,
            drop=drop,
            sandbox=sandbox,
            workers=workers,
            split=split,
            served=True,
            say=say,
        )
        for task_id, failures in res.dropped.items():
            say(dropped_line(task_id, failures))
        if not res.written:
            raise suites.SuiteError(
                f"{project}: no task validated. Fix: try another seed or package"
            )
        tasks = [load_task(f) for f in res.written]
        first = tasks[0]
        dest = first.test_spec.tests_dest
        hidden = sorted(
            str(p.relative_to(first.tests_dir)) for p in first.tests_dir.rglob("*") if p.is_file()
        )
        if dest != ".":
            hidden = [f"{dest}/{h}" for h in hidden]
        name = res.sdist.name.lower()
        # from_pypi restated each report that stated a hidden value (and said so)
        entries = tuple(task_entry(t, f"{name}-{n}") for n, t in enumerate(tasks, 1))
        return suites.PackageEntry(
            name=name,
            version=res.sdist.version,
            sdist=res.sdist.path.name,
            sha256=res.sdist.sha256,
            split=split,
            kind=kind,
            environment=res.dependencies,
            ini_options=dict(first.test_spec.ini_options),
            tests_dest=dest,
            hidden=tuple(hidden),
            tasks=entries,
            tests=tuple(res.tests),
            plugins=tuple(res.plugins),
            timeout_s=int(first.test_spec.timeout_s),
            released=released_day(name, res.sdist.version, say),
        )


def released_day(name: str, version: str, say: Callable[[str], None] = print) -> str:
    """The day ``name`` ``version`` reached the package index (``YYYY-MM-DD``), for a
    manifest entry; "" (said why) where the index cannot tell."""
    from repogym.scenarios.history import HistoryError, release_date

    try:
        return release_date(name, version)
    except HistoryError as e:
        say(f"{name} {version}: no release day recorded ({e})")
        return ""


def restated(
    tasks: list[Task],
    entries: list[suites.TaskEntry],
    *,
    sandbox: str = "bwrap",
    say: Callable[[str], None] = print,
) -> tuple[suites.TaskEntry, ...]:
    """``entries`` (one per task, in order) with each report that states a hidden test's
    expected value restated on other inputs (:mod:`repogym.quality.restate`); a report
    that cannot be is kept, and the seal floor measures it."""
    found = restate.restate_all(tasks, sandbox=sandbox, say=lambda m: None)
    out = []
    for task, entry in zip(tasks, entries, strict=True):
        got = found.get(task.id)
        if isinstance(got, restate.Restated):
            say(f"{entry.id}: report restated ({got.change})")
            entry = dataclasses.replace(
                entry, statement=got.statement, reproduction=got.reproduction
            )
        elif got != restate.NO_LEAK:
            say(f"{entry.id}: its report states a hidden value and was not restated: {got}")
        out.append(entry)
    return tuple(out)


def task_entry(task: Task, task_id: str, origin: str | None = None) -> suites.TaskEntry:
    """A manifest entry for a built task folder (``origin``: where its bug comes from;
    by default ``combined`` for a task with partial-fix decoys, else ``mutation``)."""
    reproduction = task.path / "reproduction.py"
    decoys = {
        p.name: p.read_text() for p in task.decoys if not p.name.startswith("delete_failing_tests_")
    }
    if origin is None:
        origin = "combined" if any(n.startswith("partial_fix_") for n in decoys) else "mutation"
    first = (task.path / "task.toml").read_text().splitlines()[0]
    mutants = (
        tuple(first.split(": ", 1)[1].split(" + "))
        if first.startswith("# Synthesised by") and origin != "history"
        else ()
    )
    gold = task.solution_patch.read_text()
    return suites.TaskEntry(
        id=task_id,
        gold=gold,
        fail_to_pass=task.test_spec.fail_to_pass,
        pass_to_pass=task.test_spec.pass_to_pass,
        statement=task.statement,
        decoys=decoys,
        reproduction=reproduction.read_text() if reproduction.is_file() else "",
        p2p_scope=task.test_spec.p2p_scope,
        origin=origin,
        mutants=mutants,
        change=history.change_of(task.statement, gold) if origin == "history" else "bug",
    )


def write_entry(
    entry: suites.PackageEntry, folder: Path, *, suite: str, env_id: str, description: str
) -> Path:
    """Write ``entry`` as ``folder/<package>.json`` and list it in ``folder/suite.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry.name}.json"
    path.write_text(json.dumps(entry.to_json(), indent=1, ensure_ascii=False) + "\n")
    meta_path = folder / "suite.json"
    with open(folder / ".suite.lock", "w") as lock:  # builds of several packages at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta = (
            json.loads(meta_path.read_text())
            if meta_path.is_file()
            else {"name": suite, "env_id": env_id, "description": description, "packages": []}
        )
        meta["packages"] = sorted(set(meta["packages"]) | {entry.name})
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    (folder / ".suite.lock").unlink(missing_ok=True)
    return path


def _history(task: Task) -> dict:
    data = tomllib.loads((task.path / "task.toml").read_text())
    return data.get("history", {}) if isinstance(data.get("history"), dict) else {}


def _load_entries(folder: Path) -> dict[str, suites.PackageEntry]:
    out = {}
    for path in sorted(folder.glob("*.json")):
        if path.name != "suite.json":
            entry = suites.package_from_json(json.loads(path.read_text()), path)
            out[entry.name] = entry
    return out


def history_entries(
    folders: Iterable[Path],
    manifests: Path,
    *,
    split: str,
    kind: str,
    say: Callable[[str], None] = print,
) -> list[suites.PackageEntry]:
    """Manifest entries with the validated release-history tasks in ``folders`` (task
    folders with a ``[history]`` table, from ``repogym history``): the tasks of a release
    an entry of ``manifests`` already holds in the same ``split`` are added to it (same
    sdist, dependencies and tests; numbered after its tasks; one whose gold patch the entry
    already holds is left out, for a history mined again), the others go to an entry per
    release (``<package>-<version>``): a package's mutation tasks may be held out as
    ``test_synthetic`` while the bugs its releases shipped make up ``test``. A task
    without a reproduction is left out (a suite's statements are bug reports with one).

    Raises:
        SuiteError: a folder that is not a history task, or dependencies that differ
            from the entry's of the same release.
    """
    existing = _load_entries(manifests)
    groups: dict[tuple[str, str], list[Task]] = {}
    for folder in folders:
        task = load_task(folder)
        info = _history(task)
        if not info.get("package") or not info.get("fixed"):
            raise suites.SuiteError(
                f"{folder}: no [history] package/fixed in task.toml. Fix: "
                "give task folders written by `repogym history`"
            )
        if not (task.path / "reproduction.py").is_file():
            say(f"left out {task.id}: no reproduction.py")
            continue
        groups.setdefault((str(info["package"]).lower(), str(info["fixed"])), []).append(task)
    changed: list[suites.PackageEntry] = []
    for (name, version), tasks in sorted(groups.items()):
        entry = next(
            (
                e
                for e in existing.values()
                if e.distribution == name and e.version == version and e.split == split
            ),
            None,
        )
        if entry is None and f"{name}-{version}" in existing:
            raise suites.SuiteError(
                f"{manifests}: {name}-{version} is already an entry, in the "
                f"{existing[f'{name}-{version}'].split} split. Fix: add these tasks to that "
                "split, or move that entry"
            )
        if entry is None:
            entry = _release_entry(name, version, tasks[0], split=split, kind=kind, say=say)
        elif tasks[0].dependencies != entry.environment:
            raise suites.SuiteError(
                f"{tasks[0].path}: its dependencies differ from those of "
                f"{entry.name} {version} in the manifest. Fix: mine the "
                "history with the same pinned requirements, or rebuild both"
            )
        held = {t.gold.strip() for t in entry.tasks}
        for t in [t for t in tasks if t.solution_patch.read_text().strip() in held]:
            say(f"left out {t.id}: {entry.name} already holds its fix (the same gold patch)")
            tasks.remove(t)
        if not tasks:
            continue
        start = 1 + max((int(t.id.rsplit("-", 1)[1]) for t in entry.tasks), default=0)
        new = restated(
            tasks,
            [
                task_entry(t, f"{entry.name}-{start + i}", origin="history")
                for i, t in enumerate(tasks)
            ],
            say=say,
        )
        changed.append(dataclasses.replace(entry, tasks=entry.tasks + new))
        say(f"{entry.name} {version}: {len(new)} history tasks")
    return changed


def _release_entry(
    name: str, version: str, task: Task, *, split: str, kind: str, say: Callable[[str], None]
) -> suites.PackageEntry:
    """An entry for another release of ``name``, from one of its history tasks."""
    from repogym.scenarios import pypi

    sdist = pypi.download(f"{name}=={version}")
    v = task.test_spec
    hidden = sorted(
        str(p.relative_to(task.tests_dir)) for p in task.tests_dir.rglob("*") if p.is_file()
    )
    if v.tests_dest != ".":
        hidden = [f"{v.tests_dest}/{h}" for h in hidden]
    return suites.PackageEntry(
        name=f"{name}-{version}",
        pypi=name,
        version=version,
        sdist=sdist.path.name,
        sha256=sdist.sha256,
        split=split,
        kind=kind,
        environment=task.dependencies or deps.DependencySpec(requirements=()),
        ini_options=dict(v.ini_options),
        tests_dest=v.tests_dest,
        hidden=tuple(hidden),
        tasks=(),
        tests=tuple(sorted({*v.fail_to_pass, *v.pass_to_pass})),
        plugins=v.plugins(),
        timeout_s=int(v.timeout_s),
        released=released_day(name, version, say),
    )


def write_restated(folder: Path, restated: dict[str, restate.Restated]) -> list[Path]:
    """Put each restated report into the suite manifest in ``folder`` (its package's
    entry); returns the manifest files written."""
    meta = json.loads((folder / "suite.json").read_text())
    written = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "suite.json":
            continue
        entry = suites.package_from_json(json.loads(path.read_text()), path)
        if not any(t.id in restated for t in entry.tasks):
            continue
        tasks = tuple(
            dataclasses.replace(
                t, statement=restated[t.id].statement, reproduction=restated[t.id].reproduction
            )
            if t.id in restated
            else t
            for t in entry.tasks
        )
        written.append(
            write_entry(
                dataclasses.replace(entry, tasks=tasks),
                folder,
                suite=meta["name"],
                env_id=meta["env_id"],
                description=meta.get("description", ""),
            )
        )
    return written
