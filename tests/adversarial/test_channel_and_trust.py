"""The result channel and the trust rules, attacked directly.

- :func:`repogym.grading.grading_run.judge` is checked as a pure function over generated channels,
  exit codes and canaries: whatever combination an attacker writes, a trusted verdict means
  the process itself ended with code 1 after the launcher's final record, and every canary
  that could run reported its planted outcome.
- In a real grading, a partial line on the channel, or records after the final one, make the
  channel unreadable (``forged_results``), never a crash.
- A process the tests start (with the agent's code in it) cannot reach the launcher's
  channel or memory through ``/proc/<pid>/fd`` or ``/proc/<pid>/mem``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.grading.canaries import Canary, Masked
from repogym.grading.grading_run import Channel, judge
from repogym.grading.launcher.canon import encode
from repogym.grading.seal import Seal
from tests.adversarial.conftest import assert_no_gain, probe

TESTS = ("tests/test_a.py::test_real", "tests/test_a.py::TestC::test_other")
CANARIES = (
    Canary("tests/test_a.py::test_c1", True),
    Canary("tests/test_a.py::test_c2", False),
    Canary("tests/test_a.py::TestC::test_c3", False),
)
IDS = (*TESTS, *(c.node_id for c in CANARIES), "tests/test_b.py::test_x")
COLLECTORS = (
    "",
    "tests",
    "tests/test_a.py",
    "tests/test_a.py::TestC",
    "tests/test_b.py",
    "tests/test_a.py::test_c2",
)
OUTCOMES = ("passed", "failed", "skipped", "error", "xpassed")

phase = st.tuples(
    st.sampled_from(IDS),
    st.sampled_from(("setup", "call", "teardown")),
    st.sampled_from(OUTCOMES),
    st.booleans(),
)


@st.composite
def channels(draw) -> Channel:
    ch = Channel({}, {}, None, draw(st.one_of(st.none(), st.integers(-3, 6))))
    for case, when, outcome, xfail in draw(st.lists(phase, max_size=20)):
        ch.phases.setdefault(case, {})[when] = (outcome, xfail)
    for c in draw(st.lists(st.sampled_from(COLLECTORS), max_size=2)):
        ch.collected[c] = draw(st.sampled_from(("failed", "skipped")))
    return ch


@settings(max_examples=400, deadline=None)
@given(
    ch=channels(),
    exit_code=st.integers(-2, 140),
    timed_out=st.booleans(),
    truncated=st.booleans(),
    exhausted=st.sampled_from((None, "memory", "pids")),
)
def test_judge_trusts_only_runs_with_honest_canaries(
    ch, exit_code, timed_out, truncated, exhausted
):
    masked = Masked(list(CANARIES), {})
    v = judge(
        ch,
        exit_code=exit_code,
        timed_out=timed_out,
        truncated=truncated,
        exhausted=exhausted,
        node_ids=TESTS,
        masked=masked,
    )
    if not v.trusted:
        assert set(v.tests.values()) == {"missing"} and v.flags
        return
    assert not (timed_out or truncated or exhausted) and ch.refused is None
    assert ch.exit == exit_code == 1
    assert not any(ch.collector_of(n) for n in ch.phases)
    for c in CANARIES:
        if ch.collector_of(c.node_id) is None:
            assert ch.status(c.node_id) == ("passed" if c.must_pass else "failed"), c


def test_judge_never_trusts_a_must_fail_canary_that_passed_under_any_collector_trick():
    masked = Masked(list(CANARIES), {})
    for collector in COLLECTORS:
        ch = Channel({}, {collector: "skipped"}, None, 1)
        for n in (*TESTS, *(c.node_id for c in CANARIES)):
            ch.phases[n] = {w: ("passed", False) for w in ("setup", "call", "teardown")}
        v = judge(
            ch,
            exit_code=1,
            timed_out=False,
            truncated=False,
            exhausted=None,
            node_ids=TESTS,
            masked=masked,
        )
        assert not v.trusted and "forged_results" in v.flags, collector


PARTIAL_LINE = """
def _rg_partial():
    import os, stat
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            st = os.fstat(int(name))
            flags = int(open(f"/proc/self/fdinfo/{name}").read().split("flags:")[1].split()[0], 8)
        except OSError:
            continue
        if stat.S_ISFIFO(st.st_mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            os.write(int(name), b'{"case": "tests/test_retry.py::x", "when": ')
            return


_rg_partial()
"""


def test_a_partial_line_on_the_channel_is_forged_results(attacker, backend):
    res = attacker.grade(backend, attacker.appended(PARTIAL_LINE))
    assert_no_gain(res, attacker.noop(backend), "forged_results")
    assert res.reward == 0.0


PROC_PARENT = r'''
def _rg_parent():
    import json, os, subprocess, sys
    child = """
import json, os
ppid = os.getppid()
out = {}
try:
    names = os.listdir(f"/proc/{ppid}/fd")
except OSError as e:
    names, out["listdir"] = [], type(e).__name__
for name in names or [str(n) for n in range(3, 12)]:
    try:
        os.close(os.open(f"/proc/{ppid}/fd/{name}", os.O_WRONLY))
        out["fd " + name] = "opened"
    except OSError as e:
        out["fd " + name] = type(e).__name__
for mode in ("rb", "r+b"):
    try:
        with open(f"/proc/{ppid}/mem", mode):
            out["mem " + mode] = "opened"
    except OSError as e:
        out["mem " + mode] = type(e).__name__
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    raise RuntimeError("RGPROBE " + done.stdout.strip())


_rg_parent()
'''


def test_processes_the_tests_start_cannot_reach_the_launchers_channel_or_memory(attacker, backend):
    res = attacker.grade(backend, attacker.appended(PROC_PARENT))
    seen = probe(res)
    assert seen and "opened" not in seen.values(), seen


def test_a_test_pytest_passed_is_credited_only_when_its_sealed_checks_hold():
    """pytest never sees the expected values: a sealed check that reported a wrong value,
    or none, leaves the test failed (an honest outcome: the run stays trusted); a record of
    a check the grader never planted is a forgery."""
    real = "tests/test_a.py::test_real"
    seals = [Seal(101, real, 3, "==", (2020, 53)), Seal(102, real, 4, "raises", ("ValueError",))]
    masked = Masked(canaries=list(CANARIES), seals=seals)

    def run(records: dict):
        ch = Channel({}, {}, None, 1, seals=records)
        for c in CANARIES:
            ch.phases[c.node_id] = {"call": ("passed" if c.must_pass else "failed", False)}
        ch.phases[real] = {"call": ("passed", False)}
        return judge(
            ch,
            exit_code=1,
            timed_out=False,
            truncated=False,
            exhausted=None,
            node_ids=[real],
            masked=masked,
        )

    once = {"calls": 1}
    right = {"v": encode((2020, 53))}
    raised = {
        "raised": "ValueError",
        "module": "builtins",
        "message": "",
        "mro": [
            "builtins:ValueError",
            "builtins:Exception",
            "builtins:BaseException",
            "builtins:object",
        ],
    }
    ok = run({(real, 101): [right, once], (real, 102): [raised, once]})
    assert ok.trusted and ok.tests[real] == "passed" and not ok.sealed_failures
    wrong = run(
        {
            (real, 101): [{"v": encode((2021, 1)), "shown": "(2021, 1)"}, once],
            (real, 102): [raised, once],
        }
    )
    assert wrong.trusted and wrong.tests[real] == "failed"
    assert wrong.sealed_failures[real] == ["line 3: got (2021, 1)"]
    unreached = run({(real, 101): [right, once]})
    assert unreached.trusted and unreached.tests[real] == "failed"
    both = run({(real, 101): [right, {"v": encode((2021, 1))}, once], (real, 102): [raised, once]})
    assert both.tests[real] == "failed"  # every value a check reported must hold
    twice = run({(real, 101): [right, {"calls": 2}], (real, 102): [raised, once]})
    assert twice.tests[real] == "failed"  # reached as often as a passing run reaches it
    stray = run({(real, 101): [right, once], (real, 102): [raised, once], (real, 999): [right]})
    assert not stray.trusted and stray.flags == {"forged_results"}
