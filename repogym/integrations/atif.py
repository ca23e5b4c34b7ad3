"""repogym trajectories as Harbor's ATIF (Agent Trajectory Interchange Format, v1.8).

``repogym show FILE --format atif`` prints one. The first step is the env's first
observation (source ``user``); each env step becomes an ``agent`` step whose ``message`` is
the raw action, with the parsed tool call (none for a malformed action) and the
observation as its result. The grade (reward, resolved, per-test outcomes, hack flags)
goes to ``final_metrics.extra``.
"""

from __future__ import annotations

from typing import Any

from repogym.envs.actions import ActionError, parse_action

SCHEMA_VERSION = "ATIF-v1.8"


def to_atif(traj: dict[str, Any], agent: str = "repogym-agent") -> dict[str, Any]:
    """ATIF of a trajectory loaded by :func:`repogym.envs.wrappers.read_trajectory`."""
    header, summary = traj["header"], traj.get("summary") or {}
    steps: list[dict[str, Any]] = [{"step_id": 1, "timestamp": header.get("started_at"),
                                    "source": "user", "message": header.get("observation", "")}]
    for rec in traj["steps"]:
        step: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent",
                                "message": rec["action"],
                                "extra": {"reward": rec.get("reward"),
                                          "exit_code": rec.get("exit_code"),
                                          "duration_s": rec.get("duration_s"),
                                          "action_error": rec.get("action_error")}}
        result: dict[str, Any] = {"content": rec["observation"]}
        try:
            call = parse_action(rec["action"])
        except ActionError:
            call = None
        if call is not None:
            call_id = f"call_{rec['t']}"
            step["tool_calls"] = [{"tool_call_id": call_id, "function_name": call.name,
                                   "arguments": call.args}]
            result["source_call_id"] = call_id
        step["observation"] = {"results": [result]}
        steps.append(step)
    grade = {k: summary.get(k) for k in ("reward", "resolved", "tests", "hack_flags",
                                          "infra_error", "truncated", "abandoned")
             if k in summary}
    return {"schema_version": SCHEMA_VERSION,
            "session_id": f"{header.get('task')}-{header.get('started_at')}",
            "agent": {"name": agent, "version": "1"},
            "steps": steps,
            "final_metrics": {"total_steps": len(traj["steps"]), "extra": grade},
            "extra": {"task": header.get("task"), "env_id": header.get("env_id"),
                      "seed": header.get("seed"), "sandbox": header.get("sandbox"),
                      "reward_mode": header.get("reward_mode"), "diff": summary.get("diff")}}
