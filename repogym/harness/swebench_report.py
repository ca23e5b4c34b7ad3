"""swebench's own reports of a ``repogym grade`` run, with swebench's keys and meanings.

Beside repogym's ``results.jsonl``, ``repogym grade`` writes what swebench's
``run_evaluation`` writes, in the same places (``OUT`` standing for its working folder):

- ``OUT/logs/run_evaluation/<run_id>/<model>/<instance_id>/report.json``: the instance's
  report as ``get_eval_report`` makes it (``patch_is_None``, ``patch_exists``,
  ``patch_successfully_applied``, ``resolved``, ``infra_failure`` and ``tests_status``:
  FAIL_TO_PASS / PASS_TO_PASS / FAIL_TO_FAIL / PASS_TO_FAIL, each ``success`` and
  ``failure``), beside ``patch.diff`` and ``run_instance.log``;
- ``OUT/<model>.<run_id>.json``: the run report of ``make_run_report`` (schema_version 2:
  ``resolved_ids``, ``unresolved_ids``, ``empty_patch_ids``, ``error_ids``,
  ``completed_ids``, ``incomplete_ids``, ...), over the suite's tasks as the dataset.

Meanings follow swebench, not repogym's reward: a FAIL_TO_PASS test succeeds when it
passed, a PASS_TO_PASS test also when it was skipped (swebench's ``test_maintained``);
``resolved`` is swebench's RESOLVED_FULL. A grading repogym did not trust (forged results,
a grading run that timed out) is a run whose log swebench could not read: the patch did not
"successfully apply", the instance is unresolved. An episode whose sandbox failed
(``infra_error``) has no report, so it is in ``error_ids`` (and ``infra_failure_ids``, its
reason under ``failure_reasons``), as an instance whose container failed is in swebench.
Tests are named as the instance names them (a non-pytest instance's generated node ids are
mapped back, see :mod:`repogym.scenarios.swebench_runner`).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from repogym.envs.wrappers import read_trajectory
from repogym.harness.results import ResultRow
from repogym.scenarios.task import Task

LOG_DIR = Path("logs") / "run_evaluation"
REPORT = "report.json"
F2P, P2P, F2F, P2F = "FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"


def swebench_meta(task: Task) -> dict[str, Any]:
    """The task's ``[swebench]`` table ({} for a task that was not imported)."""
    try:
        return tomllib.loads((task.path / "task.toml").read_text()).get("swebench") or {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def instance_id(task: Task) -> str:
    """The SWE-bench instance id of ``task`` (its own id when it was not imported)."""
    return str(swebench_meta(task).get("instance_id") or task.id)


def model_dir(model: str) -> str:
    """swebench's folder name of a model (``/`` becomes ``__``)."""
    return model.replace("/", "__")


def tests_status(task: Task, tests: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """swebench's ``tests_status`` from repogym's per-test outcomes (see the module doc)."""
    names = swebench_meta(task).get("tests") or {}
    v = task.test_spec

    def split(ids: tuple[str, ...], maintained: bool) -> dict[str, list[str]]:
        good = {"passed", "skipped"} if maintained else {"passed"}
        out: dict[str, list[str]] = {"success": [], "failure": []}
        for node in ids:
            out["success" if tests.get(node) in good else "failure"].append(names.get(node, node))
        return out

    empty = {"success": [], "failure": []}
    return {
        F2P: split(v.fail_to_pass, False),
        P2P: split(v.pass_to_pass, True),
        F2F: dict(empty),
        P2F: dict(empty),
    }


def _resolved(status: dict[str, dict[str, list[str]]]) -> bool:
    def rate(kind: str) -> float:
        total = len(status[kind]["success"]) + len(status[kind]["failure"])
        return len(status[kind]["success"]) / total if total else 1.0

    return rate(F2P) == 1.0 and rate(P2P) == 1.0


def instance_report(
    iid: str, task: Task, patch: str | None, row: ResultRow, summary: dict[str, Any]
) -> dict[str, Any]:
    """swebench's ``report.json`` content for one graded episode."""
    report: dict[str, Any] = {
        "patch_is_None": patch is None,
        "patch_exists": patch is not None,
        "patch_successfully_applied": False,
        "resolved": False,
        "infra_failure": False,
    }
    applied = not str(row.get("stop_reason") or "").startswith("patch_failed")
    trusted = not (summary.get("reward_breakdown") or {}).get("untrusted")
    if patch is not None and applied and trusted:
        status = tests_status(task, summary.get("tests") or {})
        report.update(
            patch_successfully_applied=True, resolved=_resolved(status), tests_status=status
        )
    return {iid: report}


def write_reports(
    out: Path,
    run_id: str,
    rows: list[ResultRow],
    predictions: dict[str, dict[str, Any]],
    tasks: list[Task],
) -> Path:
    """Write every instance's swebench files and the run report; returns the run report.

    Args:
        out: The run's folder (swebench's working folder).
        run_id: swebench's run id.
        rows: The run's results rows (one per task).
        predictions: instance id -> prediction (``instance_id``, ``model_patch``,
            ``model_name_or_path``), as swebench holds them.
        tasks: The suite's tasks: the dataset.
    """
    by_task = {t.id: t for t in tasks}
    ids = {t.id: instance_id(t) for t in tasks}
    rows_by_iid = {ids[r["task"]]: r for r in rows if r.get("task") in ids}
    outcome: dict[str, set[str]] = {
        k: set()
        for k in ("completed", "resolved", "unresolved", "error", "empty_patch", "infra_failure")
    }
    reasons: dict[str, str] = {}
    for iid, pred in predictions.items():
        row = rows_by_iid.get(iid)
        if pred.get("model_patch") in ("", None):
            outcome["empty_patch"].add(iid)
        log_dir = out / LOG_DIR / run_id / model_dir(pred["model_name_or_path"]) / iid
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "patch.diff").write_text(pred.get("model_patch") or "")
        summary = _summary(out, row)
        failure = _failure(row, summary)
        (log_dir / "run_instance.log").write_text(_instance_log(row, failure))
        if failure is not None:
            (log_dir / REPORT).unlink(missing_ok=True)
            if row and row.get("infra_error"):
                outcome["infra_failure"].add(iid)
                reasons[iid] = str(row["infra_error"])[:500]
            outcome["error"].add(iid)
            continue
        report = instance_report(iid, by_task[row["task"]], pred.get("model_patch"), row, summary)
        (log_dir / REPORT).write_text(json.dumps(report, indent=4))
        if pred.get("model_patch") not in ("", None):
            outcome["completed"].add(iid)
            outcome["resolved" if report[iid]["resolved"] else "unresolved"].add(iid)
    for key in ("error", "infra_failure"):  # swebench counts empty patches only as such
        outcome[key] -= outcome["empty_patch"]
    dataset = sorted(ids.values())
    run = {
        "total_instances": len(dataset),
        "submitted_instances": len(predictions),
        "completed_instances": len(outcome["completed"]),
        "resolved_instances": len(outcome["resolved"]),
        "unresolved_instances": len(outcome["unresolved"]),
        "infra_failure_instances": len(outcome["infra_failure"]),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(outcome["empty_patch"]),
        "error_instances": len(outcome["error"]),
        "completed_ids": sorted(outcome["completed"]),
        "incomplete_ids": sorted(set(dataset) - set(predictions)),
        "empty_patch_ids": sorted(outcome["empty_patch"]),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(outcome["resolved"]),
        "unresolved_ids": sorted(outcome["unresolved"]),
        "infra_failure_ids": sorted(outcome["infra_failure"]),
        "ambiguous_failure_ids": [],
        "failure_reasons": dict(
            sorted((k, v) for k, v in reasons.items() if k in outcome["infra_failure"])
        ),
        "error_ids": sorted(outcome["error"]),
        "schema_version": 2,
    }
    first = next(iter(predictions.values()))
    path = out / f"{model_dir(first['model_name_or_path'])}.{run_id}.json"
    path.write_text(json.dumps(run, indent=4) + "\n")
    return path


def _summary(out: Path, row: ResultRow | None) -> dict[str, Any]:
    if not row or not isinstance(row.get("trajectory"), str):
        return {}
    try:
        return read_trajectory(out / row["trajectory"]).get("summary") or {}
    except (OSError, ValueError):
        return {}


def _failure(row: ResultRow | None, summary: dict[str, Any]) -> str | None:
    """Why the episode has no report (None: it was graded)."""
    if row is None:
        return "not run"
    if row.get("infra_error"):
        return f"infra_error: {row['infra_error']}"
    if row.get("agent_error"):
        return f"agent_error: {row['agent_error']}"
    if not summary or summary.get("abandoned") or "tests" not in summary:
        return "the episode ended without a grade"
    return None


def _instance_log(row: ResultRow | None, failure: str | None) -> str:
    if failure is not None:
        return f"repogym grade: no report: {failure}\n"
    keys = ("task", "reward", "resolved", "stop_reason", "hack_flags", "trajectory")
    return "".join(f"{k}: {row.get(k)}\n" for k in keys)
