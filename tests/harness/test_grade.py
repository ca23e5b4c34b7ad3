"""``repogym grade``: SWE-bench-style predictions graded in real sandboxes, in parallel."""

from __future__ import annotations

import json
from pathlib import Path

from repogym.harness.results import ROW_KEYS
from repogym.scenarios.registry import registered_tasks

from .conftest import rows_of, run_cli

GRADED = ["csv-quoted-fields", "paginate-off-by-one", "retry-zero"]


def _write(path: Path, preds: list[dict]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    return path


def _gold(task_id: str) -> str:
    return registered_tasks()[task_id].solution_patch.read_text()


def test_oracle_predictions_resolve_every_task(tmp_path: Path) -> None:
    preds = _write(
        tmp_path / "gold.jsonl",
        [
            {"instance_id": t, "model_patch": _gold(t), "model_name_or_path": "gold-model"}
            for t in GRADED
        ],
    )
    out = tmp_path / "graded"
    proc = run_cli("grade", str(preds), "--workers", "2", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(out)
    assert sorted(r["task"] for r in rows) == GRADED
    assert all(r["resolved"] and r["reward"] == 1.0 and r["agent"] == "gold-model" for r in rows)
    assert all(set(ROW_KEYS) <= set(r) and r["stop_reason"] is None for r in rows)
    assert all((out / r["trajectory"]).is_file() for r in rows)
    assert "gold-model" in proc.stdout and "100.0%" in proc.stdout  # the report of `run`
    proc = run_cli("grade", str(preds), "--out", str(out), "--no-progress")  # resumes
    assert "3 episode(s) already recorded, 0 to run" in proc.stdout


def test_empty_and_unappliable_patches_resolve_nothing(tmp_path: Path) -> None:
    broken = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    preds = _write(tmp_path / "empty.json", [])
    preds.write_text(
        json.dumps(
            [
                {"instance_id": "csv-quoted-fields", "model_patch": ""},
                {"instance_id": "paginate-off-by-one", "model_patch": None},
                {"instance_id": "retry-zero", "model_patch": broken},
            ]
        )
    )
    out = tmp_path / "none"
    proc = run_cli(
        "grade", str(preds), "--workers", "2", "--out", str(out), "--no-progress", "--json"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["task"]: r for r in rows_of(out)}
    assert sorted(rows) == GRADED and not any(r["resolved"] for r in rows.values())
    assert rows["csv-quoted-fields"]["steps"] == 1  # nothing to apply: submitted at once
    assert rows["retry-zero"]["stop_reason"].startswith("patch_failed")
    assert rows["retry-zero"]["agent"] == "empty"  # no model name: the file's stem
    summary = json.loads(proc.stdout)
    assert summary["empty"]["resolve_rate"] == 0.0 and summary["empty"]["episodes"] == 3


def test_bad_predictions_files_say_what_to_fix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "retry-zero", "model_patch": ""}\n{"instance_id": 3}\n')
    proc = run_cli("grade", str(bad), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and f"{bad}:2" in proc.stdout and "instance_id" in proc.stdout
    unknown = _write(tmp_path / "u.jsonl", [{"instance_id": "retry-zer0", "model_patch": ""}])
    proc = run_cli("grade", str(unknown), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "did you mean retry-zero" in proc.stdout
    assert "--suite" in proc.stdout
    twice = _write(tmp_path / "t.jsonl", [{"instance_id": "retry-zero", "model_patch": ""}] * 2)
    proc = run_cli("grade", str(twice), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "second prediction" in proc.stdout
    models = _write(
        tmp_path / "m.jsonl",
        [
            {"instance_id": "retry-zero", "model_patch": "", "model_name_or_path": "a"},
            {"instance_id": "empty-mean", "model_patch": "", "model_name_or_path": "b"},
        ],
    )
    proc = run_cli("grade", str(models), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "--name" in proc.stdout
    assert not (tmp_path / "o").exists()


def test_swebench_reports_match_swebenchs_own_make_run_report(tmp_path: Path, monkeypatch) -> None:
    """The dict form of predictions (SWE-agent's preds.json); swebench's make_run_report,
    reading the per-instance report.json files repogym wrote, gives the same run report."""
    import contextlib
    import io

    from swebench.harness.reporting import make_run_report

    from repogym.scenarios.registry import builtin_tasks

    broken = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    model = "org/model-7b"
    patches = {
        "csv-quoted-fields": _gold("csv-quoted-fields"),
        "paginate-off-by-one": registered_tasks()["paginate-off-by-one"].decoys[0].read_text(),
        "retry-zero": broken,
        "empty-mean": "",
    }
    preds = tmp_path / "preds.json"
    preds.write_text(
        json.dumps({t: {"model_patch": p, "model_name_or_path": model} for t, p in patches.items()})
    )
    out = tmp_path / "graded"
    proc = run_cli(
        "grade",
        str(preds),
        "--workers",
        "2",
        "--out",
        str(out),
        "--no-progress",
        "--run-id",
        "eval1",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ours = json.loads((out / "org__model-7b.eval1.json").read_text())
    assert ours["schema_version"] == 2
    assert ours["resolved_ids"] == ["csv-quoted-fields"]
    assert ours["unresolved_ids"] == ["paginate-off-by-one", "retry-zero"]
    assert ours["empty_patch_ids"] == ["empty-mean"] and ours["error_ids"] == []
    assert ours["total_instances"] == len(builtin_tasks()) and ours["submitted_instances"] == 4
    inst = out / "logs" / "run_evaluation" / "eval1" / "org__model-7b"
    report = json.loads((inst / "csv-quoted-fields" / "report.json").read_text())
    status = report["csv-quoted-fields"]["tests_status"]
    task = registered_tasks()["csv-quoted-fields"]
    assert status["FAIL_TO_PASS"] == {"success": list(task.test_spec.fail_to_pass), "failure": []}
    assert set(status) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}
    unapplied = json.loads((inst / "retry-zero" / "report.json").read_text())["retry-zero"]
    assert unapplied == {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": False,
        "resolved": False,
        "infra_failure": False,
    }
    decoy = json.loads((inst / "paginate-off-by-one" / "report.json").read_text())
    assert (
        decoy["paginate-off-by-one"]["tests_status"]["FAIL_TO_PASS"]["failure"]
        or decoy["paginate-off-by-one"]["tests_status"]["PASS_TO_PASS"]["failure"]
    )
    monkeypatch.chdir(out)  # swebench reads logs/run_evaluation/ under its working folder
    full = [{"instance_id": t.id} for t in builtin_tasks()]
    predictions = {
        t: {"instance_id": t, "model_patch": p, "model_name_or_path": model}
        for t, p in patches.items()
    }
    with contextlib.redirect_stdout(io.StringIO()):
        theirs = json.loads(
            make_run_report(predictions, full, "eval1", None, str(tmp_path / "theirs")).read_text()
        )
    assert theirs == ours
