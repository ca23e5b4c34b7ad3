"""Wrappers: TrajectoryLogger writes every episode as one JSONL file.

Schema ``repogym.trajectory/1`` (documented in docs/trajectory-format.md): a ``header``
record, one ``step`` record per step, and a ``summary`` record.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from repogym.envs.info import NO_EXIT_CODE, StepInfo

SCHEMA = "repogym.trajectory/1"
_SUMMARY_KEYS = ("tests", "reward_breakdown", "resolved", "hack_flags", "diff")


class StepBudget(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Tells the env the step limit of the ``TimeLimit`` that ``gym.make(id,
    max_episode_steps=N)`` puts around it, so the env itself truncates, and grades, at that
    step (a TimeLimit alone would end the episode without grading it).

    Every repogym id is registered with it as an additional wrapper; it reads the limit from
    the wrapped env's public ``spec`` (which includes TimeLimit's) and passes it to
    :meth:`repogym.envs.repo_env.RepoEnv.set_step_budget`. It changes nothing else.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
        limit = env.spec.max_episode_steps if env.spec is not None else None
        setter = getattr(self.env.unwrapped, "set_step_budget", None)
        if setter is not None:  # a RemoteEnv's budget is the server's
            setter(limit)


class TrajectoryLogger(gym.Wrapper[str, str, str, str]):
    """Log each episode to ``log_dir/<task>-<n>-<id>.jsonl``.

    Args:
        env: A RepoEnv (possibly wrapped).
        log_dir: Folder for the files (created).

    Attributes:
        path: The current episode's file (None before the first reset).
    """

    def __init__(self, env: gym.Env[str, str], log_dir: str | Path) -> None:
        super().__init__(env)
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.path: Path | None = None
        self._file = None
        self._episode = 0
        self._return = 0.0
        self._steps = 0
        self._start = 0.0

    @property
    def spec(self):
        """The wrapped env's spec: logging changes nothing the spec describes (and
        ``gym.make(id, log_dir=D)`` recreates the logger from the env's own kwargs)."""
        return self.env.spec

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def _end(self, summary: dict[str, Any]) -> None:
        if self._file is not None:
            self._write(
                {
                    "type": "summary",
                    "steps": self._steps,
                    "return": self._return,
                    "wall_s": round(time.monotonic() - self._start, 4),
                    "ended_at": _now(),
                    **summary,
                }
            )
            self._file.close()
            self._file = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._end({"abandoned": True})
        obs, info = self.env.reset(seed=seed, options=options)
        task = info.get("task", "episode")
        self.path = self.log_dir / f"{task}-{self._episode:04d}-{uuid.uuid4().hex[:8]}.jsonl"
        self._episode += 1
        self._file = self.path.open("w")
        self._return, self._steps, self._start = 0.0, 0, time.monotonic()
        spec = self.env.spec
        self._write(
            {
                "type": "header",
                "schema": SCHEMA,
                "task": task,
                "env_id": info.get("env_id"),
                "env_version": getattr(spec, "version", None),
                "seed": seed,
                "options": options,
                "sandbox": info.get("sandbox"),
                "reward_mode": info.get("reward_mode"),
                "max_steps": info.get("max_steps"),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "progress": info.get("progress"),
                "observation": obs,
            }
        )
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        start, at = time.monotonic(), _now()
        obs, reward, terminated, truncated, info = self.env.step(action)
        duration = time.monotonic() - start
        self._steps += 1
        self._return += float(reward)
        if self._file is not None:
            self._write(
                {
                    "type": "step",
                    "t": self._steps,
                    "at": at,
                    "action": action,
                    "observation": obs,
                    "reward": float(reward),
                    "terminated": terminated,
                    "truncated": truncated,
                    "tool": info.get("tool") or None,
                    "exit_code": info.get("exit_code") if info.get("tool_ran") else None,
                    "duration_s": round(duration, 4),
                    "flags": info.get("hack_flags", []),
                    "action_error": info.get("action_error") or None,
                    "progress": info.get("progress"),
                }
            )
            if terminated or truncated:
                self._end(
                    {
                        "reward": float(reward),
                        "abandoned": False,
                        **{k: info.get(k) for k in _SUMMARY_KEYS},
                        **_absent_as_null(info),
                    }
                )
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._end({"abandoned": True})
        super().close()


def _absent_as_null(info: StepInfo) -> dict[str, Any]:
    """The summary's optional keys, null where the env's info has its neutral value (the
    trajectory format predates :mod:`repogym.envs.info`'s always-present keys)."""
    code = info.get("verifier_exit_code")
    return {
        "infra_error": info.get("infra_error") or None,
        "verifier_exit_code": None if code in (None, NO_EXIT_CODE) else code,
        "truncated": info.get("truncated_reason") or None,
    }


def _now() -> str:
    """UTC now, ISO 8601 with milliseconds (``2026-01-02T03:04:05.678Z``)."""
    return (
        datetime.datetime.now(datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def read_trajectory(path: str | Path) -> dict[str, Any]:
    """Load a trajectory file: ``{"header": {...}, "steps": [...], "summary": {...}|None}``.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not a trajectory file of this schema (the message names the line).
    """
    header, steps, summary = None, [], None
    text = Path(path).read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise ValueError(
                f"{path}:{n}: not JSON ({e}). Fix: pass a file written by "
                "TrajectoryLogger (one JSON object per line)"
            ) from e
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "header":
            if rec.get("schema") != SCHEMA:
                raise ValueError(
                    f"{path}:{n}: schema {rec.get('schema')!r} is not {SCHEMA!r}. "
                    "Fix: read it with the repogym version that wrote it"
                )
            header = rec
        elif kind == "step":
            steps.append(rec)
        elif kind == "summary":
            summary = rec
        else:
            raise ValueError(
                f'{path}:{n}: not a trajectory record (no "type" of header, '
                "step or summary). Fix: pass a file written by TrajectoryLogger"
            )
    if header is None:
        raise ValueError(f"{path}: no header record. Fix: pass a file written by TrajectoryLogger")
    return {"header": header, "steps": steps, "summary": summary}
