"""``repogym run``: benchmark an agent on a suite, in parallel, resumably.

Example::

    repogym run --agent oracle --suite builtin --workers 2 --out runs/oracle
    repogym run --agent openai --agent-arg base_url=http://127.0.0.1:8000/v1 \\
        --agent-arg model=Qwen/Qwen3-8B --samples 4 --ray local --out runs/qwen
"""

from __future__ import annotations

import argparse

from repogym.cli.options import EXIT_USAGE, SPLITS, add_run_options, agents_help
from repogym.cli.printing import print_error
from repogym.cli.running import config_from_args, execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run an agent over a suite; write results + trajectories",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="agents and their --agent-arg options (also: repogym agents):\n\n" + agents_help(),
    )
    p.add_argument(
        "--agent",
        required=True,
        help="oracle | noop | random | replay | predictions | hf | openai | module:Class",
    )
    p.add_argument(
        "--agent-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="agent option (repeatable; values parse as JSON if they can)",
    )
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--tag", action="append", default=[], help="keep tasks with any of these tags")
    p.add_argument("--tasks", help="comma-separated task ids")
    p.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, help="override every task's step budget")
    p.add_argument(
        "--act-timeout",
        type=float,
        default=300.0,
        help="seconds per agent act() before the episode is an agent error",
    )
    p.add_argument(
        "--max-endpoint-errors",
        type=int,
        default=3,
        metavar="N",
        help="stop the run (exit status 3, resumable) after N episodes in a row "
        "failed on the model's endpoint (connection refused, timeouts, HTTP "
        "5xx after the agent's retries); those are recorded as endpoint "
        "errors, not scored. 0: never stop (default 3)",
    )
    add_run_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.report import make_console

    console = make_console(stderr=args.json)
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        print_error(console, e)
        return EXIT_USAGE
    return execute(cfg, console, args)
