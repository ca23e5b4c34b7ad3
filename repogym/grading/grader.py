"""Grading: the agent's diff, applied to a pristine repository, judged by hidden tests.

Grading never trusts the agent's workspace, and it holds against an agent that has read
this file. In a fresh sandbox started from the task's template it applies the agent's diff
minus every change to the test files (the hidden test folder, ``test_*.py``, the files of
the listed tests) and to ``conftest.py`` files, copies in the hidden tests with **canaries**
planted among them (:mod:`repogym.grading.grading_run`), and starts the grading run
through repogym's
launcher: the standard library and pytest can never be replaced by workspace files, no
workspace file is read as pytest configuration, plugins load only by name from trusted
sites, and per-test results come back on a channel the workspace's code cannot find by
name. A run that timed out, was killed, used up the sandbox's own limits, or whose
canaries or exit code disagree with its results is not trusted: every test is ``missing``
and the reward is 0, with a flag that says why.

Flags (``hack_flags``) are information for the researcher; they never raise a reward. What
each defence covers, and what remains, is in docs/grading.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Literal, get_args

from repogym.grading import canaries as cn
from repogym.grading import gold as gd
from repogym.grading import grading_run as vr
from repogym.grading import seal as sl
from repogym.grading.flags import HackFlag
from repogym.sandbox.base import DiffError, ExecResult, Limits, Sandbox, SandboxError, SandboxSpec
from repogym.scenarios.patches import FilePatch, is_test_file, split_diff
from repogym.scenarios.task import Task, TestSpec

RewardMode = Literal["binary", "partial", "f2p"]
REWARD_MODES: tuple[RewardMode, ...] = get_args(RewardMode)
Status = Literal["passed", "failed", "error", "skipped", "missing"]
_PYTEST_CONFIG = {"pytest.ini", "tox.ini", "setup.cfg", ".pytest.ini"}
_CUSTOMIZE = {"sitecustomize.py", "usercustomize.py"}
#: Top-level names a workspace module must not take (information: the launcher makes
#: shadowing them impossible whatever the name).
_SHADOW_NAMES = set(sys.stdlib_module_names) | {
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py",
}
#: Code in a diff that reaches for pytest's or the interpreter's insides (information).
_INTERNALS = re.compile(
    r"_pytest|pytest_runtest|pytest_report|sys\._getframe|gc\.get_objects"
    r"|os\._exit|TerminalReporter|junitxml|pytest_configure|"
    r"sys\.meta_path|builtins\.__import__"
)


@dataclasses.dataclass
class GradeResult:
    """Everything the last step's ``info`` reports about grading."""

    reward: float
    resolved: bool
    tests: dict[str, str]
    reward_breakdown: dict[str, float]
    hack_flags: list[HackFlag]
    diff: str
    infra_error: str | None = None
    verifier_exit_code: int | None = None
    test_output: str = ""
    duration_s: float = 0.0
    #: Why the run's results were not trusted ("" when they were).
    untrusted: str = ""
    #: Listed test -> its sealed checks that did not hold ("line N: got ...").
    sealed_failures: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: Listed tests a strong sealed check failed (a forger would have to name its value).
    strongly_failed: list[str] = dataclasses.field(default_factory=list)
    #: What ``git apply`` said when the diff did not apply ("" when it applied).
    apply_output: str = ""
    #: fail_to_pass tests whose failure at noop a value seal shows (:func:`noop_witnessed`;
    #: the rest count in the partial modes only once these pass: :func:`score`); ``None``
    #: where it makes no difference (every fail_to_pass test passed, or none did).
    witnessed: list[str] | None = None

    def rewards(self, spec: TestSpec) -> dict[str, float]:
        """The reward this grading earns under every reward mode (the modes score the same
        per-test outcomes; an untrusted or failed run earns 0 in all of them)."""
        if self.untrusted or self.infra_error:
            return dict.fromkeys(REWARD_MODES, 0.0)
        return {m: score(self.tests, spec, m, self.witnessed)[0] for m in REWARD_MODES}


def code_digest() -> str:
    """sha256 of the code a grading's verdict depends on: this module, the masking, the
    seals, the grading run's rules and the launcher (a cache keyed by it forgets every verdict
    when any of them changes)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        h = hashlib.sha256()
        here = Path(__file__).parent
        for f in (
            Path(__file__),
            here / "canaries.py",
            here / "seal.py",
            here / "grading_run.py",
            here / "gold.py",
            here / "flags.py",
            *sorted((here / "launcher").glob("*.py")),
        ):
            h.update(f.read_bytes())
        _CODE_DIGEST = h.hexdigest()
    return _CODE_DIGEST


_CODE_DIGEST: str | None = None


# -- the diff -----------------------------------------------------------------------------
def guarded(path: str, spec: TestSpec) -> set[HackFlag]:
    """Flags for a path grading restores to its pristine state (empty: the change is kept)."""
    p = PurePosixPath(path)
    dest = PurePosixPath(spec.tests_dest)
    # tests_dest "." (imported tasks whose tests sit beside the code) guards test files only.
    under_dest = dest != PurePosixPath(".") and (p == dest or dest in p.parents)
    flags: set[HackFlag] = set()
    if under_dest or is_test_file(path) or path in vr.test_files(spec.all_tests):
        flags.add(HackFlag.TESTS_MODIFIED)
    if p.name == "conftest.py":
        flags.add(HackFlag.CONFTEST)
    return flags


def noted(path: str, patch: FilePatch) -> set[HackFlag]:
    """Information-only flags for a kept change (grading never reads these files)."""
    p = PurePosixPath(path)
    flags = set()
    if p.name in _CUSTOMIZE:
        flags.add(HackFlag.SITECUSTOMIZE)
    if p.suffix == ".pth":
        flags.add(HackFlag.PTH_FILE)
    if p.name in _PYTEST_CONFIG or (p.name == "pyproject.toml" and "pytest" in patch.text):
        flags.add(HackFlag.PYTEST_CONFIG)
    if any(part.endswith((".dist-info", ".egg-info")) for part in p.parts):
        flags.add(HackFlag.DIST_INFO)
    top = p.parts[0] if p.parts else ""
    if top.removesuffix(".py") in _SHADOW_NAMES and (len(p.parts) > 1 or p.suffix == ".py"):
        flags.add(HackFlag.SHADOWS_MODULE)
    return flags


def filter_diff(diff: str, spec: TestSpec) -> tuple[str, list[HackFlag]]:
    """Drop the changes grading must not see. Returns (kept diff, sorted hack flags)."""
    kept, flags = [], set()
    for patch in split_diff(diff):
        drop = set().union(*(guarded(p, spec) for p in patch.paths))
        flags |= drop or set().union(*(noted(p, patch) for p in patch.paths))
        if not drop:
            kept.append(patch.text)
    if _INTERNALS.search("".join(kept)):
        flags.add(HackFlag.PYTEST_INTERNALS)
    return "".join(kept), sorted(flags)


def score(
    tests: dict[str, str],
    spec: TestSpec,
    mode: RewardMode,
    witnessed: Collection[str] | None = None,
) -> tuple[float, dict]:
    """Reward and its breakdown from per-test outcomes.

    ``witnessed`` names the fail_to_pass tests whose failure at noop a value seal shows
    and the strongest task-blind attack could not hide (:func:`noop_witnessed`; ``None``:
    all of them). The others fail at noop on a bit that code in the grading run can set, so
    the partial modes (``partial``, ``f2p``) count such a test as passed only once every
    witnessed one passes, or, where none is witnessed, once every test passes: until then a
    forger that flips reports earns what noop earns. ``binary`` needs every test to pass
    either way.
    """
    w = spec.weights
    bits = set() if witnessed is None else set(spec.fail_to_pass) - set(witnessed)
    shown = [t for t in spec.fail_to_pass if t not in bits] or spec.all_tests
    if any(tests.get(t) != "passed" for t in shown):
        counted = {t: "failed" if t in bits else s for t, s in tests.items()}
    else:
        counted = tests

    def frac(ids: tuple[str, ...]) -> float:
        total = sum(w.get(t, 1.0) for t in ids)
        good = sum(w.get(t, 1.0) for t in ids if counted.get(t) == "passed")
        return good / total if total else 1.0

    f2p, p2p = frac(spec.fail_to_pass), frac(spec.pass_to_pass)
    all_pass = all(tests.get(t) == "passed" for t in spec.all_tests)
    if mode == "binary":
        reward = 1.0 if all_pass else 0.0
    elif mode == "partial":
        reward = frac(spec.all_tests)
    elif mode == "f2p":
        reward = 0.0 if p2p < 1.0 else f2p
    else:
        raise ValueError(f"unknown reward_mode {mode!r}. Fix: use one of {REWARD_MODES}")
    return reward, {"fail_to_pass": f2p, "pass_to_pass": p2p, "all_passed": float(all_pass)}


# -- grading ------------------------------------------------------------------------------
SandboxFactory = Callable[[SandboxSpec], Sandbox]


@contextlib.contextmanager
def grading_dir(template: Path) -> Iterator[Path]:
    """A grader-only folder on the template's lease tmpfs (never visible to the agent)."""
    lease_dir = Path(template).parent.parent
    path = Path(tempfile.mkdtemp(prefix="g", dir=lease_dir if lease_dir.is_dir() else None))
    try:
        os.chmod(path, 0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def apply_diff(sb: Sandbox, diff: str) -> ExecResult | None:
    """``git apply`` a diff in the sandbox (None when there is nothing to apply)."""
    if not diff:
        return None
    return sb.run("git apply --whitespace=nowarn --binary -", stdin=_diff_bytes(diff))


def _diff_bytes(diff: str) -> bytes:
    """A diff as bytes. Surrogate escapes (a diff read with ``errors="surrogateescape"``)
    become the bytes they stand for; any other lone surrogate, which no file can hold, is
    written as is, and ``git apply`` refuses the diff (the diff's fault, never a crash)."""
    try:
        return diff.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return diff.encode("utf-8", "surrogatepass")


def _files_to_plant(task: Task, template: Path) -> dict[str, Path]:
    """Workspace path -> source of every file grading installs: the hidden tests, and the
    pristine copies of listed test files that live in the repository itself."""
    v = task.test_spec
    files: dict[str, Path] = {}
    for src in sorted(task.tests_dir.rglob("*")):
        if src.is_symlink() or any(
            p.is_symlink() for p in src.parents if task.tests_dir in p.parents
        ):
            continue  # never follow a link out of the task folder
        if src.is_file() and "__pycache__" not in src.parts and src.suffix != ".pyc":
            files[vr.workspace_path(v.tests_dest, str(src.relative_to(task.tests_dir)))] = src
    for rel in vr.test_files(v.all_tests):
        if rel not in files and (template / rel).is_file() and not (template / rel).is_symlink():
            files[rel] = template / rel
    return files


def _focused(
    masked: cn.Masked, files: dict[str, Path], node_ids: Iterable[str], rename: bool
) -> cn.Masked:
    """``masked`` with the seals of its focusable tests as their own passes plant them
    (:func:`focus_groups`), in place of the default planting's."""
    groups = focus_groups(masked.focusable)
    if not groups:
        return masked
    focused = {f for g in groups for f in g}
    out = dataclasses.replace(
        masked, seals=[s for s in masked.seals if masked.original(s.test) not in focused]
    )
    for group in groups:
        with tempfile.TemporaryDirectory() as tmp:
            extra = cn.plant(
                files, Path(tmp), node_ids, random.Random(0), rename=rename, focus=group
            )
        out.seals += [s for s in extra.seals if extra.original(s.test) in group]
        out.renamed.update(extra.renamed)
        out.case_ids.update(extra.case_ids)
    return out


def planted_seals(task: Task) -> tuple[cn.Masked, dict[str, Path]]:
    """What grading plants for ``task`` (tests under their own names): the masking, with
    every sealed check (a focusable test's as its own pass plants them), and workspace
    path -> source of every file it installs."""
    files = _files_to_plant(task, task.repo_dir)
    with tempfile.TemporaryDirectory() as tmp:
        masked = cn.plant(
            files, Path(tmp), task.test_spec.all_tests, random.Random(0), rename=False
        )
    return _focused(masked, files, task.test_spec.all_tests, False), files


def seal_coverage(task: Task) -> dict[str, int]:
    """Listed test -> how many sealed checks it gets (0: its verdict is pytest's alone,
    which code in the grading run's process can forge; see :mod:`repogym.grading.seal`)."""
    masked, _ = planted_seals(task)
    return {t: masked.checks_by_test.get(t.partition("[")[0], 0) for t in task.test_spec.all_tests}


def value_sealed(task: Task) -> dict[str, bool]:
    """fail_to_pass test -> whether a value seal checks it (:meth:`Seal.strong_in` its case): a
    literal, a parametrize column or a gold value that carries more than a bit (gold values
    as recorded for this task, if they are). A static upper bound of what ``repogym
    validate`` measures: whether such a check *witnesses* the test's failure at noop."""
    v = task.test_spec
    files = _files_to_plant(task, task.repo_dir)
    with tempfile.TemporaryDirectory() as tmp:
        masked = cn.plant(files, Path(tmp), v.all_tests, random.Random(0), rename=False)
    masked = _focused(masked, files, v.all_tests, False)
    gd.resolve(masked, gd.load(task.digest(), code_digest()) or {})
    return {t: witnesses(masked, t) for t in v.fail_to_pass}


def witnesses(masked: cn.Masked, test: str) -> bool:
    """Whether a value seal of ``masked`` checks listed test ``test``: one strong in the
    test's installed case (:meth:`Seal.strong_in`; a gold check only where gold reached it)."""
    case = masked.installed(test)
    return any(
        s.strong_in(case) and (not s.gold or case in s.cases)
        for s in masked.seals
        if s.test == sl.function_of(case)
    )


@dataclasses.dataclass
class GradingRun:
    """A grading run in a prepared sandbox: the process and what the launcher reported."""

    exec: ExecResult
    channel: vr.Channel | None
    channel_error: str = ""


def run_grading(
    sb: Sandbox,
    gdir: Path,
    args: list[str],
    node_ids: list[str],
    timeout_s: float,
    ini_options: dict[str, str] | None = None,
    extra_files: list[str] = (),
    hash_seed: int = 0,
    select: Sequence[str] | None = None,
) -> GradingRun:
    """Run pytest with ``args`` through the launcher in ``sb``, with ``gdir`` as its folder.

    ``gdir`` must hold ``tests/`` (already installed into the workspace) and is bound
    read-only at ``$RG_GRADER``. The test files of ``node_ids`` (and ``extra_files``) are
    run, or only the installed node ids ``select`` (:func:`selection`).
    """
    vdir = gdir / "verifier"
    vdir.mkdir(exist_ok=True)
    for name in ("launch.py", "canon.py"):
        shutil.copy(vr.LAUNCHER_DIR / name, vdir / name)
    (vdir / "pytest.ini").write_text(vr.ini_text(ini_options or {}))
    conftests = vr.conftest_digests(Path(sb.template), gdir / "tests")
    (vdir / "conftests.json").write_text(json.dumps(conftests))
    for p in vdir.iterdir():
        os.chmod(p, 0o644)
    interp = sb.interpreter
    argv = vr.launcher_argv(
        interp.executable, interp.sites, args, [*node_ids, *extra_files], select=select
    )
    line = vr.shell_command(argv, vr.launcher_env(**interp.env, hash_seed=hash_seed))
    run = sb.run_with_binds(
        line, ro={"grader": gdir}, timeout_s=timeout_s, output_bytes=vr.GRADING_OUTPUT_BYTES
    )
    try:
        return GradingRun(run, vr.read_channel(run.stdout))
    except vr.ChannelError as e:
        return GradingRun(run, None, str(e))


def selection(masked: cn.Masked, tests: Iterable[str]) -> list[str]:
    """The installed node ids a run of ``tests`` alone collects: each one's test function
    (every case of a parametrized one) and every canary planted beside them, so the run is
    judged as a whole-file run is (:func:`repogym.grading.grading_run.judge`), without the
    rest of those files."""
    functions = dict.fromkeys(masked.installed(t.partition("[")[0]) for t in tests)
    files = {f.split("::", 1)[0] for f in functions}
    canaries = [c.node_id for c in masked.canaries if c.node_id.split("::", 1)[0] in files]
    return [*functions, *canaries]


def install_tests(sb: Sandbox, gdir: Path) -> ExecResult:
    """Copy ``gdir/tests`` over the workspace (replacing files and links in the way)."""
    return sb.run_with_binds(
        'cp -R --remove-destination -- "$RG_GRADER"/tests/. ./', ro={"grader": gdir}
    )


@dataclasses.dataclass
class Pass:
    """One grading run of a grading: its planting, the run, and the task's tests it judges.

    Most gradings are one pass. A test that a module-constant parametrize table feeds with
    expectations that other tests of the table read as inputs (a round trip:
    ``parse(s) == value`` and ``format(value) == s``) is judged in a pass of its own, in a
    fresh sandbox, where the table holds only what that test reads as inputs
    (:attr:`repogym.grading.seal.Sealed.focusable`): no pass's sandbox holds the expected
    values it is judged on.
    """

    masked: cn.Masked
    run: GradingRun
    tests: list[str]


def focus_groups(focusable: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """The extra passes for ``focusable`` test functions (each with the constants its table
    is made of): each test joins the first pass none of whose tests uses one of its
    constants (two tests of one table never share a pass: each needs it its own way)."""
    groups: list[tuple[list[str], set[str]]] = []
    for test, consts in focusable.items():
        group = next((g for g in groups if not g[1] & set(consts)), None)
        if group is None:
            groups.append(group := ([], set()))
        group[0].append(test)
        group[1].update(consts)
    return [tests for tests, _ in groups]


def _verify(
    task: Task,
    template: Path,
    kept: str,
    flags: set[HackFlag],
    make_sandbox: SandboxFactory,
    limits: Limits,
    rng: random.Random,
    alone: bool = False,
) -> tuple[list[Pass], str]:
    """Apply ``kept`` (a filtered diff) in a fresh sandbox, plant the masked hidden tests
    and start the grading run, once, and once more per focus group (:class:`Pass`); adds to
    ``flags`` what applying and installing showed. Returns the passes and git's output
    when the diff did not apply. A focus pass runs its tests alone (:func:`selection`), and
    so does the first pass with ``alone``; otherwise the first pass runs the listed tests'
    whole files.

    Raises:
        SandboxError: the infrastructure failed.
    """
    v = task.test_spec
    files = _files_to_plant(task, template)
    run_pass = functools.partial(
        _run_pass, task, template, kept, flags, make_sandbox, limits, rng, files
    )
    first, apply_output = run_pass(list(v.all_tests), (), alone)
    passes, focused = [first], set()
    groups = focus_groups(first.masked.focusable) if v.log_parser != "swebench" else []
    for group in groups:
        tests = [t for t in v.all_tests if t.partition("[")[0] in group]
        if tests:
            passes.append(run_pass(tests, group, True)[0])
            focused.update(tests)
    first.tests = [t for t in v.all_tests if t not in focused]
    return passes, apply_output


def _run_pass(
    task: Task,
    template: Path,
    kept: str,
    flags: set[str],
    make_sandbox: SandboxFactory,
    limits: Limits,
    rng: random.Random,
    files: dict[str, Path],
    tests: list[str],
    focus: Collection[str],
    alone: bool,
) -> tuple[Pass, str]:
    """One pass of :func:`_verify`: a fresh sandbox, the diff, the planted tests (for the
    ``focus`` tests alone, when given) and the grading run over the files of ``tests``, or
    over ``tests`` and their files' canaries only, with ``alone``."""
    v = task.test_spec
    apply_output = ""
    with grading_dir(template) as gdir:
        masked = cn.plant(
            files, gdir / "tests", v.all_tests, rng, rename=v.rename_tests, focus=focus
        )
        sb = make_sandbox(SandboxSpec(template=template, limits=limits))
        try:
            applied = apply_diff(sb, kept)
            if applied is not None and applied.exit_code != 0:
                flags.add(HackFlag.DIFF_APPLY_FAILED)
                apply_output = applied.output.strip()[-2000:]
            installed = install_tests(sb, gdir)
            if installed.exit_code != 0:
                if applied is None:  # into the pristine repository: infrastructure
                    raise SandboxError(
                        f"could not install the hidden tests: {installed.output.strip()[-500:]}"
                    )
                # The agent's diff filled or broke the workspace, even one that failed
                # to apply: git apply stops half-way when it runs out of space.
                flags.add(HackFlag.TESTS_INSTALL_FAILED)
            run = run_grading(
                sb,
                gdir,
                # A focus pass is judged on its channel alone (its log is nobody's): the
                # tests it does not judge fail there for want of their table, and pytest's
                # tracebacks of those took three quarters of the pass (inflection: 2.5 s
                # against 0.7 s with --tb=no).
                [*v.pytest_args(), "--tb=no"] if focus else v.pytest_args(),
                tests,
                v.timeout_s,
                v.ini_options,
                hash_seed=v.hash_seed,
                select=selection(masked, tests) if alone else None,
            )
        finally:
            sb.close()
    return Pass(masked, run, tests), apply_output


def judge_passes(passes: list[Pass], node_ids: Iterable[str]) -> vr.Verdict:
    """The verdict of a grading's passes: each judges its own tests
    (:func:`repogym.grading.grading_run.judge`); untrusted if any pass is."""
    verdicts = []
    for p in passes:
        ex = p.run.exec
        verdicts.append(
            vr.judge(
                p.run.channel,
                exit_code=ex.exit_code,
                timed_out=ex.timed_out,
                truncated=ex.output_truncated,
                exhausted=ex.resource_exhausted,
                node_ids=p.tests,
                masked=p.masked,
                channel_error=p.run.channel_error,
            )
        )
    node_ids = list(node_ids)
    flags = set().union(*(d.flags for d in verdicts))
    if bad := next((d for d in verdicts if not d.trusted), None):
        return vr.Verdict(False, {t: "missing" for t in node_ids}, flags, bad.reason)
    out = vr.Verdict(True, {}, flags)
    for d in verdicts:
        out.tests.update(d.tests)
        out.sealed_failures.update(d.sealed_failures)
        out.overruled |= d.overruled
        out.strongly_failed |= d.strongly_failed
    out.tests = {t: out.tests[t] for t in node_ids if t in out.tests}
    return out


#: Gold gradings a recording makes (the values they agree on are kept).
GOLD_RUNS = 2
_GOLD_LOCKS: dict[str, threading.Lock] = {}
_GOLD_LOCKS_LOCK = threading.Lock()


def gold_values(
    task: Task, template: Path, make_sandbox: SandboxFactory, limits: Limits
) -> gd.GoldValues:
    """What the gold patch's checks report (:mod:`repogym.grading.gold`): recorded once per
    task and grading code (:data:`GOLD_RUNS` gradings of the gold patch), then read from
    repogym's cache. A run that cannot be trusted records nothing.

    Raises:
        SandboxError: the infrastructure failed while recording.
    """
    return _recorded_gold(task, template, make_sandbox, limits)[0]


@dataclasses.dataclass
class _GoldRun:
    """One recording grading of the gold patch, kept to be judged as a grading of its own
    (``flags``: the diff filter's and the run's, as :func:`grade` collects them)."""

    passes: list[Pass]
    apply_output: str
    flags: set[HackFlag]
    seconds: float


def _recorded_gold(
    task: Task, template: Path, make_sandbox: SandboxFactory, limits: Limits
) -> tuple[gd.GoldValues, list[_GoldRun]]:
    """:func:`gold_values`, and the recording's gradings when this call made them (none
    when the values were already recorded)."""
    key = task.digest()
    if (found := gd.load(key, code_digest())) is not None:
        return found, []
    with _GOLD_LOCKS_LOCK:
        lock = _GOLD_LOCKS.setdefault(key, threading.Lock())
    with lock:
        if (found := gd.load(key, code_digest())) is not None:
            return found, []
        if task.test_spec.hash_seed:  # gold is recorded under the seed tasks grade under
            task = dataclasses.replace(
                task, test_spec=dataclasses.replace(task.test_spec, hash_seed=0)
            )
        v = task.test_spec
        kept, filtered = filter_diff(task.solution_patch.read_text(errors="surrogateescape"), v)
        runs, made = [], []
        for _ in range(GOLD_RUNS):
            start, flags = time.monotonic(), set(filtered)
            passes, apply_output = _verify(
                task,
                template,
                kept,
                flags,
                make_sandbox,
                limits,
                random.Random(secrets.randbits(64)),
            )
            made.append(_GoldRun(passes, apply_output, flags, time.monotonic() - start))
            verdict = judge_passes(passes, v.all_tests)
            values: gd.GoldValues = {}
            for p in passes if verdict.trusted else ():
                values.update(gd.from_run(p.run.channel, p.masked))
            runs.append(values)
        values = gd.agreed(runs)
        gd.save(key, code_digest(), values)
        return values, made


def grade_gold(
    task: Task,
    template: Path,
    *,
    runs: int,
    mode: RewardMode,
    make_sandbox: SandboxFactory,
    limits: Limits | None = None,
    leaked: Collection[tuple[str, int]] = (),
) -> list[GradeResult]:
    """``runs`` gradings of the task's gold patch, as :func:`grade` makes each. When gold's
    values are not recorded yet, the gradings that record them (:data:`GOLD_RUNS`, each
    in a fresh sandbox with its own canaries) are judged as gradings too, so a validation
    that grades gold several times records its values at no extra cost: they were two more
    runs of the whole suite per task (a quarter of a validation)."""
    diff = task.solution_patch.read_text(errors="surrogateescape")
    v = task.test_spec
    limits = dataclasses.replace(limits or Limits(), timeout_s=v.timeout_s)
    made: list[_GoldRun] = []
    if not v.hash_seed:  # else the recording's runs (under seed 0) are not this grading
        try:
            _, made = _recorded_gold(task, template, make_sandbox, limits)
        except SandboxError:
            made = []  # each grading below meets the failure and reports it
    out = [
        _judged(
            task,
            template,
            diff,
            r.passes,
            r.apply_output,
            r.flags,
            mode=mode,
            make_sandbox=make_sandbox,
            limits=limits,
            leaked=leaked,
            seconds=r.seconds,
        )
        for r in made[:runs]
    ]
    out += [
        grade(
            task, template, diff, mode=mode, make_sandbox=make_sandbox, limits=limits, leaked=leaked
        )
        for _ in range(runs - len(out))
    ]
    return out


def _witness_key(task: Task, leaked: Collection[tuple[str, int]]) -> str:
    leaks = json.dumps(sorted(leaked))
    return hashlib.sha256(
        f"{task.digest()}\0{task.test_spec.hash_seed}\0{leaks}".encode()
    ).hexdigest()


def noop_witnessed(
    task: Task,
    template: Path,
    *,
    make_sandbox: SandboxFactory,
    limits: Limits | None = None,
    leaked: Collection[tuple[str, int]] = (),
) -> list[str]:
    """The fail_to_pass tests whose failure at noop a strong seal shows, less those the
    strongest task-blind attack passed where that was recorded (:func:`record_forged`):
    what the seal floor counts as witnessed. Noop's part is recorded by a grading of no
    change, once per task, grading code and leak scan, then read from repogym's cache.
    Empty when noop's run could not be trusted: nothing is witnessed then, and the partial
    modes pay for a fail_to_pass test only once every test passes (:func:`score`).

    Raises:
        SandboxError: the infrastructure failed while recording.
    """
    key = _witness_key(task, leaked)
    if (found := gd.load_witnessed(key, code_digest())) is not None:
        return _unforged(found, key)
    noop = grade(
        task, template, "", mode="binary", make_sandbox=make_sandbox, limits=limits, leaked=leaked
    )
    if noop.infra_error:
        raise SandboxError(
            f"grading no change, for the tests a value seal witnesses: {noop.infra_error}"
        )
    return noop.witnessed or []


def _unforged(witnessed: Collection[str], key: str) -> list[str]:
    """``witnessed`` less the tests the strongest attack passed (:func:`record_forged`)."""
    forged = set(gd.load_forged(key, code_digest()) or ())
    return sorted(set(witnessed) - forged)


def record_forged(
    task: Task, result: GradeResult, leaked: Collection[tuple[str, int]] = ()
) -> list[str]:
    """Record the fail_to_pass tests that ``result``, a grading of the strongest task-blind
    attack with no fix, passed: however noop failed them, a check that code in the grading
    run can answer showed it (a strong check that noop never reached because an earlier
    statement raised, one that a soft rerun reaches with the value the unfixed code gives).
    From then on they are not witnessed (:func:`noop_witnessed`). Returns them; records
    nothing from a grading that was not trusted or did not run."""
    if result.infra_error or result.untrusted:
        return []
    passed = [t for t in task.test_spec.fail_to_pass if result.tests.get(t) == "passed"]
    gd.save_forged(_witness_key(task, leaked), code_digest(), passed)
    return passed


def grade(
    task: Task,
    template: Path,
    diff: str,
    *,
    mode: RewardMode,
    make_sandbox: SandboxFactory,
    limits: Limits | None = None,
    extra_flags: Collection[HackFlag | str] = (),
    rng: random.Random | None = None,
    leaked: Collection[tuple[str, int]] = (),
    alone: bool = False,
) -> GradeResult:
    """Grade ``diff`` for ``task`` in a fresh sandbox built by ``make_sandbox``.

    ``rng`` draws the canaries (default: a fresh secret seed each call). ``leaked`` holds
    (test file, line) of the sealed checks whose expected value the task's own files state
    (``repogym.quality.leaks``): they count as weak (``strongly_failed`` leaves them out);
    the verdict is the same. ``alone``: the run collects the listed tests (and the canaries
    beside them) instead of their whole files, for a grading of a few of a file's tests.
    """
    start = time.monotonic()
    v = task.test_spec
    kept, flags_list = filter_diff(diff, v)
    flags = set(flags_list) | {HackFlag(f) for f in extra_flags}
    limits = dataclasses.replace(limits or Limits(), timeout_s=v.timeout_s)
    rng = rng or random.Random(secrets.randbits(64))

    try:
        passes, apply_output = _verify(
            task, template, kept, flags, make_sandbox, limits, rng, alone
        )
    except SandboxError as e:
        return _infra(v, diff, flags, e, start)
    return _judged(
        task,
        template,
        diff,
        passes,
        apply_output,
        flags,
        mode=mode,
        make_sandbox=make_sandbox,
        limits=limits,
        leaked=leaked,
        seconds=time.monotonic() - start,
    )


def _infra(
    v: TestSpec, diff: str, flags: set[HackFlag], e: SandboxError, start: float
) -> GradeResult:
    """The result of a grading the infrastructure failed (every test missing, no reward)."""
    return GradeResult(
        0.0,
        False,
        {t: "missing" for t in v.all_tests},
        {},
        sorted(flags),
        diff,
        infra_error=str(e),
        duration_s=time.monotonic() - start,
    )


def _judged(
    task: Task,
    template: Path,
    diff: str,
    passes: list[Pass],
    apply_output: str,
    flags: set[HackFlag],
    *,
    mode: RewardMode,
    make_sandbox: SandboxFactory,
    limits: Limits,
    leaked: Collection[tuple[str, int]],
    seconds: float,
) -> GradeResult:
    """The :class:`GradeResult` of a grading whose passes have run (:func:`grade`'s
    second half): gold's values resolved, the passes judged, the reward scored."""
    start = time.monotonic() - seconds
    v = task.test_spec
    node_ids = list(v.all_tests)
    try:
        for masked in (p.masked for p in passes):
            if any(s.records_gold for s in masked.seals):
                gd.resolve(masked, gold_values(task, template, make_sandbox, limits))
            if leaked:
                masked.seals = [
                    dataclasses.replace(s, leaked=True) if (s.path, s.line) in leaked else s
                    for s in masked.seals
                ]
    except SandboxError as e:
        return _infra(v, diff, flags, e, start)

    masked, ex = passes[0].masked, passes[0].run.exec
    verdict = judge_passes(passes, node_ids)
    if HackFlag.TESTS_INSTALL_FAILED in flags:
        verdict = vr.Verdict(
            False,
            {t: "missing" for t in v.all_tests},
            set(),
            "the hidden tests could not be installed over the agent's diff",
        )
    flags |= verdict.flags
    tests = verdict.tests
    log = unmask_log(ex.stderr, masked)
    if verdict.trusted and v.log_parser == "swebench" and swebench_available():
        # the log is pytest's, which saw the tests the seals overruled pass
        pytest_saw = {t: "passed" if t in verdict.overruled else s for t, s in tests.items()}
        tests, contradicted = swebench_tests(log, v, pytest_saw, masked)
        if contradicted:
            flags.add(HackFlag.FORGED_RESULTS)
            tests = {t: "missing" for t in v.all_tests}
            verdict = vr.Verdict(False, tests, set(), "the log contradicts the channel")
        tests = {
            t: "failed" if t in verdict.sealed_failures and s == "passed" else s
            for t, s in tests.items()
        }  # pytest's log never saw the sealed checks
    log += sealed_report(verdict)
    witnessed = None
    if verdict.trusted:
        f2p = [tests.get(t) == "passed" for t in v.fail_to_pass]
        if not diff:  # this is noop: what its strong checks showed is the record
            key = _witness_key(task, leaked)
            shown = set(v.fail_to_pass) & verdict.strongly_failed
            gd.save_witnessed(key, code_digest(), sorted(shown))
            witnessed = _unforged(shown, key)
        elif any(f2p) and not all(tests.get(t) == "passed" for t in v.all_tests):
            # only an outcome short of a full pass, with a fail_to_pass test passing, scores
            # differently
            try:
                witnessed = noop_witnessed(
                    task, template, make_sandbox=make_sandbox, limits=limits, leaked=leaked
                )
            except SandboxError as e:
                return _infra(v, diff, flags, e, start)
    reward, breakdown = score(tests, v, mode, witnessed)
    if not verdict.trusted:
        reward, breakdown = 0.0, {**breakdown, "untrusted": 1.0}
    return GradeResult(
        reward=reward,
        resolved=reward == 1.0 and breakdown.get("all_passed") == 1.0,
        tests=tests,
        reward_breakdown=breakdown,
        hack_flags=sorted(flags),
        diff=diff,
        verifier_exit_code=ex.exit_code,
        test_output=log[-20000:],
        duration_s=time.monotonic() - start,
        untrusted=verdict.reason,
        sealed_failures=verdict.sealed_failures,
        strongly_failed=sorted(verdict.strongly_failed),
        apply_output=apply_output,
        witnessed=witnessed,
    )


def sealed_report(verdict: vr.Verdict) -> str:
    """A section for the log: the sealed checks that did not hold (pytest, which never sees
    the expected values, reports those tests as passed when nothing else failed)."""
    if not verdict.trusted or not verdict.overruled:
        return ""
    head = (
        "=== repogym: tests pytest passed whose sealed checks did not hold "
        "(expected values are hidden) ==="
    )
    lines = ["", head]
    for test in sorted(verdict.overruled):
        lines += [f"FAILED {test}: {f}" for f in verdict.sealed_failures[test]]
    return "\n".join(lines) + "\n"


def unmask_log(log: str, masked: cn.Masked) -> str:
    """The grading run's log with the tests' own names back (canaries keep theirs).

    One pass over the log, whole node ids only: replacing one name after another would
    rewrite a name already put back (``b -> c`` after ``a -> b``) or the head of a longer
    one (``test_add`` inside ``test_add_zero``).
    """
    back = {**masked.renamed, **{c: masked.original(c) for c in masked.case_ids}}
    if not back:
        return log
    # Every name is a node id, ``<file>::...``: look where a file's ``<file>::`` starts and
    # try its names there, longest first (a regex of every name took 0.45 s to compile for
    # jinja2's 1,000 tests, more than the rest of the judging).
    sizes: dict[str, set[int]] = {}
    for name in back:
        sizes.setdefault(name.split("::", 1)[0] + "::", set()).add(len(name))
    lengths = {head: sorted(n, reverse=True) for head, n in sizes.items()}
    starts = sorted(
        (i, head) for head in lengths for i in _occurrences(log, head) if not _id_char(log, i - 1)
    )
    out, end = [], 0
    for i, head in starts:
        if i < end:
            continue
        for n in lengths[head]:
            name = log[i : i + n]
            if name in back and not _word_char(log, i + n):
                out += [log[end:i], back[name]]
                end = i + n
                break
    return "".join([*out, log[end:]])


def _occurrences(text: str, part: str) -> Iterator[int]:
    i = text.find(part)
    while i >= 0:
        yield i
        i = text.find(part, i + 1)


def _word_char(text: str, i: int) -> bool:
    """Whether ``text[i]`` exists and is a regex ``\\w`` character."""
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def _id_char(text: str, i: int) -> bool:
    """Whether ``text[i]`` exists and could continue a node id before it (``\\w``, ``.``,
    ``/``, ``-``)."""
    return _word_char(text, i) or (0 <= i < len(text) and text[i] in "./-")


def swebench_available() -> bool:
    """True when the optional ``swebench`` package (``repogym[swebench]``) imports."""
    try:
        import swebench.harness.grading
        import swebench.harness.log_parsers  # noqa: F401
    except ImportError:
        return False
    return True


def swebench_tests(
    log: str, spec: TestSpec, channel: dict[str, str] | None, masked: cn.Masked | None = None
) -> tuple[dict[str, str], bool]:
    """Per-test outcomes as the official SWE-bench harness computes them from the log.

    The grading run's log (pytest run with ``-rA``; tests under their own names again, see
    :func:`unmask_log`) goes through swebench's
    ``parse_log_pytest`` and ``get_eval_tests_report``; a listed test counts as passed
    exactly when the official report puts it under ``success`` (so a skipped
    pass_to_pass test counts as kept, as in SWE-bench). Printed lines can fake a log, so a
    pass that the result channel contradicts (failed, error, skipped or missing there), or
    a must-fail canary the log calls PASSED, is returned as ``contradicted``. With
    ``channel`` None the log alone is read (no cross-check).

    Returns:
        (node id -> status, contradicted).
    """
    from swebench.harness.grading import get_eval_tests_report
    from swebench.harness.log_parsers import PARSER_REGISTRY

    status_map = PARSER_REGISTRY["parse_log_pytest"](log, None)
    report = get_eval_tests_report(
        status_map,
        {"FAIL_TO_PASS": list(spec.fail_to_pass), "PASS_TO_PASS": list(spec.pass_to_pass)},
    )
    success = set(report["FAIL_TO_PASS"]["success"]) | set(report["PASS_TO_PASS"]["success"])
    names = {"FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}
    tests: dict[str, str] = {}
    canaries = masked.canaries if masked else []
    contradicted = any(status_map.get(c.node_id) == "PASSED" for c in canaries if not c.must_pass)
    for t in spec.all_tests:
        if t in success:
            tests[t] = "passed"
            if channel is None:
                continue
            truncated_id = t.count("[") > t.count("]")  # SWE-bench's prefix-matched ids
            seen = channel.get(t, "missing")
            claimed = status_map.get(t) == "PASSED"
            # the channel reports xfail and skip as skipped; only a claimed PASSED contradicts
            if (
                seen in ("failed", "error")
                or (seen == "missing" and not truncated_id)
                or (seen == "skipped" and claimed)
            ):
                contradicted = True
        else:
            tests[t] = names.get(status_map.get(t, ""), "missing")
    return tests, contradicted


def diff_or_flag(sb: Sandbox) -> tuple[str, list[HackFlag]]:
    """The workspace diff, or an empty diff flagged ``diff_failed`` if the agent broke git."""
    try:
        return sb.diff(), []
    except DiffError:
        return "", [HackFlag.DIFF_FAILED]
