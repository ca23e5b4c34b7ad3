"""Options several commands share, with their choices derived from where each is defined."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from repogym.grading.grader import REWARD_MODES
from repogym.harness.baselines import AGENTS, agent_options, agent_summary, resolve_agent_class
from repogym.sandbox import BACKENDS
from repogym.scenarios.task import SPLITS

__all__ = [
    "EXIT_OUTAGE",
    "EXIT_USAGE",
    "REWARD_MODES",
    "SPLITS",
    "add_mutation_options",
    "add_run_options",
    "add_sandbox",
    "agents_help",
    "bad_mutation_args",
]


def add_sandbox(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None = "bwrap"
) -> None:
    """``--sandbox``: one of the registered backends (:data:`repogym.sandbox.BACKENDS`)."""
    p.add_argument(
        "--sandbox",
        default=default,
        choices=sorted(BACKENDS),
        help="sandbox backend (default bwrap)",
    )


#: Exit status when nothing could run: bad options, tasks or agent settings.
EXIT_USAGE = 2
#: Exit status of a run stopped because the model's endpoint was down (resume it later).
EXIT_OUTAGE = 3


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options ``run`` and ``grade`` share: where tasks come from and how episodes run."""
    p.add_argument(
        "--suite",
        default="builtin",
        help="'builtin', a shipped suite fetched here ('realpy', see `repogym suite`), "
        "or a folder of task folders",
    )
    p.add_argument("--workers", type=int, default=1, help="episodes in parallel")
    p.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        help="run on Ray actors: 'local' starts Ray here, else a cluster address",
    )
    add_sandbox(p)
    p.add_argument(
        "--env-server",
        metavar="URL",
        help="run the envs on a `repogym serve` at URL (its sandboxes, its grader)",
    )
    p.add_argument("--reward-mode", default="binary", choices=REWARD_MODES)
    p.add_argument("--name", help="label of the run in results and tables")
    p.add_argument("--out", required=True, type=Path, help="output folder (resumable)")
    p.add_argument(
        "--retry-errors",
        action="store_true",
        help="on resume, also re-run episodes recorded with an agent error "
        "(infra errors are always re-run)",
    )
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_mutation_options(p: argparse.ArgumentParser, *, gate: bool) -> None:
    """The mutation check's options, for ``validate`` (``--mutation`` computes it) or, with
    ``gate``, for a command that writes tasks and scores them unless ``--no-mutation``."""
    m = p.add_argument_group("mutation check")
    if gate:
        m.add_argument(
            "--no-mutation",
            action="store_true",
            help="do not compute the mutation score of the tasks written",
        )
        m.add_argument(
            "--workers",
            type=int,
            default=os.cpu_count() or 1,
            help="mutants graded in parallel (default: CPU count)",
        )
        add_sandbox(m)
    else:
        m.add_argument(
            "--mutation",
            action="store_true",
            help="also grade mutants of the gold fix: the hidden tests must reject them",
        )
    m.add_argument(
        "--min-score",
        type=float,
        default=None,
        help="lowest passing mutation score (default: MIN_SCORE of "
        "repogym.quality.validate_mutation, 0.9)",
    )
    m.add_argument(
        "--max-mutants",
        type=int,
        default=None,
        help="grade at most this many mutants per task (a fixed sample; default all)",
    )
    m.add_argument(
        "--mutation-budget",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="stop starting mutants of a task after this long (default 600)",
    )


def bad_mutation_args(args: argparse.Namespace) -> bool:
    """Whether the mutation options are wrong (said on standard error); fills in the
    default --min-score."""
    if problem := _mutation_args_error(args):
        print(f"error: {problem}", file=sys.stderr)
        return True
    return False


def _mutation_args_error(args: argparse.Namespace) -> str | None:
    from repogym.quality.validate_mutation import MIN_SCORE

    if args.min_score is None:
        args.min_score = MIN_SCORE
    if not 0.0 <= args.min_score <= 1.0:
        return "--min-score must be between 0 and 1"
    if args.max_mutants is not None and args.max_mutants < 1:
        return "--max-mutants must be >= 1"
    if args.mutation_budget <= 0:
        return "--mutation-budget must be > 0 seconds"
    if args.workers < 1:
        return "--workers must be >= 1"
    return None


_DOC_COLUMN = 28


def agents_help(names: list[str] | None = None, width: int = 100) -> str:
    """Plain text: each agent's one-line summary and its options with defaults and docs."""
    lines = []
    for name in names or list(AGENTS):
        cls = resolve_agent_class(name)
        lines.append(f"{name}: {agent_summary(cls)}")
        opts = agent_options(cls)
        if not opts:
            lines.append("  (no options)")
        for o in opts:
            head, pad = f"  {o.name}={o.default}", " " * _DOC_COLUMN
            if len(head) >= _DOC_COLUMN - 1:
                lines.append(head)
                head = ""
            lines.append(
                textwrap.fill(
                    o.doc or "-",
                    width,
                    initial_indent=head.ljust(_DOC_COLUMN),
                    subsequent_indent=pad,
                )
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
