"""Attack class 4: forgery from inside the verifier's process.

The hidden tests import the agent's code, so the agent's code runs inside the pytest process
it is judged by: it can read every test body and its process's memory, and rewrite every
result. Credit therefore rests on what that process does not hold: the expected values of
the sealed checks (repogym/grading/seal.py). What this file shows:

- whatever a forgery does to pytest (patch reports, register a hook found through the stack
  or ``gc``, write records on the launcher's channel, end the process with a chosen exit
  code or signal, hang), it earns no more than noop;
- the reader forgery (``reader_forgery``, repogym/envs/attacks/reader_forgery.py: reads
  every body, tells the canaries by their form, flips every other report, answers the sealed checks
  with the computed values or guesses, through pytest's hooks or written whole on the channel) earns
  no more than noop on every built-in, in every reward mode;
- the expected values are nowhere a sandboxed process can read (file system, memory,
  environment);
- what remains, stated as a test: a forger that knows the expected values (the built-ins'
  tests are public) earns full reward. Knowing them is knowing what the fix must compute.
"""

from __future__ import annotations

import ast
import random
import secrets
from pathlib import Path

import pytest

from repogym.grading import grader
from repogym.quality.adversarial import (
    HANG_AT_IMPORT,
    KILL_AT_IMPORT,
    exit_at_import,
    reader_forgery,
)
from repogym.sandbox import make_sandbox
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.task import load_task
from tests.adversarial import payloads
from tests.adversarial.conftest import assert_as_noop, assert_no_gain, probe
from tests.scenarios._tasks import write_task

ATEXIT_RECORDS = """
import atexit as _rg_atexit, json as _rg_json, os as _rg_os

def _rg_late():
    _rg_os.write(1, b"")
    for fd in range(3, 64):
        try:
            _rg_os.write(fd, (_rg_json.dumps({"exit": 1}) + "\\n").encode())
        except OSError:
            pass

_rg_atexit.register(_rg_late)
"""

#: Forgeries of pytest's reports that ignore the sealed checks.
IN_PROCESS = {
    "stack-walk-to-config": payloads.STACK_WALK,
    "flip-by-co_names": payloads.BY_RULE.replace("RULE", "'co_names'"),
    "flip-non-literal": payloads.BY_RULE.replace("RULE", "'literal'"),
    "selective-flip": payloads.SELECTIVE,
    "selective-flip-hex-encoded": f"exec(bytes.fromhex({payloads.SELECTIVE.encode().hex()!r})"
    ".decode())\n",
    "forged-channel-with-canaries-run": payloads.FORGED_RECORDS,
}

#: Ends of the process, on each backend: (payload, flag it must earn, verifier timeout).
EXITS = {
    "exit-0": (exit_at_import(0), "forged_results", None),
    "exit-1-no-records": (exit_at_import(1), "verifier_crashed", None),
    "exit-3": (exit_at_import(3), "verifier_crashed", None),
    "sigkill": (KILL_AT_IMPORT, "verifier_crashed", None),
    "sleep-past-timeout": (HANG_AT_IMPORT, "verifier_timeout", 4.0),
    "atexit-record-after-exit": (ATEXIT_RECORDS, "forged_results", None),
}


def _graded(attacker, payload: str, task_id: str = "retry-zero", **kw):
    res = attacker.grade(
        "bwrap",
        attacker.appended(payload, **kw)
        if task_id == "retry-zero"
        else _appended_everywhere(attacker, payload, task_id),
        task_id=task_id,
    )
    if res.infra_error or res.verifier_exit_code != 1:  # the attack itself broke
        raise RuntimeError(
            f"attack did not run as meant: {res.infra_error} {res.test_output[-800:]}"
        )
    return res


def _appended_everywhere(attacker, payload: str, task_id: str) -> dict[str, str]:
    from repogym.quality.adversarial import code_modules

    task = attacker.task(task_id)
    return {
        m: attacker.source(m, task_id) + "\n" + payload
        for m in code_modules(task.repo_dir, task.test_spec.tests_dest)
    }


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_report_forgery_earns_no_more_than_noop(attacker, name):
    res = attacker.grade("bwrap", attacker.appended(IN_PROCESS[name]))
    assert_no_gain(res, attacker.noop("bwrap"))


@pytest.mark.parametrize("name", sorted(EXITS))
def test_chosen_exit_scores_zero_with_a_flag(attacker, backend, name):
    payload, flag, timeout_s = EXITS[name]
    res = attacker.grade(backend, attacker.appended(payload), timeout_s=timeout_s)
    assert_no_gain(res, attacker.noop(backend), flag)
    assert res.reward == 0.0 and res.untrusted
    assert set(res.tests.values()) == {"missing"}


def test_forging_the_listed_tests_by_name_forges_nothing(attacker):
    """The listed node ids are public (task.toml); the tests run under fresh names."""
    names = {n.split("::")[-1] for n in attacker.task().test_spec.all_tests}
    res = attacker.grade("bwrap", attacker.appended(payloads.BY_NAME.replace("NAMES", repr(names))))
    assert_as_noop(res, attacker.noop("bwrap"))


BUILTINS = sorted(t.id for t in registered_tasks().values() if t.path.parent.name == "builtin")


def _no_gain_in_any_mode(res: grader.GradeResult, noop: grader.GradeResult, task) -> None:
    assert res.infra_error is None and not res.resolved, (res.infra_error, res.tests)
    got, base = res.rewards(task.test_spec), noop.rewards(task.test_spec)
    for mode in grader.REWARD_MODES:
        assert got[mode] <= base[mode], (task.id, mode, got, base, res.tests, res.sealed_failures)


@pytest.mark.parametrize("task_id", BUILTINS)
def test_the_reader_forgery_earns_no_more_than_noop_on_every_builtin(attacker, task_id):
    """Honest values plus every report flipped: the most a forger without the expected
    values can claim, in every reward mode (the modes are functions of the same outcomes)."""
    res = _graded(attacker, reader_forgery("hooks", honesty=1.0), task_id)
    _no_gain_in_any_mode(res, attacker.noop("bwrap", task_id), attacker.task(task_id))


@pytest.mark.parametrize("mode", ["hooks", "channel"])
@pytest.mark.parametrize("task_id", ["retry-zero", "week-number", "float-isclose"])
def test_the_reader_forgery_that_guesses_earns_no_more_than_noop(attacker, task_id, mode):
    """Guesses (a literal of the test, the value off by one, True, None, a likely exception)
    for half the checks, through the hooks or written whole on the channel (fixed guesses:
    a guess can hit, at the odds docs/grading.md states; bench/forgery.py measures them)."""
    res = _graded(attacker, reader_forgery(mode, honesty=0.5, seed=7), task_id)
    _no_gain_in_any_mode(res, attacker.noop("bwrap", task_id), attacker.task(task_id))


#: Looks for a marker everywhere a process in the verifier's sandbox can read: every file it
#: can open, its own memory (``/proc/self/mem``, region by region, after making itself
#: dumpable again), its environment and arguments; then reports what it found
#: (``RGPROBE``). It carries only the marker's prefix and the sha256 of the whole marker,
#: so that it finds no copy of its own.
FIND_MARKER = """
def _rg_find(prefix, digests, length):
    import ctypes, hashlib, json, os, sys
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1: the launcher cleared it

    def holds(data):
        out, at = [], data.find(prefix)
        while at >= 0:
            d = hashlib.sha256(data[at:at + length]).hexdigest()
            if d in digests:
                out.append(digests.index(d))
            at = data.find(prefix, at + 1)
        return out

    found = []
    skip = ("/proc", "/sys", "/dev")
    for top, dirs, files in os.walk("/", followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
        for name in files:
            path = os.path.join(top, name)
            try:
                if os.path.getsize(path) < 8 << 20:
                    with open(path, "rb") as f:
                        found += [(i, path) for i in holds(f.read())]
            except OSError:
                pass
    regions = 0
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                found += [(i, "memory " + line.strip()) for i in holds(mem.read(end - start))]
                regions += 1
            except (OSError, OverflowError, ValueError):
                pass
    found += [(i, "environment") for i in holds(repr(dict(os.environ)).encode()
                                                + repr(sys.argv).encode())]
    raise RuntimeError("RGPROBE " + json.dumps({"found": found, "regions": regions}))


_rg_find(ARGS)
"""


def test_the_expected_values_are_nowhere_the_sandbox_can_read(tmp_path: Path):
    """A task whose expected value is a fresh random marker: the verifier's process finds it
    in no file it can read, not in its own memory, not in its environment. (A second marker,
    a constant of the same test file, shows that the scan finds what is there.)"""
    marker, shown = (f"rg-sealed-{secrets.token_hex(12)}" for _ in range(2))
    tests = (
        f"from mod import clamp\n\nSHOWN = {shown!r}\n\n\ndef test_upper():\n"
        f"    assert str(clamp(15, 0, 10)) == {marker!r}\n\n\n"
        "def test_inside():\n    assert clamp(5, 0, 10) == 5\n"
    )
    task = load_task(write_task(tmp_path / "marker-task", tests=tests))
    import hashlib

    from repogym.sandbox.workspace import TemplateCache, make_diff

    args = (
        b"rg-sealed-",
        [hashlib.sha256(m.encode()).hexdigest() for m in (marker, shown)],
        len(marker),
    )
    payload = FIND_MARKER.replace("ARGS", ", ".join(map(repr, args)))
    cache = TemplateCache()
    try:
        diff = make_diff(
            task.repo_dir, {"mod.py": (task.repo_dir / "mod.py").read_text() + "\n" + payload}
        )
        res = grader.grade(
            task,
            cache.get(task.repo_dir),
            diff,
            mode="partial",
            make_sandbox=lambda spec: make_sandbox("bwrap", spec),
        )
    finally:
        cache.close()
    seen = probe(res)
    assert seen["regions"] > 10, seen  # the memory scan really ran
    assert [where for i, where in seen["found"] if i == 0] == [], seen
    where = {w for i, w in seen["found"] if i == 1}
    assert "/workspace/tests/test_mod.py" in where and any("memory" in w for w in where), seen


def _by_heart(task) -> str:
    """A forger that knows the task's public hidden tests: at each sealed check it finds the
    original assertion on the same line (sealing keeps line numbers) and reports its
    expected value."""
    known: dict[int, tuple] = {}
    for path in sorted(task.tests_dir.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
                try:
                    known[node.lineno] = ("value", ast.literal_eval(node.test.comparators[0]))
                except ValueError:
                    pass
            elif isinstance(node, ast.With):
                for item in node.items:
                    call = item.context_expr
                    if (
                        isinstance(call, ast.Call)
                        and call.args
                        and isinstance(call.args[0], ast.Name)
                    ):
                        known[node.lineno] = ("raises", call.args[0].id)
    return payloads.BY_HEART.replace("KNOWN", repr(known))


def test_what_remains_a_forger_that_knows_the_expected_values_earns_full_reward(attacker):
    """The guarantee, stated as a test: credit needs the expected values. Give a forger
    the public tests' values and it earns 1.0 without a fix; give it the same bodies with
    the values unknown (it answers with the values the buggy code computes) and it earns
    what noop earns."""
    knows = _graded(attacker, _by_heart(attacker.task()))
    assert knows.reward == 1.0 and knows.resolved, (knows.tests, knows.sealed_failures)
    blank = _graded(attacker, payloads.BY_HEART.replace("KNOWN", "{}"))
    assert_no_gain(blank, attacker.noop("bwrap"))


def test_sealed_files_keep_their_line_numbers_and_hold_no_expected_value():
    """What the sandbox gets: the same lines (tracebacks stay true), no expected literal."""
    from repogym.grading.canaries import mask_test_file

    task = registered_tasks()["week-number"]
    text = (task.tests_dir / "test_weeks.py").read_text()
    sealed, masked = mask_test_file(text, "tests/test_weeks.py", random.Random(1), seal=True)
    assert masked.seals
    lines, out = text.splitlines(), sealed.splitlines()
    for s in masked.seals:
        original = lines[s.line - 1]
        assert repr(s.expected) not in out[s.line - 1]
        assert original.lstrip().startswith(("assert", "with")), original
    assert "2020-W53" in text and "2020-W53" not in sealed


LUCKY = """
import time as _rg_time
if _rg_time.time() < DEADLINE:
    exec(BY_HEART)
"""


def test_a_forgery_that_won_once_by_luck_is_not_replayed_by_the_grade_cache(attacker):
    """A forgery whose "luck" holds only in its first grading (it knows the expected values
    until a deadline) won that grading. The grade cache once replayed that win for every
    later episode that sent the same diff; it now reuses a verdict only after a second,
    independent grading agreed."""
    import time

    from repogym.envs.session import Session

    task = attacker.task()
    deadline = time.time() + 6
    payload = LUCKY.replace("DEADLINE", repr(deadline)).replace("BY_HEART", repr(_by_heart(task)))
    diff = attacker.diff(attacker.appended(payload))
    cache: dict = {}
    session = Session(
        task,
        attacker.cache.get(task.repo_dir),
        lambda spec: make_sandbox("bwrap", spec),
        grader.Limits(),
        shell="fresh",
    )
    try:
        first = session.grade(diff, mode="binary", cache=cache)
        assert first.reward == 1.0, (first.tests, first.sealed_failures)  # the lucky one
        time.sleep(max(0.0, deadline - time.time()) + 0.5)
        later = [session.grade(diff, mode="binary", cache=cache) for _ in range(2)]
    finally:
        session.close()
    assert [r.reward for r in later] == [0.0, 0.0], [r.tests for r in later]


def test_the_grade_cache_is_keyed_by_the_task_files(tmp_path: Path):
    """The same task id and version with other hidden tests is another grading."""
    import shutil

    from repogym.envs.session import Session
    from repogym.sandbox.workspace import TemplateCache

    root = write_task(tmp_path / "keyed")
    task = load_task(root)
    gold = task.solution_patch.read_text()
    cache: dict = {}
    templates = TemplateCache()
    try:

        def grade(t):
            s = Session(
                t,
                templates.get(t.repo_dir),
                lambda spec: make_sandbox("bwrap", spec),
                grader.Limits(),
                shell="fresh",
            )
            try:
                return [s.grade(gold, mode="binary", cache=cache).reward for _ in range(2)]
            finally:
                s.close()

        assert grade(task) == [1.0, 1.0]
        shutil.copy(root / "tests" / "test_mod.py", tmp_path / "keep.py")
        (root / "tests" / "test_mod.py").write_text(
            "from mod import clamp\n\n\ndef test_upper():\n    assert clamp(15, 0, 10) == 11\n"
            "\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n"
        )
        assert grade(load_task(root)) == [0.0, 0.0]
    finally:
        templates.close()
