"""``repogym show`` and the documented trajectory API (docs/trajectory-format.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.cli import main
from repogym.envs.wrappers import SCHEMA

DOC = Path(__file__).resolve().parents[2] / "docs" / "trajectory-format.md"
LONG_ID = "tests/test_" + "very_long_module_name_" * 5 + ".py::test_" + "x" * 60 + "[param-1]"


def write_trajectory(path: Path, observation: str, tests: dict[str, str]) -> Path:
    records = [
        {
            "type": "header",
            "schema": SCHEMA,
            "task": "t",
            "env_id": "repogym/t-v0",
            "seed": 0,
            "sandbox": "bwrap",
            "reward_mode": "binary",
            "observation": "start",
        },
        {
            "type": "step",
            "t": 1,
            "action": '{"tool": "bash", "args": {"command": "echo [/]"}}',
            "observation": observation,
            "tool": "bash",
            "exit_code": 0,
            "duration_s": 0.1,
        },
        {
            "type": "summary",
            "steps": 1,
            "reward": 0.0,
            "resolved": False,
            "tests": tests,
            "hack_flags": [],
            "diff": "",
            "infra_error": "[/red] oops [bold]",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def show(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(["show", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_documented_snippet_runs_and_its_file_renders(tmp_path, capsys, monkeypatch):
    snippet = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(DOC), "exec"), {})  # the docs' own example
    assert capsys.readouterr().out.strip() == "2 0.0"
    (file,) = (tmp_path / "runs" / "logs").glob("*.jsonl")
    code, out, _ = show(capsys, str(file))
    assert code == 0 and "retry-zero" in out and "action 2 (submit)" in out


def test_tool_output_with_rich_markup_is_shown_verbatim(tmp_path, capsys):
    file = write_trajectory(tmp_path / "t.jsonl", "a [/] b [bold]c[/bold] [red]", {})
    code, out, _ = show(capsys, str(file))
    assert code == 0
    assert "a [/] b [bold]c[/bold] [red]" in out and "echo [/]" in out
    assert "[/red] oops [bold]" in out


def test_long_test_ids_wrap_instead_of_being_cut(tmp_path, capsys):
    file = write_trajectory(tmp_path / "t.jsonl", "ok", {LONG_ID: "passed"})
    code, out, _ = show(capsys, str(file))  # captured output is 80 columns, as in a pipe
    assert code == 0 and "…" not in out
    cells = "".join(line.split("│")[1].strip() for line in out.splitlines() if line.count("│") == 3)
    assert LONG_ID in cells


def test_json_output_is_the_parsed_file(tmp_path, capsys):
    file = write_trajectory(tmp_path / "t.jsonl", "ok [/]", {LONG_ID: "failed"})
    code, out, _ = show(capsys, str(file), "--json")
    data = json.loads(out)
    assert code == 0 and data["summary"]["tests"] == {LONG_ID: "failed"}
    assert data["steps"][0]["observation"] == "ok [/]"


def test_not_a_trajectory_gets_a_message_and_exit_code_2(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    traj = write_trajectory(run / "trajectories" / "t-0000-ab.jsonl", "ok", {})
    (run / "results.jsonl").write_text(
        json.dumps(
            {
                "agent": "noop",
                "task": "t",
                "reward": 0.0,
                "trajectory": "trajectories/t-0000-ab.jsonl",
            }
        )
        + "\n"
    )
    (tmp_path / "bad.jsonl").write_text('{"type": "header", "schema": "' + SCHEMA + '"}\n{oops\n')
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "other.jsonl").write_text('{"type": "header", "schema": "x/9"}\n')
    (tmp_path / "empty").mkdir()
    cases = {
        str(tmp_path / "missing.jsonl"): "does not exist",
        str(run): f"is a folder. Fix: pass one of its trajectory files: {traj}",
        str(tmp_path / "empty"): "a folder with no trajectory files",
        str(run / "results.jsonl"): f"results file (one row per episode), not a trajectory. "
        f"Fix: show one episode: {traj}",
        str(tmp_path / "bad.jsonl"): "bad.jsonl:2: not JSON",
        str(tmp_path / "binary.jsonl"): "utf-8",
        str(tmp_path / "other.jsonl"): "schema 'x/9'",
    }
    for path, expect in cases.items():
        code, out, err = show(capsys, path)
        assert code == 2 and out == "", path
        assert err.startswith("repogym show: ") and expect in err, err


def test_cli_prints_no_traceback(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "show", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "is a folder with no trajectory files" in res.stderr
