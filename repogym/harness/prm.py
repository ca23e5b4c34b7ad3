"""Per-step labels for process reward models (``repogym prm label RUN_DIR``).

Each step of a saved rollout (a trajectory file written by TrajectoryLogger / ``repogym
run``) gets the progress the environment measures (:mod:`repogym.envs.progress`: the share
of hidden tests passing on the workspace after the step) and its change from the step
before; with a values file, the Monte-Carlo value of the state after the step and its
change. Progress comes from the file when it was recorded (``gym.make(id, progress=True)``
under the logger), else from replaying the file's actions from ``reset`` in an env that
measures it (the env is deterministic for deterministic commands; ``replay_diff_matches``
says whether the replay ended on the recorded diff). The labels are written to
``RUN_DIR/labels.jsonl``, one row per step (docs/trajectory-format.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from repogym.envs.info import NOT_MEASURED
from repogym.envs.repo_env import RepoEnv
from repogym.envs.wrappers import read_trajectory
from repogym.harness.results import RESULTS, TRAJECTORIES
from repogym.scenarios.registry import registered_tasks

LABELS = "labels.jsonl"
VALUES = "values.jsonl"
#: Files of a run folder that are not trajectories.
NOT_TRAJECTORIES = frozenset({RESULTS, LABELS, VALUES})


def episode_files(path: Path) -> list[Path]:
    """The trajectory files of a run folder (its trajectories/ and rollouts/, or the folder
    itself), or ``[path]`` for a file."""
    if path.is_file():
        return [path]
    folders = [path / TRAJECTORIES, path / "rollouts", path]
    return sorted(
        {
            f
            for d in folders
            if d.is_dir()
            for f in d.glob("*.jsonl")
            if f.name not in NOT_TRAJECTORIES
        }
    )


def read_values(path: Path) -> dict[tuple[str, int], float]:
    """A values file: (trajectory file name, step) -> value of the state after that step.

    Raises:
        ValueError: a line is not ``{"trajectory": str, "t": int, "value": number}``.
    """
    values: dict[tuple[str, int], float] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (Path(row["trajectory"]).name, int(row["t"]))
            values[key] = float(row["value"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"{path}:{n}: not a value row ({e}). Fix: write one JSON object "
                'per line: {"trajectory": FILE, "t": STEP, "value": V}'
            ) from e
    return values


def recorded_progress(traj: dict[str, Any]) -> list[float] | None:
    """Progress before the first step and after each one, as the file recorded it (-1.0
    where not measured); None when the episode was not run with ``progress=True``."""
    first = traj["header"].get("progress")
    steps = [s.get("progress") for s in traj["steps"]]
    if (
        not isinstance(first, int | float)
        or first < 0
        or any(not isinstance(p, int | float) for p in steps)
    ):
        return None
    return [float(first), *(float(p) for p in steps)]


def replay_progress(traj: dict[str, Any], env: RepoEnv) -> tuple[list[float], bool]:
    """Progress before and after each step, measured by replaying the actions in ``env``
    (made with ``progress=True``), and whether the replay ended on the recorded diff."""
    _, info = env.reset(seed=traj["header"].get("seed"))
    series, final = [float(info["progress"])], None
    for step in traj["steps"]:
        *_, terminated, truncated, info = env.step(step["action"])
        series.append(float(info["progress"]))
        if terminated or truncated:
            final = info.get("diff")
            break
    series += [NOT_MEASURED] * (len(traj["steps"]) + 1 - len(series))
    recorded = (traj.get("summary") or {}).get("diff")
    return series, final is None or recorded is None or final == recorded


def _carried(series: list[float]) -> Iterator[tuple[float | None, bool]]:
    """Each point's progress, the last measured one carried over unmeasured points."""
    last: float | None = None
    for p in series:
        measured = p >= 0
        if measured:
            last = p
        yield last, measured


def _delta(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else now - before


def step_labels(
    traj: dict[str, Any], progress: list[float], values: dict[int, float] | None = None
) -> list[dict[str, Any]]:
    """One label per step of ``traj``: ``progress`` (carried over unmeasured steps),
    ``progress_measured``, ``progress_delta`` and, with ``values`` (step -> value of the
    state after it; 0 is the state after reset), ``value`` and ``value_delta``."""
    points = list(_carried(progress))
    labels = []
    for i, step in enumerate(traj["steps"], 1):
        (now, measured), (before, _) = points[i], points[i - 1]
        label: dict[str, Any] = {
            "t": step.get("t", i),
            "tool": step.get("tool"),
            "progress": now,
            "progress_measured": measured,
            "progress_delta": _delta(now, before),
        }
        if values is not None:
            v, v0 = values.get(i), values.get(i - 1)
            label["value"] = v
            label["value_delta"] = _delta(v, v0)
        labels.append(label)
    return labels


class Labeller:
    """Labels the trajectories of a run; replays share one env per task (and its verdict
    cache). Close it when done.

    Args:
        sandbox: Backend for replays (default: the one each file records).
        replay: ``auto`` (replay only files without recorded progress), ``always``, ``never``
            (files without recorded progress get no progress).
    """

    def __init__(self, sandbox: str | None = None, replay: str = "auto") -> None:
        if replay not in ("auto", "always", "never"):
            raise ValueError(f"replay={replay!r}. Fix: auto, always or never")
        self.sandbox, self.replay = sandbox, replay
        self._envs: dict[tuple, RepoEnv] = {}

    def _env(self, header: dict[str, Any]) -> RepoEnv:
        task = registered_tasks().get(header.get("task"))
        if task is None:
            raise ValueError(
                f"task {header.get('task')!r} is not registered here, so its "
                "episodes cannot be replayed. Fix: register it (repogym suite "
                "fetch / register_task), or log episodes with progress=True"
            )
        key = (
            task.id,
            self.sandbox or header.get("sandbox") or "bwrap",
            header.get("reward_mode") or "binary",
            header.get("max_steps"),
        )
        if key not in self._envs:
            self._envs[key] = RepoEnv(
                task, sandbox=key[1], reward_mode=key[2], max_steps=key[3], progress=True
            )
        return self._envs[key]

    def progress(self, traj: dict[str, Any]) -> tuple[list[float], str, bool | None]:
        """(progress series, where it came from, whether a replay matched the record)."""
        recorded = recorded_progress(traj) if self.replay != "always" else None
        if recorded is not None:
            return recorded, "recorded", None
        if self.replay == "never":
            return [NOT_MEASURED] * (len(traj["steps"]) + 1), "none", None
        series, matches = replay_progress(traj, self._env(traj["header"]))
        return series, "replay", matches

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def label_run(
    run_dir: Path,
    *,
    values_path: Path | None = None,
    sandbox: str | None = None,
    replay: str = "auto",
    on_file: Callable[[Path, dict[str, Any]], None] | None = None,
) -> Path:
    """Label every trajectory of ``run_dir``; write ``run_dir/labels.jsonl`` and return it.

    Args:
        run_dir: A run folder or a folder of trajectory files.
        values_path: A values file (default ``run_dir/values.jsonl`` when it exists).
        sandbox, replay: See :class:`Labeller`.
        on_file: Called with each file and its trajectory, whose steps carry their
            ``labels`` (e.g. to export it as ATIF).

    Raises:
        FileNotFoundError: no trajectory files there.
        ValueError: a file is not a trajectory, or its task cannot be replayed.
    """
    if not run_dir.is_dir():
        raise FileNotFoundError(
            f"{run_dir} is not a folder. Fix: pass the run folder that "
            "holds the trajectory files (labels.jsonl is written there)"
        )
    files = episode_files(run_dir)
    if not files:
        raise FileNotFoundError(
            f"{run_dir} holds no trajectory files. Fix: pass a run folder "
            "(OUT of repogym run) or a folder written by log_dir="
        )
    if values_path is None and (run_dir / VALUES).is_file():
        values_path = run_dir / VALUES
    values = read_values(values_path) if values_path is not None else None
    out = run_dir / LABELS
    labeller = Labeller(sandbox, replay)
    try:
        with out.open("w", encoding="utf-8") as f:
            for file in files:
                traj = read_trajectory(file)
                series, source, matches = labeller.progress(traj)
                mine = (
                    None
                    if values is None
                    else {t: v for (name, t), v in values.items() if name == file.name}
                )
                for step, label in zip(traj["steps"], step_labels(traj, series, mine), strict=True):
                    label = {
                        "trajectory": str(file.relative_to(run_dir)),
                        **label,
                        "source": source,
                        "replay_diff_matches": matches,
                    }
                    step["labels"] = {
                        k: v for k, v in label.items() if k not in ("trajectory", "t", "tool")
                    }
                    f.write(json.dumps(_finite(label)) + "\n")
                if on_file is not None:
                    on_file(file, traj)
    finally:
        labeller.close()
    return out


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }
