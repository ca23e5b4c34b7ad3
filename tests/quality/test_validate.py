"""`repogym validate` catches broken task folders written by someone else (real sandbox)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid

import pytest

from repogym.grading import grader
from repogym.quality.validate import validate_task
from repogym.scenarios.registry import BUILTIN_DIR
from repogym.scenarios.task import load_task
from tests.scenarios._tasks import BUGGY, FIXED, TESTS, write_task

ALT = BUGGY.replace("    return value\n", "    return min(value, high)\n")
SPECIAL_CASE = BUGGY.replace(
    "    return value\n", "    if value == 15:\n        return 10\n    return value\n"
)
WRONG_GOLD = BUGGY.replace("    return value\n", "    return high\n")
LOW = BUGGY.replace("    return value\n", "    return low\n")


def _validate(path, reruns=1):
    return validate_task(load_task(path), reruns=reruns, workers=2)


def test_good_task_is_valid(tmp_path):
    task = write_task(tmp_path / "good", alternatives={"min": ALT}, decoys={"broken": WRONG_GOLD})
    report = _validate(task, reruns=2)
    assert report.ok, report.failures
    kinds = [c.kind for c in report.checks]
    assert sorted(kinds) == ["alternative", "decoy", "gold", "noop", "rerun"]
    noop = next(c for c in report.checks if c.kind == "noop")
    assert noop.tests == {
        "tests/test_mod.py::test_upper": "failed",
        "tests/test_mod.py::test_inside": "passed",
    }


def test_decoy_that_passes_is_caught(tmp_path):
    # The hidden tests only check clamp(15, 0, 10): a special case passes them.
    task = write_task(tmp_path / "weak", decoys={"special_case": SPECIAL_CASE})
    report = _validate(task)
    assert not report.ok
    [problem] = report.failures
    assert problem.startswith("weak: decoy decoys/special_case.patch: the decoy earns full reward")
    assert "tests/test_mod.py::test_upper" in problem


def test_gold_that_fails_is_caught(tmp_path):
    task = write_task(tmp_path / "badgold", gold=WRONG_GOLD)
    report = _validate(task)
    # One line per failing test, with its cause: the sealed check at line 9 got 10 (its
    # expected value, 5, is hidden from the sandbox).
    assert report.failures == [
        (
            "badgold: gold solution.patch: test tests/test_mod.py::test_inside is failed: at "
            "tests/test_mod.py:9: got 10 (a sealed check: the hidden expected value differs) "
            "(a correct fix must pass it)"
        )
    ]


def _builtin_copy(tmp_path, task_id="empty-mean"):
    folder = tmp_path / task_id
    shutil.copytree(BUILTIN_DIR / task_id, folder)
    return folder


def test_a_gold_patch_that_does_not_apply_reports_gits_message_once(tmp_path):
    task = _builtin_copy(tmp_path)
    patch = task / "solution.patch"
    patch.write_text(
        patch.read_text().replace("     values = list(data)\n", "     values = list(other_data)\n")
    )
    report = validate_task(load_task(task), reruns=1, workers=2)
    [gold] = [c for c in report.checks if c.kind == "gold"]
    # The root cause only (git's own words), not every test it left failing.
    assert gold.problems == [
        (
            "empty-mean: gold solution.patch: the patch does not apply to repo/ (git apply: error: "
            "patch failed: stats.py:15; error: stats.py: patch does not apply). Fix: make the "
            "change in a copy of repo/ and save `git diff` there to this file"
        )
    ]
    assert report.failures == gold.problems


def test_a_hidden_test_that_fails_at_gold_shows_its_exception_and_line(tmp_path):
    task = _builtin_copy(tmp_path)
    tests = task / "tests" / "test_stats.py"
    text = tests.read_text()
    assert "    assert mean_or_none([]) is None\n" in text
    tests.write_text(
        text.replace(
            "    assert mean_or_none([]) is None\n", "    assert mean_or_none(5) is None\n"
        )
    )
    report = validate_task(load_task(task), reruns=1, workers=2)
    [gold] = [c for c in report.checks if c.kind == "gold"]
    line = text.splitlines().index("    assert mean_or_none([]) is None") + 1
    assert gold.problems == [
        (
            "empty-mean: gold solution.patch: test tests/test_stats.py::test_mean_or_none_on_empty"
            f"_input is failed: at tests/test_stats.py:{line}: TypeError: 'int' object is not "
            "iterable (raised at stats.py:17) (a correct fix must pass it)"
        )
    ]


def test_flaky_test_is_caught(tmp_path):
    # Passes in about half of the runs; 12 gold runs all agreeing has probability 2**-11.
    flaky = TESTS + "\n\ndef test_coin():\n    import os\n    assert os.urandom(1)[0] < 128\n"
    task = write_task(
        tmp_path / "flaky",
        tests=flaky,
        p2p=("tests/test_mod.py::test_inside", "tests/test_mod.py::test_coin"),
    )
    report = validate_task(load_task(task), reruns=12, workers=2)
    flaky_msgs = [p for p in report.problems if "flaky" in p]
    assert flaky_msgs and flaky_msgs[0].startswith(
        "flaky: gold solution.patch: test tests/test_mod.py::test_coin is flaky over 12 runs"
    )
    assert not any("test_upper" in p or "test_inside" in p for p in report.problems)


def test_a_parametrized_id_that_names_another_case_each_run_is_explained(tmp_path):
    # The cases come in a new order in every process; a dict parameter is named by its
    # index, so the listed id exists in about one run in six.
    shuffled = TESTS + (
        "\n\nimport os\n\nimport pytest\n\n\n"
        "@pytest.mark.parametrize(('n', 'box'), [(n, {'n': n}) for n in "
        "sorted(range(6), key=lambda _: os.urandom(4))])\n"
        "def test_cases(n, box):\n    assert clamp(n, 0, 10) == box['n']\n"
    )
    task = write_task(
        tmp_path / "shuffled",
        tests=shuffled,
        p2p=("tests/test_mod.py::test_inside", "tests/test_mod.py::test_cases[3-box1]"),
    )
    report = validate_task(load_task(task), reruns=4, workers=2)
    missing = [p for p in report.failures if "test_cases[3-box1] is" in p]
    assert missing and all("names another case each time" in p for p in missing), report.problems


def test_wrong_test_lists_and_unappliable_decoy_are_caught(tmp_path):
    # test_inside passes before the fix, so it cannot be fail_to_pass; test_upper fails
    # before the fix, so it cannot be pass_to_pass.
    task = write_task(
        tmp_path / "lists",
        f2p=("tests/test_mod.py::test_inside",),
        p2p=("tests/test_mod.py::test_upper",),
    )
    (task / "decoys").mkdir(exist_ok=True)
    (task / "decoys" / "stale.patch").write_text(
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -1,1 +1,1 @@\n"
        "-def nothing_like_this():\n+def clamp():\n"
    )
    failures = _validate(task).failures
    assert (
        "lists: noop -: fail_to_pass test tests/test_mod.py::test_inside passes without "
        "any fix (it must fail before the fix)"
    ) in failures
    assert (
        "lists: noop -: pass_to_pass test tests/test_mod.py::test_upper is failed without "
        "any fix (it must pass before the fix)"
    ) in failures
    assert any(
        f.startswith("lists: decoy decoys/stale.patch: the decoy does not apply") for f in failures
    )


def test_cli_exit_codes_and_messages(tmp_path):
    good = write_task(tmp_path / "good", decoys={"broken": WRONG_GOLD})
    write_task(tmp_path / "weak", decoys={"special_case": SPECIAL_CASE})
    cli = [sys.executable, "-m", "repogym.cli", "validate", "--reruns", "1"]
    ok = subprocess.run(cli + [str(good)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1/1 tasks valid" in ok.stdout and "decoys/broken.patch" in ok.stdout
    bad = subprocess.run(cli + [str(tmp_path)], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "1/2 tasks valid" in bad.stdout
    assert "FAIL weak: decoy decoys/special_case.patch: the decoy earns full reward" in bad.stderr
    missing = subprocess.run(
        cli + [str(tmp_path / "nope")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2 and "not a folder" in missing.stdout


def test_fixed_version_is_what_the_gold_patch_makes():
    # Guards the helpers: the gold text differs from the bug only by the upper bound.
    assert FIXED != BUGGY and "high" in FIXED


#: Hidden tests with a check whose gold values are recorded (an f-string against a column).
SHOWN = """\
import pytest

from mod import clamp


@pytest.mark.parametrize("value, shown", [(15, "10!"), (5, "5!")])
def test_shown(value, shown):
    assert f"{clamp(value, 0, 10)}!" == shown
"""


@pytest.fixture
def runs(monkeypatch) -> list[list[str]]:
    """The listed tests of each grading run, as the grader starts them."""
    out: list[list[str]] = []
    real = grader.run_grading

    def counted(sb, gdir, args, node_ids, *rest, **kw):
        out.append(list(node_ids))
        return real(sb, gdir, args, node_ids, *rest, **kw)

    monkeypatch.setattr(grader, "run_grading", counted)
    return out


def test_the_gradings_that_record_gold_values_are_the_validations_gold_runs(tmp_path, runs):
    """Validating a task whose gold values are not recorded yet grades the suite once per
    check: the two gradings that record gold's values are gold's first two checks (each
    in its own sandbox, with its own canaries), not two more runs of the whole suite."""
    task = write_task(
        tmp_path / "fresh",
        tests=SHOWN + f"\n# {uuid.uuid4()}: gold's values for these files are not recorded\n",
        f2p=("tests/test_mod.py::test_shown[15-10!]",),
        p2p=("tests/test_mod.py::test_shown[5-5!]",),
        decoys={"low": LOW},  # it fails the fail_to_pass test: one grading either way
    )
    assert any(s.records_gold for s in grader.planted_seals(load_task(task))[0].seals)
    report = _validate(task, reruns=3)
    assert report.ok, report.failures
    assert sorted(c.kind for c in report.checks) == ["decoy", "gold", "noop", "rerun", "rerun"]
    assert len(runs) == 5  # gold x3 (two of them recording), noop, the decoy
    golds = [c for c in report.checks if c.kind in ("gold", "rerun")]
    assert all(c.reward == 1.0 and c.duration_s > 0 for c in golds)
    assert grader.gold_values(load_task(task), None, None, None) is not None  # recorded
    runs.clear()
    again = _validate(task, reruns=3)  # recorded: three gradings of gold, as before
    assert again.ok and len(runs) == 5


def test_a_decoy_is_graded_on_its_fail_to_pass_tests_alone_first(tmp_path, runs):
    """Once gold's values are recorded, a decoy that fails a fail_to_pass test is settled
    by a grading of those tests alone; one that passes them all is graded on every listed
    test, and still caught."""
    f2p, p2p = "tests/test_mod.py::test_shown[15-10!]", "tests/test_mod.py::test_shown[5-5!]"
    task = write_task(
        tmp_path / "decoys",
        tests=SHOWN + f"\n# {uuid.uuid4()}\n",
        f2p=(f2p,),
        p2p=(p2p,),
        decoys={"low": LOW, "broken": WRONG_GOLD, "special_case": SPECIAL_CASE},
    )
    assert _validate(task, reruns=2).checks  # records gold's values
    runs.clear()
    report = _validate(task, reruns=1)
    decoys = {c.patch: c for c in report.checks if c.kind == "decoy"}
    # low fails the fail_to_pass test: that test alone settles it
    assert decoys["decoys/low.patch"].tests == {f2p: "failed"}
    assert decoys["decoys/low.patch"].problems == []
    # broken passes it and fails the other: graded on both, then caught
    assert decoys["decoys/broken.patch"].tests == {f2p: "passed", p2p: "failed"}
    assert decoys["decoys/broken.patch"].problems == []
    # special_case passes both: graded on both, and reported
    assert decoys["decoys/special_case.patch"].tests == {f2p: "passed", p2p: "passed"}
    assert "the decoy earns full reward" in decoys["decoys/special_case.patch"].problems[0]
    alone = [r for r in runs if p2p not in r]
    assert len(alone) == 3 and len(runs) == 3 + 4  # a short run per decoy; gold, noop, 2 decoys
