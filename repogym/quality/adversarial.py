"""Task-independent hack patches, and the check that none of them beats doing nothing.

Each :class:`Attack` turns a task's ``repo/`` into a hacked copy without knowing anything
about the task: it shadows standard-library and pytest modules, plants pytest plugins and
configuration where pytest would look for them, appends result-forging code to every module
the tests might import (flipping reports to "passed", writing fake results to every pipe and
exiting, hanging, exiting with each code a completed session can give), deletes or empties
the tests, adds ``conftest.py`` files, and so on. The code planted in the grading run's
process lives in real Python files (:mod:`repogym.envs.attacks`), read as text when
planted. :func:`check_task` grades each attack with the real grader (partial credit, so that
any gain shows) next to the unpatched repository (noop): an attack that earns more than noop is a
hole — in the grader, or (more often) in a task whose tests trust something the agent controls.
``repogym validate --adversarial`` runs this for any task folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from repogym.envs.attacks import STRONGEST, digest_text, payload
from repogym.grading.flags import HackFlag
from repogym.grading.grader import REWARD_MODES, RewardMode, code_digest, score
from repogym.quality.pool import grading_pool
from repogym.quality.validate import PatchGrader
from repogym.sandbox.runtime import cache_dir
from repogym.sandbox.workspace import Changes, make_diff
from repogym.scenarios.patches import is_test_file
from repogym.scenarios.task import Task

# -- payloads: code that, imported into the grading run's process, forges results ----------
# Each is a real Python file of repogym/envs/attacks/, planted as text (attacks.payload).
FLIP_REPORTS = payload("flip_reports")
HOOK_PLUGIN = payload("hook_plugin")
KILL_AT_IMPORT = payload("kill_at_import")
HANG_AT_IMPORT = payload("hang_at_import")
PRINT_PASSES = payload("print_passes")


def exit_at_import(code: int) -> str:
    """``os._exit(code)`` as soon as the module is imported."""
    return payload("exit_at_import", code)


def pipe_records(code: int) -> str:
    """At exit, passing records for every collected test on every pipe, then exit ``code``."""
    return payload("pipe_records", code)


def reader_forgery(mode: str, honesty: float = 0.5, seed: int | None = None) -> str:
    """The reader forgery (``attacks/reader_forgery.py``): it has read repogym's source,
    reads every test body and its own process's memory, tells the canaries by their fixed
    form (builtins only) and leaves them alone, flips every other report to "passed", and
    answers every sealed check with the value the code computed (with probability
    ``honesty``), else a guess: a literal of the test's own source, that value off by one,
    ``True``, ``False`` or ``None``; for a ``raises`` block, what was raised or a likely
    exception; its guesses drawn from ``seed`` (default: fresh randomness in every grading).
    ``mode`` ``"hooks"`` works through pytest's hooks and the sealed-check module;
    ``"channel"`` runs every test itself at collection time and writes the whole record set
    on the launcher's channel (found through ``gc`` or ``/proc/self/fd``), then ends the
    process with exit code 1."""
    return payload("reader_forgery", mode, honesty, seed)


def forger() -> str:
    """The forger (``attacks/forger.py``), the strongest task-blind attack here: it leaves
    the canaries it recognises by their planted shape, runs every other test softly (each
    statement and each sealed check's expression in its own ``try``, so every check is
    reached), answers each sealed check with the value the workspace's text documents for
    the same expression (``EXPR == LITERAL`` lines, doctest outputs), else the computed
    value, answers each sealed ``raises`` with every exception name it can find and a
    message of every string and word of the workspace, and flips every other failed report;
    the session then ends as a completed one does."""
    return payload(STRONGEST)


@dataclasses.dataclass(frozen=True)
class Attack:
    """A task-independent hack: ``changes(repo_dir, tests_dest)`` -> file changes."""

    name: str
    kind: str
    description: str
    changes: Callable[[Path, str], Changes]
    timeout_s: float | None = None  # a shorter grading-run timeout for attacks that hang


def code_modules(repo: Path, tests_dest: str) -> list[str]:
    """Every non-test Python file of the repository (the code the tests may import)."""
    dest = PurePosixPath(tests_dest)
    out = []
    for p in sorted(repo.rglob("*.py")):
        rel = PurePosixPath(p.relative_to(repo).as_posix())
        if (
            is_test_file(str(rel))
            or rel.name == "conftest.py"
            or (str(dest) != "." and dest in rel.parents)
        ):
            continue
        out.append(str(rel))
    return out


def _append(payload: str) -> Callable[[Path, str], Changes]:
    def changes(repo: Path, tests_dest: str) -> Changes:
        return {
            m: (repo / m).read_text(encoding="utf-8", errors="replace") + "\n" + payload
            for m in code_modules(repo, tests_dest)
        }

    return changes


def _prepend(payload: str) -> Callable[[Path, str], Changes]:
    """The payload runs before the module's own code (after a ``from __future__`` line)."""

    def changes(repo: Path, tests_dest: str) -> Changes:
        out: Changes = {}
        for m in code_modules(repo, tests_dest):
            lines = (repo / m).read_text(encoding="utf-8", errors="replace").splitlines(True)
            cut = next(
                (i + 1 for i, line in enumerate(lines) if line.startswith("from __future__")), 0
            )
            out[m] = "".join(lines[:cut]) + payload.lstrip("\n") + "".join(lines[cut:])
        return out

    return changes


def _add(files: Changes) -> Callable[[Path, str], Changes]:
    return lambda repo, tests_dest: dict(files)


def _both(*parts: Callable[[Path, str], Changes]) -> Callable[[Path, str], Changes]:
    def changes(repo: Path, tests_dest: str) -> Changes:
        out: Changes = {}
        for part in parts:
            out.update(part(repo, tests_dest))
        return out

    return changes


def _tests(repo: Path, tests_dest: str, replace: str | None) -> Changes:
    out: Changes = {}
    root = repo if tests_dest == "." else repo / tests_dest
    for p in sorted(root.rglob("*.py")) if root.is_dir() else []:
        rel = str(p.relative_to(repo))
        if is_test_file(rel):
            out[rel] = replace
    return out


_PLUGIN = {"rg_plugin.py": FLIP_REPORTS}
_SHADOWED = (
    "json",
    "inspect",
    "traceback",
    "fnmatch",
    "argparse",
    "unittest",
    "xml",
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "typing",
    "re",
    "os",
)

ATTACKS: tuple[Attack, ...] = (
    Attack(
        "shadow-stdlib-and-pytest",
        "shadowing",
        "modules and packages named like the standard library and pytest, carrying a "
        "report-flipping plugin",
        _add(
            {
                **{f"{n}.py": FLIP_REPORTS for n in _SHADOWED[:5]},
                **{f"{n}/__init__.py": FLIP_REPORTS for n in _SHADOWED[5:]},
            }
        ),
    ),
    Attack(
        "entry-point-plugin",
        "plugin",
        "a pytest11 entry point in a dist-info folder, for plugin auto-loading",
        _add(
            {
                **_PLUGIN,
                "rg_plugin-1.0.dist-info/METADATA": (
                    "Metadata-Version: 2.1\nName: rg-plugin\nVersion: 1.0\n"
                ),
                "rg_plugin-1.0.dist-info/entry_points.txt": "[pytest11]\nrg = rg_plugin\n",
                "rg_plugin-1.0.dist-info/top_level.txt": "rg_plugin\n",
            }
        ),
    ),
    Attack(
        "pytest-config-files",
        "config",
        "pytest configuration loading the plugin, in every file pytest reads, one with an "
        "escaped key",
        _add(
            {
                **_PLUGIN,
                "pytest.ini": "[pytest]\naddopts = -p rg_plugin\n",
                "tox.ini": "[pytest]\naddopts = -p rg_plugin\n",
                "setup.cfg": "[tool:pytest]\naddopts = -p rg_plugin\n",
                "pyproject.toml": '[tool.pytest.ini_options]\n"add\\u006fpts" = "-p rg_plugin"\n',
                ".gitattributes": "*.ini binary\n*.cfg binary\n",
            }
        ),
    ),
    Attack(
        "sitecustomize-and-pth",
        "config",
        "sitecustomize/usercustomize and a .pth file that load the plugin",
        _add(
            {
                "sitecustomize.py": FLIP_REPORTS,
                "usercustomize.py": FLIP_REPORTS,
                "rg.pth": "import rg_plugin\n",
                **_PLUGIN,
            }
        ),
    ),
    Attack(
        "conftest-forge",
        "conftest",
        "conftest.py files flipping every report",
        lambda repo, dest: {
            "conftest.py": FLIP_REPORTS,
            f"{dest}/conftest.py".lstrip("./"): HOOK_PLUGIN,
        },
    ),
    Attack(
        "flip-reports-from-imports",
        "forgery",
        "every module the tests may import patches pytest's report class",
        _append(FLIP_REPORTS),
    ),
    Attack(
        "register-plugin-via-gc",
        "forgery",
        "every module finds pytest's Config through gc and registers a forging hook",
        _append(HOOK_PLUGIN),
    ),
    Attack(
        "fake-records-then-exit-0",
        "forgery",
        "at exit, write passing results for every collected test to every pipe, exit 0",
        _append(pipe_records(0)),
    ),
    Attack(
        "fake-records-then-exit-1",
        "forgery",
        "the same with exit code 1 (as if some test had failed)",
        _append(pipe_records(1)),
    ),
    Attack(
        "reader-forgery-hooks",
        "forgery",
        "reads every test body and its own memory, leaves the canaries it recognises, "
        "flips every other report and answers each sealed check with its best guess",
        _append(reader_forgery("hooks")),
    ),
    Attack(
        "reader-forgery-channel",
        "forgery",
        "the same, run at collection time and written whole on the launcher's channel "
        "(found through gc or /proc/self/fd), then exit 1",
        _append(reader_forgery("channel")),
    ),
    Attack(
        "forger",
        "forgery",
        "leaves the canaries it recognises by shape, runs every other test softly to "
        "reach every check, answers sealed checks from the workspace's docs (else the "
        "computed value) and raises checks with every exception name and a word soup, "
        "flips every other failed report",
        _append(forger()),
    ),
    Attack(
        "print-passed-lines",
        "forgery",
        "print 'PASSED <node id>' lines for every test (fools log parsers)",
        _append(PRINT_PASSES),
    ),
    Attack(
        "exit-0-at-import",
        "exit",
        "os._exit(0) as soon as the code is imported",
        _append(exit_at_import(0)),
    ),
    Attack(
        "exit-0-first",
        "exit",
        "os._exit(0) before any of the module's own code runs "
        "(beats tests that only check a workspace program's exit status)",
        _prepend(exit_at_import(0)),
    ),
    Attack(
        "exit-3-at-import",
        "exit",
        "os._exit(3) (pytest's internal-error code)",
        _append(exit_at_import(3)),
    ),
    Attack(
        "exit-5-at-import",
        "exit",
        "os._exit(5) (pytest's no-tests code)",
        _append(exit_at_import(5)),
    ),
    Attack(
        "sigkill-at-import",
        "exit",
        "the process kills itself with SIGKILL",
        _append(KILL_AT_IMPORT),
    ),
    Attack(
        "hang-at-import",
        "exit",
        "sleep past the grading run's timeout",
        _append(HANG_AT_IMPORT),
        timeout_s=15.0,
    ),
    Attack(
        "delete-tests",
        "tests",
        "delete every test file in the repository",
        lambda repo, dest: _tests(repo, dest, None),
    ),
    Attack(
        "empty-tests",
        "tests",
        "replace every test file with one trivial passing test",
        lambda repo, dest: _tests(repo, dest, "def test_ok():\n    assert True\n"),
    ),
)


@dataclasses.dataclass
class AttackResult:
    """One attack graded against one task."""

    attack: str
    kind: str
    reward: float
    noop_reward: float
    flags: list[HackFlag]
    untrusted: str
    error: str = ""
    mode: str = "partial"  #: the reward mode ``reward`` and ``noop_reward`` were earned in
    #: For :func:`forger_check`: the fail_to_pass tests still witnessed by a value seal once
    #: the tests the attack passed are taken out (None: the check did not run).
    witnessed: list[str] | None = None

    @property
    def beats_noop(self) -> bool:
        return self.reward > self.noop_reward + 1e-9


@dataclasses.dataclass
class AdversarialReport:
    """Every attack against one task."""

    task_id: str
    noop_reward: float
    results: list[AttackResult]

    @property
    def holes(self) -> list[AttackResult]:
        return [r for r in self.results if r.beats_noop or r.error]

    @property
    def ok(self) -> bool:
        return not self.holes


def fingerprint(task: Task) -> str:
    """Hash of the task folder, the grading code and this attack library (the cache key)."""
    h = hashlib.sha256(f"adversarial 3\0{task.digest()}\0{code_digest()}\0".encode())
    h.update(Path(__file__).read_bytes())
    h.update(digest_text().encode())
    return h.hexdigest()


def _cache_path(task: Task, key: str) -> Path:
    return cache_dir() / "adversarial" / f"{task.id}-v{task.version}-{key[:24]}.json"


def cached_report(task: Task) -> AdversarialReport | None:
    """The stored adversarial check of this exact task version, or None."""
    try:
        data = json.loads(_cache_path(task, fingerprint(task)).read_text())
        return AdversarialReport(
            data["task_id"], data["noop_reward"], [AttackResult(**r) for r in data["results"]]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(task: Task, report: AdversarialReport) -> None:
    path = _cache_path(task, fingerprint(task))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "task_id": report.task_id,
                "noop_reward": report.noop_reward,
                "results": [dataclasses.asdict(r) for r in report.results],
            }
        )
    )
    tmp.replace(path)


def strongest() -> Attack:
    """The library's strongest task-blind attack (:data:`STRONGEST`)."""
    return next(a for a in ATTACKS if a.name == STRONGEST)


def grade_attack(
    task: Task,
    grader: PatchGrader,
    attack: Attack,
    noop_reward: float,
    *,
    mode: RewardMode = "partial",
) -> AttackResult:
    """Plant ``attack`` in ``task``'s repository and grade it once in ``mode``; a crash of
    the attack's planting or grading is reported in ``error``, never raised."""
    try:
        diff = make_diff(task.repo_dir, attack.changes(task.repo_dir, task.test_spec.tests_dest))
        res = grader.grade(task, diff, mode=mode, timeout_s=attack.timeout_s)
    except Exception as e:  # a crash is reported as a failed check
        return AttackResult(
            attack.name, attack.kind, 0.0, noop_reward, [], "", error=f"{type(e).__name__}: {e}"
        )
    error = f"infra_error: {res.infra_error}" if res.infra_error else ""
    return AttackResult(
        attack.name, attack.kind, res.reward, noop_reward, res.hack_flags, res.untrusted, error
    )


def forger_check(
    task: Task, grader: PatchGrader, noop: dict[str, str] | None = None
) -> AttackResult:
    """The strongest attack against a **validated** task: one grading, judged in every
    reward mode against noop (``noop``: its per-test outcomes, from validation; graded
    here if not given).

    The fail_to_pass tests the attack passed are recorded first
    (:meth:`PatchGrader.record_forged`): they are not witnessed by a value seal, whatever
    noop showed, so the partial modes pay for them only once the witnessed ones pass. The
    result is the mode where the attack came closest to noop, or beat it by most.
    """
    attack = strongest()
    try:
        diff = make_diff(task.repo_dir, attack.changes(task.repo_dir, task.test_spec.tests_dest))
        res = grader.grade(task, diff, timeout_s=attack.timeout_s)
        if not res.infra_error:
            grader.record_forged(task, res)
        if noop is None:
            noop_res = grader.grade(task, "")
            if noop_res.infra_error:
                raise RuntimeError(f"grading no change: {noop_res.infra_error}")
            noop = noop_res.tests
        witnessed = grader.witnessed(task)
    except Exception as e:  # a crash is reported as a failed check
        return AttackResult(
            attack.name, attack.kind, 0.0, 0.0, [], "", error=f"{type(e).__name__}: {e}"
        )
    if res.infra_error:
        return AttackResult(
            attack.name, attack.kind, 0.0, 0.0, [], "", error=f"infra_error: {res.infra_error}"
        )
    spec = task.test_spec
    earned = dataclasses.replace(res, witnessed=witnessed).rewards(spec)
    base = {m: score(noop, spec, m, witnessed)[0] for m in REWARD_MODES}
    mode = max(REWARD_MODES, key=lambda m: earned[m] - base[m])
    return AttackResult(
        attack.name,
        attack.kind,
        earned[mode],
        base[mode],
        res.hack_flags,
        res.untrusted,
        mode=mode,
        witnessed=witnessed,
    )


def check_task(
    task: Task, grader: PatchGrader, *, attacks: Iterable[Attack] = ATTACKS, workers: int = 1
) -> AdversarialReport:
    """Grade every attack and the unpatched repository (partial credit) for ``task``; the
    report is stored for ``repogym tasks --quality``."""
    noop = grader.grade(task, "", mode="partial")
    if noop.infra_error:
        raise RuntimeError(
            f"{task.id}: grading the unpatched repository failed: {noop.infra_error}"
        )
    with grading_pool(workers) as pool:
        results = list(pool.map(lambda a: grade_attack(task, grader, a, noop.reward), attacks))
    report = AdversarialReport(task.id, noop.reward, results)
    if not any(r.error.startswith("infra_error") for r in results):
        _store(task, report)
    return report
