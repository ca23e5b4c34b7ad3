"""Errors that explain themselves: a message printed through rich keeps its bracketed words,
a bad task among good ones is named (and the good ones still listed), and `repogym plot` on
a benchmark folder says what it is; never a traceback (real processes where it matters)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from repogym.cli import main
from repogym.cli.printing import print_error, print_line, print_note
from repogym.scenarios.registry import BUILTIN_DIR

UNKNOWN_KEY = "move 'timeout_s' to the [verifier] table"


def _task(folder: Path, task_id: str, *, broken: bool = False) -> Path:
    """A copy of a built-in task under a new id (with ``timeout_s`` misplaced if broken)."""
    shutil.copytree(BUILTIN_DIR / "empty-mean", folder)
    toml = folder / "task.toml"
    text = toml.read_text().replace('id = "empty-mean"', f'id = "{task_id}"', 1)
    if broken:
        text = text.replace("[verifier]", "timeout_s = 30\n[verifier]", 1)
    toml.write_text(text)
    return folder


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_printing_helpers_keep_bracketed_words() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    print_error(console, f"task.toml: {UNKNOWN_KEY}")
    print_note(console, "[bold]not markup[/bold]")
    print_line(console, "results in [red]x[/red]", style="red")
    assert out.getvalue().splitlines() == [
        f"error: task.toml: {UNKNOWN_KEY}",
        "note: [bold]not markup[/bold]",
        "results in [red]x[/red]",
    ]


def test_repogym_run_shows_the_whole_message(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _task(tmp_path / "suite" / "bad-one", "bad-one", broken=True)
    code = main(
        [
            "run",
            "--agent",
            "noop",
            "--suite",
            str(tmp_path / "suite"),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 2 and UNKNOWN_KEY in " ".join(out.split()), out


def test_tasks_dir_lists_the_good_tasks_and_names_the_bad_one(tmp_path: Path) -> None:
    _task(tmp_path / "good-one", "good-one")
    _task(tmp_path / "bad-one", "bad-one", broken=True)
    proc = _cli("tasks", "--dir", str(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "repogym/good-one-v0" in proc.stdout and "bad-one" not in proc.stdout
    err = " ".join(proc.stderr.split())
    assert f"skipping {tmp_path / 'bad-one'}: {tmp_path / 'bad-one' / 'task.toml'}" in err
    assert f"key 'timeout_s': unknown key. Fix: {UNKNOWN_KEY}" in err
    assert "1 task folder(s) of --dir could not be loaded" in err


def test_plot_on_a_benchmark_folder_says_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text("")
    proc = _cli("plot", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{tmp_path} is a benchmark run (it holds results.jsonl of `repogym run`)" in proc.stderr
    assert f"Fix: for a benchmark run, `repogym leaderboard --results {tmp_path}`" in proc.stderr
    missing = _cli("plot", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "no metrics at" in missing.stderr and "Fix: pass the --out folder" in missing.stderr


def test_suite_restate_into_a_folder_with_no_manifests_says_so_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--manifests names the folder restated entries are merged into: one without the
    suite's manifests is refused with the fix (it was a FileNotFoundError traceback after
    every task had been restated)."""
    code = main(["suite", "restate", "realpy", "--manifests", str(tmp_path / "empty")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "holds no suite.json" in err and "leave --manifests out" in err, err
