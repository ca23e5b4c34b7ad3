"""``repogym prm label RUN_DIR``: per-step process-reward labels for saved rollouts.

    repogym prm label OUT                      # OUT of repogym run, or a log_dir= folder
    repogym prm label OUT --values values.jsonl --sandbox bwrap --replay always

Writes ``RUN_DIR/labels.jsonl`` (one row per step: progress, its delta, and with a values
file the Monte-Carlo value and its delta; docs/trajectory-format.md) and each trajectory as
ATIF with the labels in every step's ``extra`` (``RUN_DIR/atif/<episode>/trajectory.json``).
Episodes recorded without ``progress=True`` are replayed in a sandbox to measure it. Exit
status 2 when the folder holds no trajectories or one cannot be labelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prm", help="process-reward labels for saved rollouts")
    s = p.add_subparsers(dest="prm_command", metavar="ACTION", required=True)
    lab = s.add_parser("label", help="label every step of a run's trajectories")
    lab.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help="a run folder (OUT of repogym run) or a folder of trajectory files",
    )
    lab.add_argument(
        "--values",
        type=Path,
        metavar="FILE",
        help='Monte-Carlo values, one JSON row per state: {"trajectory", '
        '"t", "value"} (default RUN_DIR/values.jsonl if present)',
    )
    lab.add_argument(
        "--sandbox", default=None, help="backend for replays (default: the one each file records)"
    )
    lab.add_argument(
        "--replay",
        choices=["auto", "always", "never"],
        default="auto",
        help="auto: replay only episodes recorded without progress",
    )
    lab.add_argument("--no-atif", action="store_true", help="write labels.jsonl only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.harness.prm import label_run
    from repogym.integrations.atif import to_atif

    written: list[Path] = []

    def export(file: Path, traj: dict[str, Any]) -> None:
        if args.no_atif:
            return
        dest = args.run_dir / "atif" / file.stem / "trajectory.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(to_atif(traj), indent=1) + "\n", encoding="utf-8")
        written.append(dest)

    try:
        out = label_run(
            args.run_dir,
            values_path=args.values,
            sandbox=args.sandbox,
            replay=args.replay,
            on_file=export,
        )
    except (OSError, ValueError) as e:
        print(f"repogym prm label: {e}", file=sys.stderr)
        return 2
    rows = sum(1 for _ in out.open(encoding="utf-8"))
    print(f"{out}: {rows} step labels")
    if written:
        print(f"ATIF with labels: {len(written)} file(s) under {args.run_dir / 'atif'}")
    return 0
