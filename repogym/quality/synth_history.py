"""``repogym history NAME``: tasks from a package's release history, run in the sandbox.

For each pair of consecutive releases (N, N+1) (:mod:`repogym.scenarios.history`):
download both sdists, build N+1's dependencies (:func:`repogym.quality.synth_pypi.prepare`),
find N+1's tests that pass in the sandbox
(:class:`~repogym.quality.sandboxed_tests.SandboxRunner`), then for each function N+1
changed, put N's version back and rerun the tests that reach it. The tests that now fail
are the task's fail_to_pass (1 to :data:`~repogym.scenarios.history.MAX_F2P`; none missing),
every other test that passes on N+1 is its pass_to_pass. The statement is the changelog
entry of N+1 that describes the change when one is found (and gives nothing of the fix or
the tests away), else a description of what fails. Every task is then graded by
``repogym validate`` (noop, gold and reruns, decoys) and only the valid ones are written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from repogym.quality.restate import restate_valid
from repogym.quality.sandboxed_tests import SandboxRunner, run_reproduction
from repogym.quality.synth_pypi import prepare
from repogym.quality.validate import TaskReport, validate_tasks
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.base import WORKSPACE, PackageSite, SandboxError
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios import history, pypi, reports
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.synth import Reporter, SynthError, applied, deletion_decoys
from repogym.scenarios.task import load_task

#: Characters of one failure message in a statement made from the failures.
_MESSAGE_CHARS = 300

Describe = Callable[[history.HistoryTask, dict[str, str]], str | None]
#: ``(task, its folder as written) -> reproduction script or None``.
Reproduce = Callable[[history.HistoryTask, Path], str | None]


@dataclasses.dataclass
class PairReport:
    """What mining one release pair found.

    Attributes:
        base: Release N.
        fixed: Release N+1.
        changed: Functions N+1 changed.
        candidates: Task ids made (fail_to_pass found), before validation.
        skipped: ``file::function -> why`` for the changed functions that gave no task.
        error: Why the pair gave nothing at all (its sdist, dependencies or tests), or None.
        passing_tests: N+1's tests that pass in the sandbox.
    """

    base: str
    fixed: str
    changed: int = 0
    candidates: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    error: str | None = None
    passing_tests: int = 0


@dataclasses.dataclass
class HistoryMining:
    """What :func:`mine_history` did.

    Attributes:
        name: The package.
        pairs: One report per release pair.
        written: Task folders that validated, now under ``out``.
        dropped: Task id -> the validation failures that dropped it.
    """

    name: str
    pairs: list[PairReport]
    written: list[Path]
    dropped: dict[str, list[str]]


@dataclasses.dataclass(frozen=True)
class HistoryJob:
    """One package's mining (:func:`mine_history`'s arguments as plain data, so that a Ray
    task can carry it): ``options`` are its keyword arguments other than ``say``."""

    name: str
    out: str
    options: dict


def mine_job(job: HistoryJob, say: Callable[[str], None] | None = None) -> HistoryMining | str:
    """:func:`mine_history` for ``job`` (quietly without ``say``: a remote call has no
    console); a package that cannot be mined (a
    :class:`~repogym.scenarios.history.HistoryError` or an ``OSError``) comes back as the
    message, so the other packages go on."""
    try:
        return mine_history(job.name, Path(job.out), say=say or (lambda m: None), **job.options)
    except (history.HistoryError, OSError) as e:
        return f"{job.name}: {e}"


def mine_history(
    name: str,
    out: Path,
    *,
    versions: list[str] | None = None,
    last: int | None = 6,
    max_tasks: int | None = None,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
    skip_tests: Iterable[str] = (),
    sandbox: str = "bwrap",
    workers: int = 1,
    reruns: int = 3,
    timeout_s: float = 300.0,
    describe: Describe | None = None,
    reproduce: Reproduce | bool | None = None,
    say: Callable[[str], None] = print,
    on_report: Callable[[TaskReport], None] | None = None,
    since: str | None = None,
    for_suite: bool = False,
    old_tests: bool = True,
    restate: bool = True,
) -> HistoryMining:
    """Mine validated tasks from the release history of ``name``.

    Args:
        name: The PyPI project.
        out: Where valid task folders are written.
        versions: The releases to pair, oldest first (default: the index's final releases).
        last: Keep only the newest ``last`` pairs (None: every pair).
        max_tasks: Mine no further pair once this many tasks are written.
        extra: Requirements added to every release's derived dependencies.
        drop: Requirements removed from it.
        skip_tests: Test files (repository paths) left out of every task: neither run,
            hidden nor listed (for a file the grader cannot run, say so in its docs).
        sandbox: Sandbox backend.
        workers: Parallel grading runs when validating.
        reruns: Gold runs per task when validating.
        timeout_s: Limit of one test run.
        describe: ``(task, failure messages) -> statement`` for tasks whose changelog has
            no entry for the change (default: :func:`failure_description`).
        reproduce: ``(task, folder) -> reproduction script`` (default: the first of the
            failing tests made a script (:func:`repogym.scenarios.history.test_script`)
            that fails in the sandbox on the task's repo/ and passes with the gold fix, else
            the report of a call the reverted code answers differently, as synthesised bugs
            get);
            False: no reproductions.
        say: Progress messages.
        on_report: Called with each task's validation report.
        since: ``YYYY-MM-DD``: only the pairs whose newer release reached the package index
            on that day or later (:func:`repogym.scenarios.history.release_date`), after
            ``last`` picked them.
        for_suite: Validate and write only the candidates a suite serves: with a verified
            reproduction (``suite add-history`` takes no other) and reverting a bug fix
            (:func:`repogym.scenarios.history.change_of`; a feature, performance change or
            deprecation is withheld). The others are skipped before their validation,
            the costliest step, with the reason in the pair's report.
        old_tests: Check each task against release N's own tests: those that pass on N+1's
            code must pass with the task's functions reverted (:class:`OldTests`); a task
            that fails one is a state no release shipped, and is skipped.
        restate: Restate on other inputs each valid task's report that states a hidden
            test's expected value (:func:`repogym.quality.restate.restate_valid`; a report
            quoting the changelog keeps its quote).

    Raises:
        HistoryError: the releases cannot be listed, or fewer than two are given.
    """
    versions = history.sort_versions(versions) if versions else history.release_versions(name)
    pairs = history.consecutive_pairs(versions, last)
    if since is not None:  # a time split: fixes released on that day or later
        pairs = [(a, b) for a, b in pairs if history.release_date(name, b) >= since]
        if not pairs:
            raise history.HistoryError(
                f"{name}: no release of {versions} pairs with one released on {since} or "
                "later. Fix: an earlier --since, or more pairs (--last 0)"
            )
    if not pairs:
        raise history.HistoryError(
            f"{name}: {len(versions)} final release(s) ({versions}); "
            "a history task needs two consecutive ones. Fix: pick a "
            "package with several releases"
        )
    work = Path(tempfile.mkdtemp(prefix="repogym-history-"))
    result = HistoryMining(name, [], [], {})
    try:
        for base, fixed in pairs:
            if max_tasks is not None and len(result.written) >= max_tasks:
                break
            say(f"{name} {base} -> {fixed}")
            report = PairReport(base, fixed)
            result.pairs.append(report)
            folders: list[Path] = []
            try:
                folders = _mine_pair(
                    name,
                    base,
                    fixed,
                    work / fixed,
                    work / "tasks",
                    report,
                    extra=extra,
                    drop=drop,
                    skip_tests=skip_tests,
                    sandbox=sandbox,
                    timeout_s=timeout_s,
                    describe=describe,
                    reproduce=reproduce,
                    say=say,
                    for_suite=for_suite,
                    old_tests=old_tests,
                )
            except Exception as e:  # one pair's failure must not end the run
                report.error = f"{type(e).__name__}: {e}"
                say(f"  {base} -> {fixed}: {report.error[:400]}")
            written, dropped = _validate(
                folders, out, sandbox, workers, reruns, say, on_report, restate=restate
            )
            result.written += written
            result.dropped.update(dropped)
            shutil.rmtree(work / fixed, ignore_errors=True)
            shutil.rmtree(work / "tasks", ignore_errors=True)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mine_pair(
    name: str,
    base: str,
    fixed: str,
    work: Path,
    staging: Path,
    report: PairReport,
    *,
    extra: Iterable[str],
    drop: Iterable[str],
    skip_tests: Iterable[str],
    sandbox: str,
    timeout_s: float,
    describe: Describe | None,
    reproduce: Reproduce | bool | None,
    say: Callable[[str], None],
    for_suite: bool = False,
    old_tests: bool = True,
) -> list[Path]:
    work.mkdir(parents=True)
    sdist, new_repo, spec, built, ini = prepare(
        f"{name}=={fixed}", work, extra=extra, drop=drop, say=lambda m: say(f"  {m}")
    )
    old_repo = pypi.unpack(pypi.download(f"{name}=={base}"), work / f"old-{base}")
    for rel in skip_tests:
        (new_repo / rel).unlink(missing_ok=True)
    hidden, dest = history.hidden_test_files(new_repo)
    # tests kept inside the package (croniter's src/croniter/tests/) are hidden test files:
    # a helper of theirs that changed is no fix to revert
    tests = set(hidden)
    files = [
        f
        for f in history.module_files(new_repo, pypi.code_paths(new_repo, sdist.name))
        if f not in tests
    ]
    changed = history.changed_functions(old_repo, new_repo, files)
    report.changed = len(changed)
    say(f"  {len(changed)} functions changed in {len(files)} modules")
    if not changed:
        return []
    pkg = work / "pkg"
    shutil.copytree(new_repo, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = []
    scripts = (
        reproduce
        if callable(reproduce)
        else (ScriptReproducer(built.sandbox, sandbox, ini) if reproduce is not False else None)
    )
    old = (
        OldTests(
            old_repo, new_repo, hidden, work / "old-tests", built.sandbox, ini, sandbox, timeout_s
        )
        if old_tests
        else None
    )
    with (
        SandboxRunner(built.sandbox, ini, sandbox=sandbox) as runner,
        old or contextlib.nullcontext(),
    ):
        try:
            collected = runner.collect(pkg, timeout_s)
        except SynthError as e:
            raise SynthError(f"{e}\nlast test run (in the sandbox):\n{runner.log[-800:]}") from e
        if clocked := history.clock_tests(pkg, collected):  # pass or fail with the load
            collected = [t for t in collected if t not in clocked]
            say(f"  {len(clocked)} of its tests read the wall clock: no task grades them")
        report.passing_tests = len(collected)
        say(f"  {len(collected)} of its tests pass in the sandbox")

        def candidate(fns: list[history.ChangedFunction]):
            return _candidate(
                name,
                base,
                fixed,
                fns,
                new_repo,
                old_repo,
                pkg,
                runner,
                collected,
                hidden,
                dest,
                spec,
                ini,
                timeout_s,
                describe,
            )

        reporter = Reporter(
            runner,
            pkg,
            hidden,
            collected,
            name=name,
            paths=scripts.pythonpath if isinstance(scripts, ScriptReproducer) else [],
            timeout_s=timeout_s,
        )
        found: list[history.HistoryTask] = []
        for fn in changed:
            task, why = candidate([fn])
            if task is None:
                report.skipped[_where(fn)] = why
            else:
                found.append(task)
        if old is not None and found:
            say(f"  {old.start()}")
        for task in _coherent(found, candidate, report, say):
            where = " + ".join(_where(f) for f in task.functions)
            if old is not None and (broken := old.broken(task)):
                report.skipped[where] = (
                    f"reverted, it fails {len(broken)} of release {base}'s own tests that "
                    f"{fixed}'s code passes ({broken[0]}): a state no release shipped"
                )
                say(f"  {where}: skipped, {report.skipped[where]}")
                continue
            folder = history.write_task(task, staging, decoys=deletion_decoys)
            if (
                scripts is not None
                and (script := scripts(task, folder))
                and not history.statement_leaks(
                    history.full_statement(task.description, script), task.gold, task.fail_to_pass
                )
            ):
                task.reproduction = script
                folder = history.write_task(task, staging, decoys=deletion_decoys)
            if (
                isinstance(scripts, ScriptReproducer)
                and not task.reproduction
                and _replayed(task, reporter, ini)
            ):
                folder = history.write_task(task, staging, decoys=deletion_decoys)
            no_script = (
                scripts.why.get(task.id, "") if isinstance(scripts, ScriptReproducer) else ""
            )
            if for_suite and (why := _not_for_suite(task, no_script)):
                report.skipped[where] = why
                shutil.rmtree(folder, ignore_errors=True)
                say(f"  {task.id}: {where}: skipped, {why}")
                continue
            out.append(folder)
            report.candidates.append(task.id)
            say(
                f"  {task.id}: {where}, {len(task.fail_to_pass)} fail_to_pass (statement: "
                f"{task.statement_source}{', reproduction' if task.reproduction else ''})"
            )
    if isinstance(scripts, ScriptReproducer):
        scripts.close()
    return out


def _replayed(task: history.HistoryTask, reporter: Reporter, ini: dict[str, str]) -> bool:
    """Give ``task`` the bug report synthesised bugs get where no failing test made a
    reproduction: a call into the package that the reverted code answers differently
    (recorded while the failing tests ran), or a test body inlined, as a script verified
    to fail by its own assertion and pass with the fix. A statement quoting the changelog
    keeps its quote and gains the script; one written from the failures becomes the
    report (the call, what it returns, what it should). True when the task got one."""
    made = reporter.report(task.reverted, [(task.reverted, task.fail_to_pass)])
    if made is None:
        return False
    stmt, script = made
    description = task.description
    if task.statement_source != "changelog":
        description = (
            stmt.split(f"\n\n{reports.HEADING}", 1)[0].rstrip()
            + "\n\nFix the library code; the hidden tests check this behaviour, and every "
            "other test of the package must keep passing.\n" + pypi.path_hint(ini)
        )
    whole = history.full_statement(description, script)
    # a changelog quote keeps its own length beside the script, which the report was cut
    # to fit without it (croniter-6.2.3-1 came to 2,019 characters)
    if len(whole) > history.MAX_STATEMENT_CHARS or history.statement_leaks(
        whole, task.gold, task.fail_to_pass
    ):
        return False
    if task.statement_source != "changelog":
        task.description, task.statement_source = description, "report"
    task.reproduction = script
    return True


class OldTests:
    """Release N's own tests, run on N+1's code: the check that a history task's buggy
    state is one N shipped. A test of N that passes on N+1's code and fails once the task's
    functions are put back as N had them fails on a mix no release had (N's function beside
    N+1's code that it no longer fits), so the task is not N's bug; N's tests that fail on
    N+1 (behaviour N+1 changed on purpose) say nothing and are not run.

    Args:
        old_repo: N's unpacked sdist (its test files are taken from it).
        new_repo: N+1's (its code, without its own test files).
        new_tests: N+1's test files (repository paths), left out.
        root: Where the mix is written.
        site, ini, sandbox, timeout_s: N+1's built dependencies, pytest settings, sandbox
            backend and limit of one run, as its own tests have them.
    """

    def __init__(
        self,
        old_repo: Path,
        new_repo: Path,
        new_tests: list[str],
        root: Path,
        site: PackageSite | None,
        ini: dict[str, str],
        sandbox: str,
        timeout_s: float,
    ) -> None:
        self.old_repo, self.new_repo, self.new_tests = old_repo, new_repo, set(new_tests)
        self.root, self.timeout_s = root, timeout_s
        self.runner = SandboxRunner(site, ini, sandbox=sandbox)
        self.passing: list[str] = []
        self.ready = False

    def __enter__(self) -> OldTests:
        self.runner.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.runner.__exit__(*exc)

    def start(self) -> str:
        """Write the mix and list N's tests that pass on N+1's code; what was found."""
        old_files, _ = history.hidden_test_files(self.old_repo)
        if not old_files:
            return f"release N ({self.old_repo.name}) has no tests of its own to check against"
        shutil.copytree(
            self.new_repo,
            self.root,
            ignore=lambda d, names: {
                n
                for n in names
                if n in ("__pycache__",)
                or str((Path(d) / n).relative_to(self.new_repo)) in self.new_tests
            },
        )
        for rel in old_files:
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.old_repo / rel, self.root / rel)
        try:
            self.passing = self.runner.collect(self.root, self.timeout_s)
        except SynthError as e:
            return f"release N's tests do not run on N+1's code, not checked ({str(e)[:120]})"
        self.ready = True
        return f"{len(self.passing)} of release N's own tests pass on N+1's code"

    def broken(self, task: history.HistoryTask) -> list[str]:
        """N's tests that pass on N+1's code and fail with ``task``'s functions reverted."""
        if not self.ready or not self.passing:
            return []
        with applied(self.root, task.reverted):
            result, _ = self.runner.run(self.root, self.passing, self.timeout_s)
        failing = {t for t, status in result.items() if status != "passed"}
        return sorted(failing - self._failing_at_n(failing)) if failing else []

    def _failing_at_n(self, ids: set[str]) -> set[str]:
        """Those of ``ids`` that fail on release N's own code too (a test N shipped failing
        says nothing of the mix)."""
        at_n = self.root.parent / f"{self.root.name}-at-n"
        if not at_n.is_dir():
            shutil.copytree(self.root, at_n)
            for path in self.old_repo.rglob("*.py"):
                rel = path.relative_to(self.old_repo)
                if (at_n / rel).is_file() and str(rel) not in self.new_tests:
                    shutil.copy2(path, at_n / rel)
        result, _ = self.runner.run(at_n, sorted(ids), self.timeout_s)
        return {t for t, status in result.items() if status != "passed"}


def _where(fn: history.ChangedFunction) -> str:
    return f"{fn.file}::{fn.qualname}"


#: Most modules one fix's functions, reverted together, may span.
MAX_MODULES = 3


def _coherent(
    found: list[history.HistoryTask],
    candidate: Callable[[list[history.ChangedFunction]], tuple[history.HistoryTask | None, str]],
    report: PairReport,
    say: Callable[[str], None],
) -> list[history.HistoryTask]:
    """The tasks of one release pair, with those of one fix made one: the functions N+1
    changed for one fix are reverted together, so the buggy state is the one release N
    shipped (reverting one of them alone can leave a state no release had, such as a caller
    of a helper whose signature only N+1 has). Two candidates are one fix when their
    statements are the same (they quote the same changelog entry, or describe the same
    failure) or when a test fails with either reverted; that is transitive. Where the
    functions reverted together make no task (they span more than :data:`MAX_MODULES`
    modules, or more than :data:`~repogym.scenarios.history.MAX_F2P` tests fail), none of
    them does."""
    parent = list(range(len(found)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}  # a statement or a failing test -> the first task with it
    for i, task in enumerate(found):
        for key in (f"statement:{task.description}", *(f"test:{t}" for t in task.fail_to_pass)):
            j = first.setdefault(key, i)
            parent[root(i)] = root(j)
    groups: dict[int, list[history.HistoryTask]] = {}
    for i, task in enumerate(found):
        groups.setdefault(root(i), []).append(task)
    out = []
    for tasks in groups.values():
        if len(tasks) == 1:
            out.append(tasks[0])
            continue
        fns = [t.function for t in tasks]
        modules = len({f.file for f in fns})
        task, why = (
            candidate(fns)
            if modules <= MAX_MODULES
            else (None, f"it spans {modules} modules (more than {MAX_MODULES}: not one bug)")
        )
        names = ", ".join(_where(f) for f in fns)
        if task is None:
            for f in fns:
                report.skipped[_where(f)] = f"one change with {names}, reverted together: {why}"
            say(f"  {names}: one change, reverted together: {why}")
            continue
        out.append(task)
    return out


def _not_for_suite(task: history.HistoryTask, no_script: str = "") -> str:
    """Why a suite would not serve ``task`` (``""``: it would, as far as mining can tell);
    ``no_script``: why it has no reproduction, where known."""
    if not task.reproduction:
        why = f": {no_script}" if no_script else ""
        return f"no verified reproduction (a suite's statements carry one){why}"
    if (change := history.change_of(task.statement, task.gold)) != "bug":
        return f"its changelog entry describes a {change} change, not a bug fix"
    return ""


def _candidate(
    name: str,
    base: str,
    fixed: str,
    fns: list[history.ChangedFunction],
    new_repo: Path,
    old_repo: Path,
    pkg: Path,
    runner: SandboxRunner,
    collected: list[str],
    hidden: list[str],
    dest: str,
    spec: DependencySpec,
    ini: dict[str, str],
    timeout_s: float,
    describe: Describe | None,
) -> tuple[history.HistoryTask | None, str]:
    """The task that reverting ``fns`` (the first is the one it is named after) gives,
    or (None, why not); what they read from their modules that N had and N+1 dropped comes
    back with them."""
    files = {f.file for f in fns}
    original = {rel: (pkg / rel).read_text(encoding="utf-8") for rel in files}
    old = {
        rel: (old_repo / rel).read_text(encoding="utf-8")
        for rel in files
        if (old_repo / rel).is_file()
    }
    try:
        reverted = history.revert_all(original, fns, old)
    except history.HistoryError as e:
        return None, str(e)
    with applied(pkg, reverted):
        result, messages = runner.run(pkg, collected, timeout_s)
    fn = fns[0]
    failing = sorted(t for t, s in result.items() if s != "passed")
    if not failing:
        return None, "no test fails with N's version"
    if any(result[t] == "timed out" for t in failing):
        return None, "the tests time out with N's version (an endless loop?)"
    if any(result[t] == "missing" for t in failing):
        return None, "a test goes missing with N's version (a collection or import error)"
    if len(failing) > history.MAX_F2P:
        return None, f"{len(failing)} tests fail (more than {history.MAX_F2P}: not one bug)"
    task = history.HistoryTask(
        name=name,
        base=base,
        fixed=fixed,
        function=fn,
        repo=new_repo,
        test_files=hidden,
        tests_dest=dest,
        fail_to_pass=failing,
        pass_to_pass=sorted(t for t in collected if t not in set(failing)),
        buggy=reverted[fn.file],
        also=tuple(fns[1:]),
        also_buggy={rel: text for rel, text in reverted.items() if rel != fn.file},
        description="",
        statement_source="",
        environment=spec,
        ini_options=ini,
    )
    description, source = _description(task, {t: messages.get(t, "") for t in failing}, describe)
    if description is None:
        return None, "no changelog entry and no description of the failure without leaks"
    task.description, task.statement_source = description + pypi.path_hint(ini), source
    if leaks := history.statement_leaks(task.statement, task.gold, failing):
        return None, f"the statement gives away {leaks[0]}"
    return task, ""


def _description(
    task: history.HistoryTask, messages: dict[str, str], describe: Describe | None
) -> tuple[str | None, str]:
    # entries of housekeeping (tests, docs, refactoring, CI) never describe the change
    entries = [
        e for e in history.changelog_entries(task.repo, task.fixed) or [] if history.quotable(e)
    ]
    names = list(dict.fromkeys(n for f in task.functions for n in f.qualname.split(".")))
    hints = [*names, *(t.split("::")[-1].split("[")[0] for t in task.fail_to_pass)]
    entry = history.pick_entry([e.text for e in entries], hints, names)
    if entry is not None:
        heading = next(e.heading for e in entries if e.text == entry)
        text = history.changelog_description(task.name, task.fixed, entry, heading=heading)
        if not history.statement_leaks(text, task.gold, task.fail_to_pass):
            return text, "changelog"
    text = (describe or failure_description)(task, messages)
    return text, "failures" if describe is None else "generated"


def failure_description(task: history.HistoryTask, messages: dict[str, str]) -> str | None:
    """A statement from what the failing tests report (their assertion messages, without
    test ids, lines of the fix or memory addresses), or None when no message is left."""
    gold = task.gold
    fix = history.fix_lines(gold)
    shown = []
    for t in task.fail_to_pass:
        msg = reports.without_addresses(" ".join(messages.get(t, "").split()))
        if (
            not msg
            or history.statement_leaks(msg, gold, task.fail_to_pass)
            or any(line in msg for line in fix)
        ):
            continue
        if msg not in shown:
            shown.append(msg[:_MESSAGE_CHARS] + ("..." if len(msg) > _MESSAGE_CHARS else ""))
    if not shown:
        return None
    items = "\n".join(f"- {m}" for m in shown[:2])
    return (
        f"{reports.failures_title(task.name, shown[:2])}\n"
        f"Code that uses `{task.name}` fails with\n\n{items}\n\n"
        "Fix the library code; the hidden tests check this behaviour, and every other "
        "test of the package must keep passing.\n"
    )


class ScriptReproducer:
    """The default reproduction of a history task: the shortest script made from one of its
    failing tests (:func:`repogym.scenarios.history.test_script`) that, run as ``python
    reproduction.py`` at the root of the task's repo/ in the sandbox, fails with an
    AssertionError of its own (wrapped by :func:`repogym.scenarios.history.asserting_script`
    where the test expected an exception or the bug raises one) and exits 0 once the gold
    fix is applied, and keeps the statement within
    :data:`~repogym.scenarios.history.MAX_STATEMENT_CHARS`.

    Args:
        dependencies: The tasks' built dependencies (bound by the sandbox).
        sandbox: Sandbox backend.
        ini_options: The tasks' pytest settings (their ``pythonpath`` goes on ``sys.path``).
    """

    def __init__(
        self,
        dependencies: PackageSite | None,
        sandbox: str = "bwrap",
        ini_options: dict[str, str] | None = None,
    ) -> None:
        self.dependencies, self.backend = dependencies, sandbox
        self.pythonpath = [
            str(PurePosixPath(p).relative_to(WORKSPACE))
            for p in (ini_options or {}).get("pythonpath", "").split()
            if p.startswith(WORKSPACE + "/")
        ]
        self._templates = TemplateCache()
        #: Task id -> why it got no reproduction (the last call for it).
        self.why: dict[str, str] = {}

    def __call__(self, task: history.HistoryTask, folder: Path) -> str | None:
        local = {Path(f).parts[0].removesuffix(".py") for f in task.test_files} | {
            Path(f).stem for f in task.test_files if f.endswith(".py")
        }
        room = history.MAX_STATEMENT_CHARS - len(history.full_statement(task.description, "x"))
        made = [s for t in task.fail_to_pass if (s := self._script(task, t, local))]
        scripts = sorted({s for s in made if len(s) < room}, key=len)
        if not scripts:
            self.why[task.id] = (
                "every script made from a failing test is too long for the statement"
                if made
                else "no failing test stands alone as a script (it needs fixtures that are "
                "not plain code, the test suite's own modules or parameters that cannot be "
                "resolved)"
            )
            return None
        template = self._templates.get(folder / "repo", self.dependencies)
        fixed = [(rel, (task.repo / rel).read_text(encoding="utf-8")) for rel in task.reverted]
        seen: dict[str, int] = {}
        for script in scripts:
            code, output = self._run(template, script, None)
            if code in (0, None):
                seen["passes (or times out) without the fix"] = 1
                continue
            if not reports.fails_itself(output):
                # The test expected an exception, or the bug raises one: state it as the
                # script's own AssertionError (the rule every reproduction keeps).
                script = history.asserting_script(script) or ""
                if (
                    not script
                    or len(script) >= room
                    or not reports.fails_itself(self._run(template, script, None)[1])
                ):
                    seen["fails by an error that cannot be stated as its own assertion"] = 1
                    continue
            if self._run(template, script, fixed)[0] == 0:
                return script
            seen["still fails with the gold fix"] = 1
        self.why[task.id] = f"each of its {len(scripts)} scripts " + " or ".join(seen)
        return None

    def _script(self, task: history.HistoryTask, node_id: str, local: set[str]) -> str | None:
        """The failing test ``node_id`` as a standalone script: the test's body as a
        function (:func:`repogym.scenarios.history.test_script`), else, for a test it
        cannot stand alone for (a method a ``unittest`` mixin defines, helpers on
        ``self``), the test's body inlined with what it uses of its class and bases, as
        synthesised bugs' reports do (:func:`repogym.scenarios.bug_reports.inline_check`)."""
        source = _test_source(task, node_id)
        script = history.test_script(
            source,
            node_id,
            local_modules=local,
            pythonpath=self.pythonpath,
            conftests=_conftests(task, node_id),
        )
        if script is not None:
            return script

        def read(rel: str) -> str | None:  # test files only: a script inlines test code
            if rel not in task.test_files:
                return None
            return (task.repo / rel).read_text(encoding="utf-8", errors="replace")

        check = reports.inline_check(source, node_id, read)
        if check is None:
            return None
        script = reports.script([check], self.pythonpath)
        return script if len(script) <= history.MAX_REPRODUCTION_CHARS else None

    def _run(
        self, template: Path, script: str, change: list[tuple[str, str]] | None
    ) -> tuple[int | None, str]:
        """The script's exit code (None: it timed out or crashed) and the tail of its
        output, in a fresh sandbox."""
        sb = make_sandbox(self.backend, SandboxSpec(template, Limits(timeout_s=60)))
        try:
            for rel, text in change or ():
                sb.write_file(rel, text)
            res = run_reproduction(sb, script, 60)
        except SandboxError:
            return None, ""
        finally:
            sb.close()
        return (None if res.timed_out else res.exit_code), res.stdout

    def close(self) -> None:
        self._templates.close()


def _test_source(task: history.HistoryTask, node_id: str) -> str:
    return (task.repo / node_id.split("::")[0]).read_text(encoding="utf-8", errors="replace")


def _conftests(task: history.HistoryTask, node_id: str) -> list[str]:
    """The texts of the hidden ``conftest.py`` files above a test, nearest first (where
    pytest looks for its fixtures)."""
    out = []
    for folder in Path(node_id.split("::")[0]).parents:
        rel = (folder / "conftest.py").as_posix()
        if rel in task.test_files and (task.repo / rel).is_file():
            out.append((task.repo / rel).read_text(encoding="utf-8", errors="replace"))
    return out


def _validate(
    folders: list[Path],
    out: Path,
    sandbox: str,
    workers: int,
    reruns: int,
    say: Callable[[str], None],
    on_report: Callable[[TaskReport], None] | None,
    *,
    restate: bool = True,
) -> tuple[list[Path], dict[str, list[str]]]:
    written: list[Path] = []
    dropped: dict[str, list[str]] = {}
    if not folders:
        return written, dropped
    say(f"{len(folders)} candidate tasks; validating them in the sandbox")
    reports = validate_tasks(
        [load_task(f) for f in folders],
        sandbox=sandbox,
        reruns=reruns,
        workers=workers,
        on_report=on_report,
    )
    if restate:
        restate_valid(folders, reports, sandbox=sandbox, workers=workers, say=say)
    out.mkdir(parents=True, exist_ok=True)
    for folder, report in zip(folders, reports, strict=True):
        if not report.ok:
            dropped[report.task_id] = report.failures
            continue
        dest = out / folder.name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.move(folder, dest)
        written.append(dest)
    return written, dropped
