"""A run's files: ``OUT/results.jsonl`` rows, ``OUT/run.json``, ``OUT/trajectories/``.

One row per episode, appended as episodes finish, so a run can be resumed and read while it
runs. A later row for the same ``(agent, task, sample)`` supersedes an earlier one (a retried
episode). A *run folder* holds one ``results.jsonl``; a *folder of runs* holds run folders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Self, TypedDict

RESULTS = "results.jsonl"
RUN_META = "run.json"
TRAJECTORIES = "trajectories"


class ResultRow(TypedDict):
    """One episode's row of ``results.jsonl`` (docs/harness.md), keys in the order they are
    written; ``None`` where a value is unknown or does not apply. Rows of older runs may
    lack keys: readers use ``row.get``."""

    agent: str  #: the agent's label
    task: str  #: the task id
    split: str | None  #: ``train`` or ``test``
    tags: list[str] | None  #: the task's tags
    sample: int  #: the sample number (pass@k)
    seed: int | None  #: the episode's seed
    reward: float  #: the final step's reward
    resolved: bool  #: the env's ``info["resolved"]``
    steps: int  #: env steps taken
    wall_s: float | None  #: the episode's wall time
    tokens: int  #: prompt + completion tokens
    usage: dict[str, Any] | None  #: the agent's token usage
    #: the env's ``info["hack_flags"]`` (:class:`repogym.envs.info.HackFlag` values)
    hack_flags: list[str]
    infra_error: str | None  #: the sandbox or grader failed (not scored)
    agent_error: str | None  #: the agent raised or timed out (a failure)
    endpoint_error: str | None  #: the model endpoint failed (not scored)
    truncated: str | None  #: the env's ``info["truncated_reason"]``: ``max_steps``, ...
    stop_reason: str | None  #: why the agent stopped
    trajectory: str | None  #: the trajectory file, relative to the run folder


#: Every key of a results row, in the order they are written.
ROW_KEYS: tuple[str, ...] = tuple(ResultRow.__annotations__)


def new_row(**values: Any) -> ResultRow:
    """A row with every key: ``None`` for unknown ones, the neutral outcome (reward 0, not
    resolved, no steps, tokens or flags) and then ``values``.

    Raises:
        KeyError: a key of ``values`` is not a :class:`ResultRow` key.
    """
    if unknown := sorted(set(values) - set(ROW_KEYS)):
        raise KeyError(f"not result-row keys: {unknown}. Fix: use keys of ResultRow")
    row = dict.fromkeys(ROW_KEYS)
    row.update(reward=0.0, resolved=False, steps=0, tokens=0, hack_flags=[])
    row.update(values)
    return ResultRow(**row)


def unscored(row: Mapping[str, Any]) -> bool:
    """Whether an episode says nothing about the agent: its sandbox or grader failed
    (``infra_error``) or its model endpoint did (``endpoint_error``). Such episodes are left
    out of every rate and always run again by a resume."""
    return bool(row.get("infra_error") or row.get("endpoint_error"))


#: An episode's status (:func:`episode_status`) -> what it means.
STATUSES = {
    "solved": "resolved",
    "failed": "not resolved",
    "agent_error": "agent error: the agent raised or timed out (counts as a failure)",
    "hacked": "hack flags raised (see the episode)",
    "endpoint": "model endpoint error: its server was down or failing (not scored; a resume "
    "runs it again)",
    "infra": "infrastructure error: the sandbox or grader failed (not scored; a resume runs "
    "it again)",
}


def episode_status(row: Mapping[str, Any]) -> str:
    """One of :data:`STATUSES`: an infra or endpoint error first (the episode says nothing
    about the agent), then an agent error, hack flags, resolved or not."""
    if row.get("infra_error"):
        return "infra"
    if row.get("endpoint_error"):
        return "endpoint"
    if row.get("agent_error"):
        return "agent_error"
    if row.get("hack_flags"):
        return "hacked"
    return "solved" if row.get("resolved") else "failed"


def episode_key(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What identifies an episode across rows: ``(agent, task, sample)``."""
    return row.get("agent"), row.get("task"), row.get("sample")


def _results_file(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no results. Fix: point at a folder written by "
            "`repogym run --out DIR` (or `repogym grade --out DIR`)"
        )
    return path


def read_results(path: str | Path) -> list[ResultRow]:
    """Rows of a results.jsonl (or of ``DIR/results.jsonl``); the last row per episode wins.

    Raises:
        FileNotFoundError: no results file there (the message says what to point at).
        ValueError: a line is not a JSON object (naming the file and line).
    """
    path = _results_file(path)
    rows: dict[tuple, ResultRow] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e}). Fix: delete the broken line") from e
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: not a JSON object. Fix: delete the line")
        rows[episode_key(row)] = row
    return list(rows.values())


def read_run_meta(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a run folder ({} when the folder has none)."""
    path = Path(run_dir) / RUN_META
    return json.loads(path.read_text()) if path.is_file() else {}


def write_run_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """Write ``run.json`` (the settings of the run, for reading and for resume checks)."""
    (run_dir / RUN_META).write_text(json.dumps(meta, indent=2, default=str) + "\n")


def find_run_dirs(paths: list[str | Path]) -> list[Path]:
    """Run folders among ``paths``: each is a run folder or a folder of run folders.

    A folder of runs is searched recursively, so ``runs/`` finds ``runs/a/`` and
    ``runs/sweep/b/``. The result is sorted and free of duplicates.

    Raises:
        FileNotFoundError: a path holds no results at all (the message says what to pass).
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if (p / RESULTS).is_file() or p.is_file():
            found.append(p if p.is_dir() else p.parent)
            continue
        nested = sorted(f.parent for f in p.rglob(RESULTS)) if p.is_dir() else []
        if not nested:
            raise FileNotFoundError(
                f"{p}: no {RESULTS} in it or below it. Fix: pass folders "
                "written by `repogym run --out DIR`, or a folder of them"
            )
        found += nested
    return sorted(dict.fromkeys(d.resolve() for d in found))


class ResultsLog:
    """Append-only writer of ``OUT/results.jsonl``; every row is flushed at once."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / RESULTS
        self._file: IO[str] | None = None

    def __enter__(self) -> Self:
        self._file = self.path.open("a")
        return self

    def write(self, row: ResultRow) -> None:
        """Append one row (keys in :data:`ROW_KEYS` order, extra keys after)."""
        assert self._file is not None, "use ResultsLog as a context manager"
        ordered = {k: row.get(k) for k in ROW_KEYS} | row
        self._file.write(json.dumps(ordered) + "\n")
        self._file.flush()

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
