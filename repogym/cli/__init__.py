"""The ``repogym`` command line. Each sub-command lives in its own module.

A module listed in ``SUBCOMMANDS`` defines ``register(subparsers)``, which adds its parser
and sets ``func`` (taking the parsed args, returning an exit code) with
``parser.set_defaults(func=...)``. Modules are imported only when the CLI runs.

Every command runs under :func:`repogym.sandbox.cleanup.graceful_signals`: the first
SIGTERM, SIGINT or SIGHUP stops it like Ctrl-C (what it holds is closed, what it recorded is
kept) and the process then dies of that signal, as without repogym; a second one forces the
exit after removing every sandbox. Before and after the command, SIGTERM and SIGHUP remove
what is left and then kill the process (:func:`repogym.sandbox.cleanup.install_signal_handlers`,
which :func:`main`, the entry point, installs: library code installs no handler).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from repogym.sandbox import cleanup

SUBCOMMANDS: list[str] = [
    "repogym.cli.cmd_show",
    "repogym.cli.cmd_tasks",
    "repogym.cli.cmd_validate",
    "repogym.cli.cmd_new_task",
    "repogym.cli.cmd_import",
    "repogym.cli.cmd_synth",
    "repogym.cli.cmd_history",
    "repogym.cli.cmd_env",
    "repogym.cli.cmd_prm",
    "repogym.cli.cmd_suite",
    "repogym.cli.cmd_agents",
    "repogym.cli.cmd_run",
    "repogym.cli.cmd_grade",
    "repogym.cli.cmd_tiers",
    "repogym.cli.cmd_leaderboard",
    "repogym.cli.cmd_compare",
    "repogym.cli.cmd_demo",
    "repogym.cli.cmd_train",
    "repogym.cli.cmd_plot",
    "repogym.cli.cmd_gc",
    "repogym.cli.cmd_serve",
    "repogym.cli.cmd_harbor",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="repogym",
        description="Gymnasium environments for coding agents: run, validate, train, inspect.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``repogym`` command (``argv``: its arguments; default ``sys.argv[1:]``)."""
    cleanup.install_signal_handlers()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with cleanup.graceful_signals():
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            signum = cleanup.stop_signal() or signal.SIGINT
            print(
                f"interrupted ({signal.Signals(signum).name}); what was recorded is kept: "
                "run the same command again to resume",
                file=sys.stderr,
            )
            cleanup.die_of(signum)  # what is still open goes, then the signal's own exit
            return 128 + signum  # not reached
