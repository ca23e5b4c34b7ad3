"""Mutation testing of a task's hidden tests: do they reject wrong fixes close to the gold fix?

:func:`mutation_check` applies ``solution.patch`` to the task's repository, makes every
mutant (:mod:`repogym.scenarios.mutation`) of the functions the gold patch touches and of
their direct callers, and grades each one, as the diff "gold + mutation" against repo/,
with the real grader in the real sandbox (:class:`~repogym.quality.validate.PatchGrader`),
several at a time, within a time budget. How each mutant counts:

- ``killed``: the grader did not give full reward: some listed test did not pass (failed,
  error, missing), or the run was not trusted (timed out, exhausted its limits, ...);
- ``survived``: every listed test passed: a wrong fix the hidden tests accept;
- ``equivalent``: trivially the same program (same AST or bytecode), not graded;
- ``reviewed``: survived, and the task argues it equivalent in task.toml
  (``[mutation] equivalent = [{ mutant = "<id>", why = "..." }]``);
- ``error``: the sandbox or grader failed on it (twice: an infrastructure error is
  retried once); ``not_run``: left out by ``max_mutants`` or the time budget.

The score is killed / (killed + survived); the others do not count. The check fails when
the score is below ``min_score``, when an entry of ``[mutation] equivalent`` names no
generated mutant or a killed one, when a mutant could not be graded, or when nothing could
be mutated. Results are cached per task version in ``cache_dir()/mutation``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal

from repogym.grading.flags import HackFlag
from repogym.grading.grader import code_digest
from repogym.quality.pool import grading_pool
from repogym.quality.validate import PatchGrader
from repogym.sandbox.runtime import cache_dir
from repogym.scenarios import mutation
from repogym.scenarios.mutation import Mutant
from repogym.scenarios.patches import is_test_file, split_diff
from repogym.scenarios.task import Task, TaskError

Status = Literal["killed", "survived", "equivalent", "reviewed", "error", "not_run"]
MIN_SCORE = 0.9
#: A mutant's grading run may take this many times gold's (at least 10 s, at most the
#: task's own timeout_s): a mutant that loops forever is killed by the timeout.
TIMEOUT_FACTOR = 10.0
#: Version of how mutants are judged and stored; part of the cache key.
_CACHE_FORMAT = 1


@dataclasses.dataclass
class MutantResult:
    """One mutant and what the grader made of it.

    Attributes:
        id: The mutant's stable id (:attr:`repogym.scenarios.mutation.Mutant.id`).
        status: See the module docstring.
        diff: The mutation alone, as a diff of the gold-fixed file.
        failed: Listed tests that did not pass (the tests that killed it).
        note: Why it is equivalent, reviewed, not run or an error.
        duration_s: Wall time of its grading run.
    """

    id: str
    status: Status
    diff: str
    failed: list[str] = dataclasses.field(default_factory=list)
    note: str = ""
    duration_s: float = 0.0


@dataclasses.dataclass
class MutationReport:
    """The mutation check of one task.

    Attributes:
        task_id: The task's id.
        version: The task's version.
        fingerprint: Hash of the task folder and the mutation code (the cache key).
        min_score: The threshold the check was judged against.
        mutants: Every mutant made, in source order.
        problems: Why the check fails (empty when it passes).
        duration_s: Wall time of the whole check.
        workers: Grading runs in parallel.
    """

    task_id: str
    version: int
    fingerprint: str
    min_score: float
    mutants: list[MutantResult] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0
    workers: int = 1

    def count(self, status: Status) -> int:
        return sum(1 for m in self.mutants if m.status == status)

    @property
    def score(self) -> float | None:
        """killed / (killed + survived); None when no counted mutant was graded."""
        killed, survived = self.count("killed"), self.count("survived")
        return killed / (killed + survived) if killed + survived else None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def survivors(self) -> list[MutantResult]:
        return [m for m in self.mutants if m.status == "survived"]

    def summary(self) -> str:
        """``0.93 (28/30 killed; 2 survived, 1 equivalent, ...)``."""
        killed, counted = self.count("killed"), self.count("killed") + self.count("survived")
        head = (
            "n/a (no mutant graded"
            if self.score is None
            else (f"{self.score:.2f} ({killed}/{counted} killed")
        )
        rest = [
            f"{self.count(s)} {s.replace('_', ' ')}"
            for s in ("survived", "equivalent", "reviewed", "error", "not_run")
            if self.count(s)
        ]
        return head + (f"; {', '.join(rest)})" if rest else ")")

    def to_dict(self) -> dict:
        return {"format": _CACHE_FORMAT, "score": self.score, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> MutationReport:
        fields = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in data.items() if k in fields}
        kept["mutants"] = [MutantResult(**m) for m in data.get("mutants", [])]
        return cls(**kept)


# -- the cache ----------------------------------------------------------------------------
def fingerprint(task: Task) -> str:
    """Hash of every file in the task folder, of the grading code, of the code that makes the
    mutants and of the format of the stored results (:data:`_CACHE_FORMAT`, bumped when
    judging changes)."""
    h = hashlib.sha256(f"format {_CACHE_FORMAT}\0{task.digest()}\0{code_digest()}\0".encode())
    h.update(Path(mutation.__file__).read_bytes())
    return h.hexdigest()


def cache_path(task: Task, key: str | None = None) -> Path:
    return (
        cache_dir()
        / "mutation"
        / f"{task.id}-v{task.version}-{(key or fingerprint(task))[:24]}.json"
    )


def cached_report(task: Task) -> MutationReport | None:
    """The stored mutation check of this exact task version, or None."""
    path = cache_path(task)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("format") != _CACHE_FORMAT:
        return None
    return MutationReport.from_dict(data)


def _store(task: Task, report: MutationReport) -> None:
    path = cache_path(task, report.fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report.to_dict()))
    tmp.replace(path)


# -- the mutants of a task ----------------------------------------------------------------
def _is_hidden_or_test(task: Task, rel: str) -> bool:
    dest = PurePosixPath(task.test_spec.tests_dest)
    p = PurePosixPath(rel)
    under = dest != PurePosixPath(".") and (p == dest or dest in p.parents)
    return under or is_test_file(rel) or p.name == "conftest.py"


def _apply_gold(task: Task) -> tuple[dict[str, str], dict[str, str]]:
    """(path -> text before, path -> text after the gold patch) for the repo's Python files.

    Raises:
        TaskError: solution.patch is empty or does not apply.
    """
    gold = task.solution_patch.read_text()
    if not gold.strip():
        raise TaskError(
            f"{task.solution_patch}: empty; a mutation check needs the gold fix. "
            "Fix: write solution.patch (see docs/authoring.md)"
        )
    with tempfile.TemporaryDirectory(prefix="repogym-mutation-") as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(task.repo_dir, root, symlinks=True)
        before = {f: t for f, t in mutation.iter_sources(root) if not _is_hidden_or_test(task, f)}
        res = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            cwd=root,
            input=gold.encode(),
            capture_output=True,
            check=False,
        )
        if res.returncode != 0:
            raise TaskError(
                f"{task.solution_patch}: does not apply to repo/ "
                f"({res.stderr.decode(errors='replace').strip()}). Fix: regenerate "
                "it with git diff in a copy of repo/"
            )
        after = {f: t for f, t in mutation.iter_sources(root) if not _is_hidden_or_test(task, f)}
    return before, after


def task_mutants(task: Task) -> tuple[list[Mutant], dict[str, str], dict[str, str]]:
    """Mutants of the gold-fixed functions the gold patch touches and of their direct
    callers, with the repo's Python sources before and after the gold patch.

    Raises:
        TaskError: the gold patch is missing, empty or does not apply.
    """
    before, after = _apply_gold(task)
    touched: dict[str, set[str]] = {}
    for file, lines in mutation.changed_lines(task.solution_patch.read_text()).items():
        if file in after:
            touched[file] = mutation.touched_functions(after[file], lines)
    qualnames = [q for qs in touched.values() for q in qs]
    names = {q.rsplit(".", 1)[-1] for q in qualnames if not q.rsplit(".", 1)[-1].startswith("__")}
    names |= {q.split(".")[-2] for q in qualnames if q.endswith(".__init__")}
    selected = {
        f: set(touched.get(f, set())) | mutation.callers(text, names) for f, text in after.items()
    }
    out: list[Mutant] = []
    for file, functions in sorted(selected.items()):
        if functions:
            out += mutation.mutants(after[file], file, functions)
    return out, before, after


def _mutant_diff(gold: str, before: dict[str, str], m: Mutant) -> str:
    """The diff "gold + mutation" against repo/: gold's other files, and the mutated file
    from its original text to the mutant."""
    parts = [p.text for p in split_diff(gold) if m.file not in p.paths]
    parts.append(mutation.file_diff(m.file, before.get(m.file), m.source))
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


# -- the check ----------------------------------------------------------------------------
def _sample(ids: list[str], limit: int | None) -> set[str]:
    """A fixed subset of ``limit`` ids (by hash, so the same ids are kept on every run)."""
    if limit is None or len(ids) <= limit:
        return set(ids)
    return set(sorted(ids, key=lambda i: hashlib.sha1(i.encode()).hexdigest())[:limit])


def _grade_mutant(
    task: Task,
    grader: PatchGrader,
    diff: str,
    deadline: float,
    mutant_id: str,
    reviewed: dict[str, str],
    fixed_diff: str,
) -> MutantResult:
    if time.monotonic() > deadline:
        return MutantResult(mutant_id, "not_run", fixed_diff, note="time budget spent")
    start = time.monotonic()
    res = grader.grade(task, diff)
    if res.infra_error:  # a transient fault of the machine (fork, mount) gets one more try
        res = grader.grade(task, diff)
    took = time.monotonic() - start
    if res.infra_error or HackFlag.DIFF_APPLY_FAILED in res.hack_flags:
        why = res.infra_error or "the mutant's diff did not apply"
        return MutantResult(mutant_id, "error", fixed_diff, note=why, duration_s=took)
    failed = [t for t, s in res.tests.items() if s != "passed"]
    if failed or res.reward < 1.0:
        note = res.untrusted or (
            "verifier timed out" if HackFlag.VERIFIER_TIMEOUT in res.hack_flags else ""
        )
        return MutantResult(mutant_id, "killed", fixed_diff, failed, note, took)
    if mutant_id in reviewed:
        return MutantResult(
            mutant_id, "reviewed", fixed_diff, note=reviewed[mutant_id], duration_s=took
        )
    return MutantResult(mutant_id, "survived", fixed_diff, duration_s=took)


def _baseline(task: Task, grader: PatchGrader) -> tuple[float, list[str]]:
    """Gold's grading time, and problems if gold does not pass every listed test."""
    start = time.monotonic()
    res = grader.grade(task, task.solution_patch.read_text())
    took = time.monotonic() - start
    bad = {t: s for t, s in res.tests.items() if s != "passed"}
    if res.infra_error or bad or res.hack_flags or res.untrusted or res.reward < 1.0:
        why = res.infra_error or bad or res.hack_flags or res.untrusted or res.reward
        return took, [
            (
                f"{task.id}: mutation: gold does not pass cleanly ({why}), so mutants "
                "cannot be judged. Fix: make `repogym validate` pass first"
            )
        ]
    return took, []


def mutation_check(
    task: Task,
    grader: PatchGrader,
    *,
    workers: int = 1,
    budget_s: float = 600.0,
    max_mutants: int | None = None,
    min_score: float = MIN_SCORE,
    on_mutant: Callable[[MutantResult], None] | None = None,
) -> MutationReport:
    """Grade every mutant of ``task``'s gold fix and judge its hidden tests (stored in the cache).

    Args:
        task: A loaded task with a gold patch.
        grader: Grades the mutants' diffs.
        workers: Mutants graded at once.
        budget_s: Seconds after which no further mutant is started (those left are
            ``not_run``).
        max_mutants: Grade at most this many (a fixed, hash-chosen subset); None: all.
        min_score: The check fails below this score.
        on_mutant: Called with each mutant's result as it is known.

    Returns:
        The report (``report.ok`` says whether the check passed).
    """
    start = time.monotonic()
    report = MutationReport(task.id, task.version, fingerprint(task), min_score, workers=workers)
    try:
        reviewed = mutation.reviewed_equivalents(task.path)
        made, before, after = task_mutants(task)
    except (TaskError, SyntaxError, ValueError) as e:
        report.problems.append(f"{task.id}: mutation: {e}")
        return _done(task, report, start)
    if not made:
        report.problems.append(
            f"{task.id}: mutation: no mutant could be made of the functions solution.patch "
            "touches (or their callers). Fix: check that the gold fix changes Python "
            "functions in repo/"
        )
        return _done(task, report, start)
    gold_s, problems = _baseline(task, grader)
    if problems:
        report.problems += problems
        return _done(task, report, start)
    limit = min(task.test_spec.timeout_s, max(10.0, TIMEOUT_FACTOR * gold_s))
    quick = dataclasses.replace(
        task, test_spec=dataclasses.replace(task.test_spec, timeout_s=limit)
    )
    gold = task.solution_patch.read_text()
    results = _run(
        quick,
        grader,
        gold,
        before,
        after,
        made,
        reviewed,
        workers,
        start + budget_s,
        max_mutants,
        on_mutant,
    )
    report.mutants = results
    report.problems += _judge(task, report, reviewed, {m.id for m in made})
    return _done(task, report, start)


def _run(
    task: Task,
    grader: PatchGrader,
    gold: str,
    before: dict[str, str],
    after: dict[str, str],
    made: list[Mutant],
    reviewed: dict[str, str],
    workers: int,
    deadline: float,
    max_mutants: int | None,
    on_mutant: Callable[[MutantResult], None] | None,
) -> list[MutantResult]:
    results: dict[str, MutantResult] = {}
    diffs = {m.id: mutation.file_diff(m.file, after[m.file], m.source) for m in made}
    todo: list[Mutant] = []
    for m in made:
        same = mutation.equivalence(after[m.file], m.source)
        if same:
            results[m.id] = MutantResult(m.id, "equivalent", diffs[m.id], note=same)
        else:
            todo.append(m)
    keep = _sample([m.id for m in todo], max_mutants)
    with grading_pool(workers) as pool:
        futures = {}
        for m in todo:
            if m.id not in keep:
                results[m.id] = MutantResult(
                    m.id, "not_run", diffs[m.id], note=f"not in the sample of {max_mutants}"
                )
                continue
            futures[m.id] = pool.submit(
                _grade_mutant,
                task,
                grader,
                _mutant_diff(gold, before, m),
                deadline,
                m.id,
                reviewed,
                diffs[m.id],
            )
        for mid, fut in futures.items():
            results[mid] = fut.result()
            if on_mutant:
                on_mutant(results[mid])
    return [results[m.id] for m in made]


def _judge(
    task: Task, report: MutationReport, reviewed: dict[str, str], made: set[str]
) -> list[str]:
    out = []
    where = f"{task.id}: mutation"
    for mid in sorted(set(reviewed) - made):
        out.append(
            f"{where}: [mutation] equivalent lists {mid}, which is not a mutant of "
            "this task (stale id?). Fix: remove it, or copy the id that `repogym "
            "validate --mutation` prints now"
        )
    for m in report.mutants:
        if m.status == "killed" and m.id in reviewed:
            by = m.failed[0] if m.failed else f"the grader ({m.note})"
            out.append(
                f"{where}: [mutation] equivalent lists {m.id}, but {by} kills it, so it "
                "is not equivalent. Fix: remove it from the list"
            )
        if m.status == "error":
            out.append(f"{where}: mutant {m.id} could not be graded: {m.note}")
    score = report.score
    if score is None and not out:
        out.append(
            f"{where}: no mutant was graded (all equivalent, reviewed or not run). "
            "Fix: raise the time budget or max mutants"
        )
    elif score is not None and score < report.min_score:
        out.append(
            f"{where}: score {score:.2f} < {report.min_score:g}: "
            f"{len(report.survivors)} surviving mutant(s) the hidden tests accept "
            "(printed as diffs). Fix: add hidden tests that fail on them, or argue the "
            "equivalent ones in task.toml [mutation] equivalent (docs/authoring.md)"
        )
    return out


def _done(task: Task, report: MutationReport, start: float) -> MutationReport:
    """Finish the report; store it if mutants were graded and the infrastructure held."""
    report.duration_s = time.monotonic() - start
    if report.mutants and not report.count("error"):
        _store(task, report)
    return report
