"""``repogym show FILE``: render a trajectory file (TrajectoryLogger's JSONL, or ATIF JSON).

Everything shown comes from the file as plain text (tool output may hold anything, rich
markup such as ``[/]`` included); long ids wrap instead of being cut. ``--format json``
(``--json``) prints the parsed file instead, ``--format atif`` Harbor's ATIF-v1.8 form
(:mod:`repogym.integrations.atif`; ``--model`` and ``--agent`` name who acted). With
``--out DIR``, ``--format atif`` writes ``DIR/<episode>/trajectory.json`` for the file, or
for every episode of a run folder (``OUT/trajectories/``, ``OUT/rollouts/``). An ATIF
``trajectory.json`` is read too (any ATIF producer's). A path that is not a trajectory
(missing, a folder without ``--out``, a run's results.jsonl) gets a message saying what to
pass, and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from repogym.envs.wrappers import read_trajectory

_EXAMPLES = 3


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="render a trajectory file (.jsonl)")
    p.add_argument("file", help="a trajectory file written by TrajectoryLogger / log_dir=")
    p.add_argument("--max-chars", type=int, default=4000, help="clip each observation")
    p.add_argument(
        "--format",
        choices=["rich", "json", "atif"],
        default="rich",
        help="rich (default): a terminal view; json: the parsed file; atif: "
        "Harbor's ATIF JSON on stdout",
    )
    p.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="the same as --format json",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="with --format atif: write DIR/<episode>/trajectory.json for FILE, or "
        "for every trajectory of a run folder",
    )
    p.add_argument("--model", help="with --format atif: the model that acted (agent.model_name)")
    p.add_argument("--agent", help="with --format atif: the agent's name (agent.name)")
    p.set_defaults(func=run)


def _clip(text: Any, n: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[:n] + f"\n... [{len(text) - n} more characters]"


def _examples(paths: list[str]) -> str:
    shown = ", ".join(paths[:_EXAMPLES])
    return shown + (f" (and {len(paths) - _EXAMPLES} more)" if len(paths) > _EXAMPLES else "")


def _results_rows(path: Path) -> list[dict] | None:
    """The rows of a run's results.jsonl, or None if ``path`` is not one."""
    try:
        with path.open(encoding="utf-8") as f:
            first = json.loads(f.readline() or "null")
    except (OSError, ValueError):
        return None
    if not (isinstance(first, dict) and "type" not in first and "task" in first):
        return None
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return [r for r in rows if isinstance(r, dict)]


def _not_a_trajectory(path: Path) -> str | None:
    """Why ``path`` cannot be shown (a message with the fix), or None if it may be a file."""
    if not path.exists():
        return f"{path} does not exist. Fix: pass a trajectory file (.jsonl) written by log_dir="
    if path.is_dir():
        run = path / "trajectories"
        files = sorted(
            str(p)
            for p in (run if run.is_dir() else path).glob("*.jsonl")
            if p.name != "results.jsonl"
        )
        if not files:
            return (
                f"{path} is a folder with no trajectory files. Fix: pass one .jsonl file "
                "written by log_dir= (a run keeps them in OUT/trajectories/)"
            )
        return f"{path} is a folder. Fix: pass one of its trajectory files: {_examples(files)}"
    rows = _results_rows(path)
    if rows is not None:
        trajs = [
            str(path.parent / r["trajectory"]) for r in rows if isinstance(r.get("trajectory"), str)
        ]
        fix = (
            f"show one episode: {_examples(trajs)}"
            if trajs
            else "pass a trajectory file from the run's trajectories/ folder"
        )
        return f"{path} is a run's results file (one row per episode), not a trajectory. Fix: {fix}"
    return None


def _load(path: Path) -> dict[str, Any]:
    """A trajectory file: TrajectoryLogger's JSONL, or an ATIF JSON document."""
    from repogym.integrations.atif import is_atif, read_atif

    if path.suffix == ".json":
        with contextlib.suppress(ValueError, OSError):
            doc = json.loads(path.read_text(encoding="utf-8"))
            if is_atif(doc):
                return read_atif(path)
            raise TypeError(
                f"{path} is JSON but neither ATIF (no schema_version "
                "'ATIF-v1.x') nor a repogym trajectory (JSON Lines). Fix: pass a "
                "trajectory.json in ATIF or a file written by log_dir="
            )
    return read_trajectory(path)


def _write_atif(args: argparse.Namespace, path: Path) -> int:
    from repogym.harness.prm import episode_files
    from repogym.integrations.atif import to_atif

    files = episode_files(path)
    if not files:
        print(
            f"repogym show: {path} holds no trajectory files. Fix: pass a trajectory file "
            "or a run folder (OUT of repogym run or repogym train)",
            file=sys.stderr,
        )
        return 2
    for file in files:
        try:
            doc = to_atif(_load(file), args.agent, model=args.model)
        except (OSError, ValueError) as e:
            print(f"repogym show: {e}", file=sys.stderr)
            return 2
        dest = args.out / file.stem / "trajectory.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(dest)
    return 0


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if args.out is not None:
        if args.format != "atif":
            print("repogym show: --out writes ATIF files. Fix: add --format atif", file=sys.stderr)
            return 2
        if path.is_dir() or path.is_file():
            return _write_atif(args, path)
    problem = _not_a_trajectory(path)
    if problem is None:
        try:
            traj = _load(path)
        except (OSError, ValueError, TypeError) as e:
            problem = str(e)
    if problem is not None:
        print(f"repogym show: {problem}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(traj, indent=2, default=str))
        return 0
    if args.format == "atif":
        from repogym.integrations.atif import to_atif

        print(json.dumps(to_atif(traj, args.agent, model=args.model), indent=1))
        return 0
    _render(Console(), traj, args.max_chars)
    return 0


def _render(con: Console, traj: dict[str, Any], max_chars: int) -> None:
    h = traj["header"]
    con.print(
        Panel(
            Text(
                f"task {h.get('task')} ({h.get('env_id')})  sandbox "
                f"{h.get('sandbox')}  seed {h.get('seed')}  reward_mode "
                f"{h.get('reward_mode')}  started {h.get('started_at')}"
            ),
            title=Text(str(h.get("schema"))),
        )
    )
    con.print(Panel(Text(_clip(h.get("observation"), max_chars)), title="observation 0"))
    for s in traj["steps"]:
        con.print(
            Panel(
                Text(_clip(s.get("action"), max_chars)),
                title=Text(f"action {s.get('t')} ({s.get('tool')})"),
                border_style="cyan",
            )
        )
        duration = s.get("duration_s")
        took = f"{duration:.3f}s" if isinstance(duration, int | float) else ""
        con.print(
            Panel(
                Text(_clip(s.get("observation"), max_chars)),
                title=Text(f"observation {s.get('t')}  exit {s.get('exit_code')}  {took}"),
                border_style="dim",
            )
        )
    summary = traj["summary"]
    if summary is None:
        con.print(Text("no summary: the episode did not finish", style="yellow"))
        return
    _render_summary(con, summary)


def _render_summary(con: Console, summary: dict[str, Any]) -> None:
    table = Table(
        title=Text(
            f"reward {summary.get('reward')}  resolved "
            f"{summary.get('resolved')}  steps {summary.get('steps')}  hack "
            f"flags {summary.get('hack_flags')}"
        )
    )
    table.add_column("test", overflow="fold")
    table.add_column("outcome", no_wrap=True)
    tests = summary.get("tests")
    for test, outcome in tests.items() if isinstance(tests, dict) else ():
        table.add_row(
            Text(str(test)), Text(str(outcome), style="green" if outcome == "passed" else "red")
        )
    con.print(table)
    if summary.get("diff"):
        con.print(Syntax(str(summary["diff"]), "diff", word_wrap=True))
    if summary.get("infra_error"):
        con.print(Text(f"infra_error: {summary['infra_error']}", style="red"))
