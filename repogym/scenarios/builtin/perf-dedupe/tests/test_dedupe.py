"""Hidden verifier tests for dedupe().

The two performance tests run dedupe() on 200,000 items in a child Python process, so that a
slow implementation is stopped once the call runs past its budget by half a second (SIGALRM in
the child; HARD_LIMIT_S in the parent is the backstop) instead of running for minutes. The
child times only the dedupe() call; the budget is generous, since a linear-time dedupe of 200,000
items takes a few hundredths of a second.
"""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dedupe import count_duplicates, dedupe

REPO_ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 3.0
HARD_LIMIT_S = 20.0  # the backstop for a child that ignores SIGALRM


def run_timed(setup: str, call: str) -> dict:
    """Run ``setup`` then time ``result = <call>`` in a fresh interpreter.

    Returns the child's report: ``elapsed`` seconds and ``summary`` (whatever the setup's
    ``summarize(result)`` returns). Fails the test if the child does not finish in time.
    """
    code = "\n".join(
        [
            "import json, signal, sys, time",
            f"sys.path.insert(0, {str(REPO_ROOT)!r})",
            "from dedupe import dedupe",
            setup,
            f"signal.setitimer(signal.ITIMER_REAL, {BUDGET_S + 0.5})",
            "start = time.perf_counter()",
            f"result = {call}",
            "elapsed = time.perf_counter() - start",
            'print(json.dumps({"elapsed": elapsed, "summary": summarize(result)}))',
        ]
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=HARD_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"dedupe() of 200,000 items did not finish within {HARD_LIMIT_S} s")
    if proc.returncode == -signal.SIGALRM:
        pytest.fail(f"dedupe() of 200,000 items ran past its budget ({BUDGET_S} s)")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_large_input_within_budget():
    report = run_timed(
        setup=(
            "items = [i % 100_000 for i in range(200_000)]\n"
            "summarize = lambda r: r == list(range(100_000))"
        ),
        call="dedupe(items)",
    )
    assert report["summary"] is True
    assert report["elapsed"] < BUDGET_S


def test_large_input_with_key_within_budget():
    report = run_timed(
        setup=(
            "names = [('User-' if i < 120_000 else 'USER-') + str(i % 120_000)"
            " for i in range(200_000)]\n"
            "summarize = lambda r: [len(r), r[0], r[-1], all(n.startswith('User-') for n in r)]"
        ),
        call="dedupe(names, key=str.casefold)",
    )
    assert report["summary"] == [120_000, "User-0", "User-119999", True]
    assert report["elapsed"] < BUDGET_S


def test_keeps_first_occurrence_in_order():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert dedupe("mississippi") == ["m", "i", "s", "p"]
    assert dedupe([]) == []


def test_key_function_keeps_first_of_each_group():
    assert dedupe(["Ann", "bob", "ANN", "Bob", "cy"], key=str.lower) == ["Ann", "bob", "cy"]
    rows = [{"id": 2, "v": "a"}, {"id": 1, "v": "b"}, {"id": 2, "v": "c"}]
    assert dedupe(rows, key=lambda r: r["id"]) == [{"id": 2, "v": "a"}, {"id": 1, "v": "b"}]


def test_accepts_generators():
    assert dedupe(x % 4 for x in range(10)) == [0, 1, 2, 3]


def test_equal_keys_of_different_types():
    assert dedupe([1, 1.0, True, 2]) == [1, 2]


def test_distinct_items_with_equal_hashes_are_kept():
    # In CPython hash(-1) == hash(-2) and hash(2**61 - 1) == hash(0): equal hashes, unequal items.
    assert dedupe([-1, -2, 0, 2**61 - 1, -2]) == [-1, -2, 0, 2**61 - 1]
    assert dedupe(["a", "b"], key=lambda s: -1 if s == "a" else -2) == ["a", "b"]


def test_count_duplicates():
    assert count_duplicates([1, 2, 1, 1]) == 2
    assert count_duplicates(["a", "A"], key=str.lower) == 1


def test_count_duplicates_of_a_generator():
    assert count_duplicates(x % 3 for x in range(7)) == 4
    assert count_duplicates((s for s in ["a", "A", "b"]), key=str.lower) == 1
