"""Grading: the agent's diff, applied to a pristine repository, judged by hidden tests.

Grading never trusts the agent's workspace. It starts a fresh sandbox from the task's
template, applies the agent's diff minus every change to test files, pytest configuration,
``conftest.py``, ``sitecustomize``/``usercustomize`` and ``.pth`` files (each flagged in
``hack_flags``), copies the hidden tests over ``tests_dest``, runs the verifier with a junit
XML report written outside the workspace, and cross-checks the report with the
verifier's exit code: a disagreement is flagged ``forged_results`` and scores 0.

Known limit: the agent's code runs inside the pytest process it is judged by. A patch that
both writes a passing report and forces exit code 0 (``os._exit(0)`` after rewriting the
junit file) is not detected; closing that needs the verifier's report to come from a process
the code under test cannot reach.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import stat
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

from repogym.sandbox.base import ExecResult, Limits, Sandbox, SandboxError, SandboxSpec
from repogym.sandbox.shell import DiffError
from repogym.sandbox.workspace import SANDBOX_UID
from repogym.scenarios.task import Task, Verifier

RewardMode = Literal["binary", "partial", "f2p"]
REWARD_MODES: tuple[str, ...] = ("binary", "partial", "f2p")
Status = Literal["passed", "failed", "error", "skipped", "missing"]
_MAX_REPORT_BYTES = 32 << 20
_HEADER = re.compile(r'^diff --git (?:"?a/(.+?)"?) (?:"?b/(.+?)"?)$')
_PYTEST_CONFIG = {"pytest.ini", "tox.ini", "setup.cfg", ".pytest.ini"}
_CUSTOMIZE = {"sitecustomize.py", "usercustomize.py"}


@dataclasses.dataclass
class GradeResult:
    """Everything the last step's ``info`` reports about grading."""

    reward: float
    resolved: bool
    tests: dict[str, str]
    reward_breakdown: dict[str, float]
    hack_flags: list[str]
    diff: str
    infra_error: str | None = None
    verifier_exit_code: int | None = None
    test_output: str = ""
    duration_s: float = 0.0


# -- the diff -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FilePatch:
    """One file's part of a git diff."""

    old: str
    new: str
    text: str

    @property
    def paths(self) -> set[str]:
        return {self.old, self.new}


def split_diff(diff: str) -> list[FilePatch]:
    """Split a ``git diff`` into per-file patches."""
    patches: list[FilePatch] = []
    current: list[str] = []
    paths: tuple[str, str] | None = None
    for line in diff.splitlines(keepends=True):
        m = _HEADER.match(line.rstrip("\n"))
        if m:
            if paths:
                patches.append(FilePatch(paths[0], paths[1], "".join(current)))
            paths, current = (m.group(1), m.group(2)), [line]
        elif paths:
            current.append(line)
    if paths:
        patches.append(FilePatch(paths[0], paths[1], "".join(current)))
    return patches


def is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def hack_flags_for(path: str, patch: FilePatch, tests_dest: str) -> set[str]:
    """Hack flags for one changed path; empty when the change may be graded."""
    p = PurePosixPath(path)
    dest = PurePosixPath(tests_dest)
    flags = set()
    # tests_dest "." (imported tasks whose tests sit beside the code) guards test files only.
    under_dest = dest != PurePosixPath(".") and (p == dest or dest in p.parents)
    if under_dest or is_test_file(path):
        flags.add("tests_modified")
    if p.name == "conftest.py":
        flags.add("conftest")
    if p.name in _CUSTOMIZE:
        flags.add("sitecustomize")
    if p.suffix == ".pth":
        flags.add("pth_file")
    if p.name in _PYTEST_CONFIG or (p.name == "pyproject.toml" and "pytest" in patch.text):
        flags.add("pytest_config")
    return flags


def filter_diff(diff: str, verifier: Verifier) -> tuple[str, list[str]]:
    """Drop the changes grading must not see. Returns (kept diff, sorted hack flags)."""
    kept, flags = [], set()
    for patch in split_diff(diff):
        found = set().union(*(hack_flags_for(p, patch, verifier.tests_dest)
                              for p in patch.paths))
        if found:
            flags |= found
        else:
            kept.append(patch.text)
    return "".join(kept), sorted(flags)


# -- the report ---------------------------------------------------------------------------
def junit_key(node_id: str) -> tuple[str, str]:
    """(classname, name) that pytest's junit XML uses for a node id."""
    parts = node_id.split("::")
    path = parts[0].removesuffix(".py")
    classname = ".".join([path.replace("/", ".")] + parts[1:-1])
    return classname, parts[-1]


def parse_junit(data: bytes) -> dict[tuple[str, str], Status]:
    """testcase (classname, name) -> status from a pytest junit XML report."""
    out: dict[tuple[str, str], Status] = {}
    root = ET.fromstring(data)
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        tags = {child.tag for child in case}
        if "error" in tags:
            status: Status = "error"
        elif "failure" in tags:
            status = "failed"
        elif "skipped" in tags:
            status = "skipped"
        else:
            status = "passed"
        if out.get(key) in ("error", "failed"):  # a teardown error adds a second entry
            continue
        out[key] = status
    return out


def read_report(path: Path) -> bytes | None:
    """Read a report the sandbox wrote, refusing symlinks, special files and huge files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_REPORT_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(_MAX_REPORT_BYTES)
    finally:
        os.close(fd)


def score(tests: dict[str, str], verifier: Verifier, mode: RewardMode) -> tuple[float, dict]:
    """Reward and its breakdown from per-test outcomes."""
    w = verifier.weights

    def frac(ids: tuple[str, ...]) -> float:
        total = sum(w.get(t, 1.0) for t in ids)
        good = sum(w.get(t, 1.0) for t in ids if tests.get(t) == "passed")
        return good / total if total else 1.0

    f2p, p2p = frac(verifier.fail_to_pass), frac(verifier.pass_to_pass)
    all_pass = all(tests.get(t) == "passed" for t in verifier.all_tests)
    if mode == "binary":
        reward = 1.0 if all_pass else 0.0
    elif mode == "partial":
        reward = frac(verifier.all_tests)
    elif mode == "f2p":
        reward = 0.0 if p2p < 1.0 else f2p
    else:
        raise ValueError(f"unknown reward_mode {mode!r}. Fix: use one of {REWARD_MODES}")
    return reward, {"fail_to_pass": f2p, "pass_to_pass": p2p, "all_passed": float(all_pass)}


def forged(exit_code: int, statuses: dict[tuple[str, str], Status]) -> bool:
    """True when the junit report and the verifier's exit code tell different stories."""
    bad = any(s in ("failed", "error") for s in statuses.values())
    if exit_code == 0:
        return bad or not statuses
    if exit_code == 1:  # pytest: some tests failed
        return not bad
    return False


# -- grading ------------------------------------------------------------------------------
SandboxFactory = Callable[[SandboxSpec], Sandbox]


@contextlib.contextmanager
def report_dir(prefix: str = "repogym-grade-") -> Iterator[Path]:
    """A host folder the sandbox uid may write a report into; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if os.geteuid() == 0:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def apply_diff(sb: Sandbox, diff: str) -> ExecResult | None:
    """``git apply`` a diff in the sandbox (None when there is nothing to apply)."""
    if not diff:
        return None
    return sb.run("git apply --whitespace=nowarn --binary -", stdin=diff.encode())


def run_reported(sb: Sandbox, command: str, results: Path,
                 timeout_s: float) -> tuple[ExecResult, bytes | None]:
    """Run a pytest command with a junit report written to ``results`` (outside the
    workspace); returns the run and the report's bytes (None if absent or unsafe)."""
    run = sb.run_with_binds(f'{command} --junitxml="$RG_RESULTS/junit.xml"',
                            rw={"results": results}, timeout_s=timeout_s)
    return run, read_report(results / "junit.xml")


def grade(task: Task, template: Path, diff: str, *, mode: RewardMode,
          make_sandbox: SandboxFactory, limits: Limits | None = None,
          extra_flags: list[str] = ()) -> GradeResult:
    """Grade ``diff`` for ``task`` in a fresh sandbox built by ``make_sandbox``."""
    start = time.monotonic()
    v = task.verifier
    kept, flags = filter_diff(diff, v)
    flags = sorted(set(flags) | set(extra_flags))
    limits = dataclasses.replace(limits or Limits(), timeout_s=v.timeout_s)
    try:
        with report_dir() as results:
            sb = make_sandbox(SandboxSpec(template=template, limits=limits))
            try:
                applied = apply_diff(sb, kept)
                if applied is not None and applied.exit_code != 0:
                    flags = sorted(set(flags) | {"diff_apply_failed"})
                dest = v.tests_dest.rstrip("/")
                setup = sb.run_with_binds(
                    f"rm -f -- '{dest}' 2>/dev/null; mkdir -p -- '{dest}' && "
                    f"cp -R \"$RG_HIDDEN\"/. '{dest}'/",
                    ro={"hidden": task.tests_dir},
                )
                if setup.exit_code != 0:
                    raise SandboxError(f"could not install the hidden tests: {setup.output}")
                run, report = run_reported(sb, f"{v.command} -rA", results, v.timeout_s)
            finally:
                sb.close()
    except SandboxError as e:
        return GradeResult(0.0, False, {t: "missing" for t in v.all_tests}, {}, flags, diff,
                           infra_error=str(e), duration_s=time.monotonic() - start)

    statuses = _statuses(report)
    tests = {t: statuses.get(junit_key(t), "missing") for t in v.all_tests}
    if v.log_parser == "swebench" and swebench_available():
        tests, contradicted = swebench_tests(run.output, v, tests if report else None)
        if contradicted:
            flags = sorted(set(flags) | {"forged_results"})
    if report is not None and not run.timed_out and forged(run.exit_code, statuses):
        flags = sorted(set(flags) | {"forged_results"})
    if run.timed_out:
        flags = sorted(set(flags) | {"verifier_timeout"})
    reward, breakdown = score(tests, v, mode)
    if "forged_results" in flags:
        reward, breakdown = 0.0, {**breakdown, "forged": 1.0}
    return GradeResult(
        reward=reward, resolved=reward == 1.0 and breakdown.get("all_passed") == 1.0,
        tests=tests, reward_breakdown=breakdown, hack_flags=flags, diff=diff,
        verifier_exit_code=run.exit_code, test_output=run.output[-20000:],
        duration_s=time.monotonic() - start,
    )


def _statuses(report: bytes | None) -> dict[tuple[str, str], Status]:
    if not report:
        return {}
    try:
        return parse_junit(report)
    except ET.ParseError:
        return {}


def swebench_available() -> bool:
    """True when the optional ``swebench`` package (``repogym[swebench]``) imports."""
    try:
        import swebench.harness.grading
        import swebench.harness.log_parsers  # noqa: F401
    except ImportError:
        return False
    return True


def swebench_tests(log: str, verifier: Verifier,
                   junit: dict[str, str] | None) -> tuple[dict[str, str], bool]:
    """Per-test outcomes as the official SWE-bench harness computes them from the log.

    The verifier's output (pytest run with ``-rA``) goes through swebench's
    ``parse_log_pytest`` and ``get_eval_tests_report``; a listed test counts as passed
    exactly when the official report puts it under ``success`` (so a skipped
    pass_to_pass test counts as kept, as in SWE-bench). Printed lines can fake a log, so
    a pass that the junit report contradicts (failed, error, skipped, or absent from a
    report that exists) is returned as ``contradicted``.

    Returns:
        (node id -> status, contradicted).
    """
    from swebench.harness.grading import get_eval_tests_report
    from swebench.harness.log_parsers import PARSER_REGISTRY

    status_map = PARSER_REGISTRY["parse_log_pytest"](log, None)
    report = get_eval_tests_report(status_map, {"FAIL_TO_PASS": list(verifier.fail_to_pass),
                                                "PASS_TO_PASS": list(verifier.pass_to_pass)})
    success = set(report["FAIL_TO_PASS"]["success"]) | set(report["PASS_TO_PASS"]["success"])
    names = {"FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}
    tests: dict[str, str] = {}
    contradicted = False
    for t in verifier.all_tests:
        if t in success:
            tests[t] = "passed"
            truncated_id = t.count("[") > t.count("]")  # SWE-bench's prefix-matched ids
            j = junit.get(t, "missing") if junit is not None else None
            # junit reports xfail and skip as skipped; only a claimed PASSED contradicts it
            claimed = status_map.get(t) == "PASSED"
            if j in ("failed", "error") or (j == "missing" and not truncated_id) or (
                    j == "skipped" and claimed):
                contradicted = True
        else:
            tests[t] = names.get(status_map.get(t, ""), "missing")
    return tests, contradicted


def diff_or_flag(sb: Sandbox) -> tuple[str, list[str]]:
    """The workspace diff, or an empty diff flagged ``diff_failed`` if the agent broke git."""
    try:
        return sb.diff(), []
    except DiffError:
        return "", ["diff_failed"]
