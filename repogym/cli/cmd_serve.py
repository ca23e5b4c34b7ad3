"""``repogym serve``: serve repogym envs over OpenEnv's HTTP/WebSocket/MCP API.

Every option not given falls back to its ``REPOGYM_SERVE_*`` variable (a container's way of
configuring it, see :meth:`repogym.server.ServeConfig.from_env`), then to its default.

Example::

    repogym serve --port 8000 --split test
    # then: gym.make("repogym/retry-zero-v0", remote="http://127.0.0.1:8000")
    #   or: openenv validate http://127.0.0.1:8000; an MCP client at .../mcp
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from repogym.cli.options import REWARD_MODES, SPLITS, add_sandbox


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve envs over an OpenEnv-compatible HTTP/WebSocket/MCP API")
    p.add_argument("--host", help="address to bind (default: loopback; use a --token off loopback)")
    p.add_argument("--port", type=int, help="TCP port (default 8000)")
    p.add_argument("--suite", help="'builtin' (default) or a folder of task folders")
    p.add_argument(
        "--task",
        action="append",
        dest="task_ids",
        metavar="ID",
        help="serve only this task (repeatable)",
    )
    p.add_argument("--split", choices=SPLITS)
    p.add_argument("--tags", nargs="+", metavar="TAG", help="serve tasks with any of these tags")
    add_sandbox(p)
    p.add_argument("--reward-mode", choices=REWARD_MODES, help="default binary")
    p.add_argument(
        "--max-sessions",
        type=int,
        help="sessions open at once; one more is answered 503 (default 64)",
    )
    p.add_argument(
        "--ttl",
        type=float,
        help="seconds a session may stay idle before its "
        "sandbox is deleted (0: never; default 600)",
    )
    p.add_argument("--token", help="bearer token clients must send")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.server import ServeConfig, serve

    try:
        cfg = ServeConfig.from_env()
    except ValueError as e:
        print(f"error: a REPOGYM_SERVE_* variable: {e}", file=sys.stderr)
        return 2
    given = {
        "host": args.host,
        "port": args.port,
        "suite": args.suite,
        "task_ids": args.task_ids,
        "split": args.split,
        "tags": args.tags,
        "sandbox": args.sandbox,
        "reward_mode": args.reward_mode,
        "max_sessions": args.max_sessions,
        "token": args.token,
    }
    cfg = dataclasses.replace(cfg, **{k: v for k, v in given.items() if v is not None})
    if args.ttl is not None:
        cfg.ttl_s = args.ttl or None
    try:
        tasks = cfg.tasks()
        if cfg.max_sessions < 1:
            raise ValueError(f"--max-sessions {cfg.max_sessions}. Fix: pass a number >= 1")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"repogym serve: {len(tasks)} task(s) on http://{cfg.host}:{cfg.port} "
        f"(WebSocket /ws; max {cfg.max_sessions} sessions; "
        f"{'token required' if cfg.token else 'no token'})",
        flush=True,
    )
    try:
        serve(cfg)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
