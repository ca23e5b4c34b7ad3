"""``repogym grade PREDICTIONS``: grade SWE-bench-style predictions against a suite.

Predictions are what swebench's harness reads: JSON Lines, a JSON list, or a JSON object
keyed by instance id (SWE-agent's ``preds.json``), each ``instance_id``, ``model_patch``
and optional ``model_name_or_path``. Each is one episode of the ``predictions`` agent: the
patch is applied in the task's sandbox with the env's own tools and submitted, so grading,
the report and ``OUT/results.jsonl`` are those of ``repogym run`` (rows with ``task``,
``resolved``, ``reward``, ``hack_flags``, ...; a patch that does not apply has
``stop_reason: patch_failed ...`` and is graded unchanged). Episodes run in parallel
(``--workers``, ``--ray``) and re-running resumes.

It also writes swebench's own reports (:mod:`repogym.harness.swebench_report`):
``OUT/<model>.<run_id>.json`` and, per instance,
``OUT/logs/run_evaluation/<run_id>/<model>/<instance_id>/report.json``.

Example::

    repogym grade preds.jsonl --suite tasks/ --workers 4 --out runs/graded --run-id eval1
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from repogym.cli.options import EXIT_USAGE, add_run_options
from repogym.cli.printing import print_error, print_line
from repogym.cli.running import execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade", help="grade SWE-bench-style predictions (instance_id, model_patch) against a suite"
    )
    p.add_argument(
        "predictions",
        type=Path,
        metavar="PREDICTIONS",
        help="JSON Lines (or a JSON list) of {instance_id, model_patch, model_name_or_path?}",
    )
    p.add_argument(
        "--run-id",
        help="swebench's run id in its report's name and log folders "
        "(default: the --out folder's name)",
    )
    add_run_options(p)
    p.set_defaults(func=run)


def _label(preds: list, path: Path, name: str | None) -> str:
    if name:
        return name
    models = sorted({p.model for p in preds if p.model})
    if len(models) > 1:
        raise ValueError(
            f"{path} holds predictions of {len(models)} models {models}. Fix: one "
            "file per model, or --name LABEL to grade them as one run"
        )
    return models[0] if models else path.stem


def _check_ids(preds: list, suite: str) -> list[str]:
    from repogym.scenarios.registry import suite_tasks

    known = {t.id for t in suite_tasks(suite)}
    unknown = [p.instance_id for p in preds if p.task_id not in known]
    if unknown:
        hints = [m for u in unknown[:5] for m in difflib.get_close_matches(u, known, n=1)]
        near = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise ValueError(
            f"{len(unknown)} prediction(s) name no task of suite {suite!r}: "
            f"{unknown[:10]}{near}. Fix: --suite FOLDER with the imported tasks "
            "(`repogym import-swebench`), or drop those lines"
        )
    return sorted(p.task_id for p in preds)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.baselines import AgentError
    from repogym.harness.baselines.scripted import read_predictions
    from repogym.harness.config import RunConfig
    from repogym.harness.report import make_console
    from repogym.scenarios.task import TaskError

    console = make_console(stderr=args.json)
    path = args.predictions.resolve()
    try:
        preds = read_predictions(path)
        cfg = RunConfig(
            agent="predictions",
            agent_args={"file": str(path)},
            out=args.out,
            label=_label(preds, path, args.name),
            suite=args.suite,
            task_ids=_check_ids(preds, args.suite),
            workers=args.workers,
            ray=args.ray,
            sandbox=args.sandbox,
            reward_mode=args.reward_mode,
            retry_errors=args.retry_errors,
            env_server=args.env_server,
        )
    except (AgentError, TaskError, ValueError) as e:
        print_error(console, e)
        return EXIT_USAGE
    code = execute(cfg, console, args)
    if code == 0:
        report = _swebench_reports(args, cfg.label, preds)
        if not args.json:
            print_line(console, f"swebench report: {report}")
    return code


def _swebench_reports(args: argparse.Namespace, label: str, preds: list) -> Path:
    """Write swebench's run report and per-instance reports of the graded run."""
    from repogym.harness.results import read_results
    from repogym.harness.swebench_report import instance_id, write_reports
    from repogym.scenarios.registry import suite_tasks

    tasks = suite_tasks(args.suite)
    by_id = {t.id: t for t in tasks}
    predictions = {}
    for p in preds:
        iid = instance_id(by_id[p.task_id])
        predictions[iid] = {
            "instance_id": iid,
            "model_patch": p.patch,
            "model_name_or_path": p.model or label,
        }
    return write_reports(
        args.out, args.run_id or args.out.resolve().name, read_results(args.out), predictions, tasks
    )
