"""``repogym agents``: the built-in agents and every option they take (``--agent-arg``)."""

from __future__ import annotations

import argparse
import json
import textwrap

from repogym.harness.baselines import AGENTS, agent_options, agent_summary, resolve_agent_class

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
            lines.append(textwrap.fill(o.doc or "-", width, initial_indent=head.ljust(_DOC_COLUMN),
                                       subsequent_indent=pad))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agents", help="list the built-in agents and their --agent-arg options")
    p.add_argument("names", nargs="*", metavar="AGENT",
                   help="only these agents (built-in names or module:Class)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.baselines import AgentError

    try:
        if args.json:
            print(json.dumps({n: {"summary": agent_summary(resolve_agent_class(n)),
                                  "options": [o.__dict__ for o in
                                              agent_options(resolve_agent_class(n))]}
                              for n in args.names or AGENTS}, indent=2))
        else:
            print(agents_help(args.names or None), end="")
    except AgentError as e:
        print(f"error: {e}")
        return 2
    return 0
