"""``repogym agents``: the built-in agents and every option they take (``--agent-arg``)."""

from __future__ import annotations

import argparse
import json

from repogym.cli.options import agents_help
from repogym.harness.baselines import AGENTS, agent_options, agent_summary, resolve_agent_class


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agents", help="list the built-in agents and their --agent-arg options")
    p.add_argument(
        "names",
        nargs="*",
        metavar="AGENT",
        help="only these agents (built-in names or module:Class)",
    )
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.baselines import AgentError

    try:
        if args.json:
            print(
                json.dumps(
                    {
                        n: {
                            "summary": agent_summary(resolve_agent_class(n)),
                            "options": [o.__dict__ for o in agent_options(resolve_agent_class(n))],
                        }
                        for n in args.names or AGENTS
                    },
                    indent=2,
                )
            )
        else:
            print(agents_help(args.names or None), end="")
    except AgentError as e:
        print(f"error: {e}")
        return 2
    return 0
