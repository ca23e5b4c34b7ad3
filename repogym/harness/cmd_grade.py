"""``repogym grade PREDICTIONS.jsonl``: grade SWE-bench-style predictions against a suite.

Each prediction (``instance_id``, ``model_patch``, optional ``model_name_or_path``) is one
episode of the ``predictions`` agent: the patch is applied in the task's sandbox with the
env's own tools and submitted, so grading, the report and ``OUT/results.jsonl`` are those of
``repogym run`` (rows with ``task``, ``resolved``, ``reward``, ``hack_flags``, ...; a patch
that does not apply has ``stop_reason: patch_failed ...`` and is graded unchanged). Episodes
run in parallel (``--workers``, ``--ray``) and re-running resumes.

Example::

    repogym grade preds.jsonl --suite tasks/ --workers 4 --out runs/graded
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from repogym.harness.cmd_run import EXIT_USAGE, add_run_options, execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grade", help="grade SWE-bench-style predictions (instance_id, "
                                     "model_patch) against a suite")
    p.add_argument("predictions", type=Path, metavar="PREDICTIONS",
                   help="JSON Lines (or a JSON list) of {instance_id, model_patch, "
                        "model_name_or_path?}")
    add_run_options(p)
    p.set_defaults(func=run)


def _label(preds: list, path: Path, name: str | None) -> str:
    if name:
        return name
    models = sorted({p.model for p in preds if p.model})
    if len(models) > 1:
        raise ValueError(f"{path} holds predictions of {len(models)} models {models}. Fix: one "
                         "file per model, or --name LABEL to grade them as one run")
    return models[0] if models else path.stem


def _check_ids(preds: list, suite: str) -> list[str]:
    from repogym.scenarios.registry import suite_tasks

    known = {t.id for t in suite_tasks(suite)}
    unknown = [p.instance_id for p in preds if p.task_id not in known]
    if unknown:
        hints = [m for u in unknown[:5] for m in difflib.get_close_matches(u, known, n=1)]
        near = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise ValueError(f"{len(unknown)} prediction(s) name no task of suite {suite!r}: "
                         f"{unknown[:10]}{near}. Fix: --suite FOLDER with the imported tasks "
                         "(`repogym import-swebench`), or drop those lines")
    return sorted(p.task_id for p in preds)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.agents import AgentError
    from repogym.harness.agents.scripted import read_predictions
    from repogym.harness.config import RunConfig
    from repogym.harness.report import make_console
    from repogym.scenarios.task import TaskError

    console = make_console(stderr=args.json)
    path = args.predictions.resolve()
    try:
        preds = read_predictions(path)
        cfg = RunConfig(agent="predictions", agent_args={"file": str(path)}, out=args.out,
                        label=_label(preds, path, args.name), suite=args.suite,
                        task_ids=_check_ids(preds, args.suite), workers=args.workers,
                        ray=args.ray, sandbox=args.sandbox, reward_mode=args.reward_mode,
                        retry_errors=args.retry_errors, env_server=args.env_server)
    except (AgentError, TaskError, ValueError) as e:
        console.print(f"[red]error:[/] {e}")
        return EXIT_USAGE
    return execute(cfg, console, args)
