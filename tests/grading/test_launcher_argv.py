"""The launcher's command line: whole files, or the grader's own selection of node ids."""

from __future__ import annotations

from repogym.grading.grading_run import InGrader, launcher_argv


def _targets(argv: list) -> list[str]:
    return argv[argv.index("--") + 1 :]


def test_a_grading_runs_the_listed_tests_files_and_a_selection_runs_only_its_ids():
    ids = ["tests/test_a.py::test_x[1]", "tests/test_a.py::test_y", "tests/sub/test_b.py::T::t"]
    whole = launcher_argv("python", ["/site"], ["-q", "-p", "no:cacheprovider"], ids)
    assert whole[:4] == ["python", "-s", "-S", InGrader("verifier/launch.py")]
    assert _targets(whole) == [
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_a.py",
        "tests/sub/test_b.py",
    ]
    chosen = ["tests/test_a.py::test_x", "tests/test_a.py::test_canary_one"]
    selected = launcher_argv("python", [], ["-q", "-p", "no:cacheprovider"], ids, select=chosen)
    assert _targets(selected) == ["-q", "-p", "no:cacheprovider", *chosen]


def test_a_selection_leaves_out_the_commands_paths_that_hold_it():
    """A task whose command names its test folder (or the root) would collect it whole
    beside the selection; a path that holds no selected test stays, and so do options."""
    chosen = ["tests/test_a.py::test_x"]
    for held in (["tests"], ["tests/"], ["."], ["tests/test_a.py"]):
        argv = launcher_argv(
            "python", [], ["-q", *held], ["tests/test_a.py::test_x"], select=chosen
        )
        assert _targets(argv) == ["-q", *chosen], held
    argv = launcher_argv(
        "python", [], ["-q", "-p", "no:cacheprovider", "docs"], chosen, select=chosen
    )
    assert _targets(argv) == ["-q", "-p", "no:cacheprovider", "docs", *chosen]
