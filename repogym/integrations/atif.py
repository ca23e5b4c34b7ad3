"""repogym trajectories as Harbor's ATIF (Agent Trajectory Interchange Format) v1.8, both ways.

Target: **ATIF-v1.8**, as Harbor's reference models define it (``harbor.models.trajectories``
in harbor 0.26; RFC 0001 "Agent Trajectory Interchange Format"). ``repogym show FILE
--format atif`` prints one; ``--out DIR`` writes ``DIR/<episode>/trajectory.json`` per
episode of a file or a run folder (Harbor keeps one ``trajectory.json`` per trial);
:func:`from_atif` (``repogym show trajectory.json``) reads any ATIF file back.

How a repogym trajectory (``repogym.trajectory/1``, or a training rollout file, which adds
exact token ids) maps onto ATIF:

- step 1 is the env's first observation (``source: "user"``, timestamped with the
  episode's start); each env step is one ``agent`` step: ``message`` is the raw action,
  ``tool_calls`` the parsed call (none for a malformed action), the observation its
  ``observation.results[0]`` (exit code, duration, parse error and flags in that result's
  ``extra``), ``timestamp`` when the step was taken (files that record it); the step's
  ``extra`` also keeps the env's ``progress`` (when measured) and the process-reward
  ``labels`` of ``repogym prm label`` (docs/trajectory-format.md);
- rewards sit where RFC 0001 puts RL data, in the step's ``metrics`` ("including
  RL-specific fields (reward, logprobs)"): ATIF-v1.8's metrics have no ``reward`` key, so
  the step's reward is ``metrics.extra.reward``; the episode's grade (reward, resolved,
  per-test outcomes, hack flags, infra error) is ``final_metrics.extra``;
- a rollout's tokens are ATIF's RL fields: ``metrics.prompt_token_ids`` is the whole
  context the model was given at that turn (earlier prompts and completions, then the
  turn's own prompt; ``prompt_tokens`` its length), ``completion_token_ids`` and
  ``logprobs`` the sampled tokens and their behaviour log-probabilities;
- ``final_metrics.total_steps`` counts every ATIF step (the first observation included);
  ``agent.model_name`` is the model when known (``model=``, or the header's ``model``);
  ``agent.tool_definitions`` are the env's tools in OpenAI's function form;
  ``extra.repogym`` keeps what ATIF has no field for (task, env id, seed, sandbox, reward
  mode, step budget, diff), so :func:`from_atif` gives the trajectory back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repogym.envs.actions import TOOLS, ActionError, parse_action
from repogym.envs.wrappers import SCHEMA
from repogym.version import __version__

SCHEMA_VERSION = "ATIF-v1.8"
_HEADER_KEYS = (
    "task",
    "env_id",
    "env_version",
    "seed",
    "options",
    "sandbox",
    "reward_mode",
    "max_steps",
    "format",
    "train_step",
    "group",
    "policy_version",
)
_GRADE_KEYS = (
    "reward",
    "resolved",
    "tests",
    "reward_breakdown",
    "hack_flags",
    "infra_error",
    "verifier_exit_code",
    "truncated",
    "abandoned",
    "graded",
    "return",
    "wall_s",
)
_RESULT_KEYS = ("exit_code", "duration_s", "action_error", "flags")
_STEP_KEYS = (
    "terminated",
    "truncated",
    "tool",
    "env_action",
    "finish_reason",
    "progress",
    "labels",
)
_TOKEN_KEYS = ("prompt_ids", "completion_ids", "logprobs", "prompt_obs_mask")


def tool_definitions() -> list[dict[str, Any]]:
    """The env's tools in OpenAI's function-calling form (ATIF's ``tool_definitions``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters(),
            },
        }
        for t in TOOLS.values()
    ]


def _some(d: dict[str, Any]) -> dict[str, Any] | None:
    out = {k: v for k, v in d.items() if v is not None}
    return out or None


def _metrics(rec: dict[str, Any], context: list[int]) -> dict[str, Any]:
    """A step's ATIF metrics: its reward, and a rollout turn's tokens."""
    metrics: dict[str, Any] = {"extra": {"reward": rec.get("reward")}}
    if "completion_ids" in rec:
        prompt = context + list(rec.get("prompt_ids") or [])
        extra = metrics["extra"]
        if rec.get("prompt_obs_mask"):
            extra["prompt_obs_mask"] = rec["prompt_obs_mask"]
        metrics.update(
            prompt_tokens=len(prompt),
            completion_tokens=len(rec["completion_ids"]),
            prompt_token_ids=prompt,
            completion_token_ids=list(rec["completion_ids"]),
            logprobs=list(rec.get("logprobs") or []),
        )
    return metrics


def _agent_step(rec: dict[str, Any], step_id: int, context: list[int]) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_id": step_id,
        "timestamp": rec.get("at"),
        "source": "agent",
        "message": rec.get("action") or "",
    }
    result: dict[str, Any] = {"content": rec.get("observation") or ""}
    try:
        call = parse_action(rec.get("env_action") or rec.get("action") or "")
    except ActionError:
        call = None
    if call is not None:
        call_id = f"call_{rec.get('t', step_id - 1)}"
        step["tool_calls"] = [
            {"tool_call_id": call_id, "function_name": call.name, "arguments": call.args}
        ]
        result["source_call_id"] = call_id
    result["extra"] = _some({k: rec.get(k) for k in _RESULT_KEYS})
    step["observation"] = {"results": [_some(result) or {}]}
    step["metrics"] = _metrics(rec, context)
    step["extra"] = _some({k: rec.get(k) for k in _STEP_KEYS})
    return _some(step) or step


def to_atif(
    traj: dict[str, Any],
    agent: str | None = None,
    *,
    model: str | None = None,
    agent_version: str | None = None,
) -> dict[str, Any]:
    """ATIF-v1.8 of a trajectory loaded by :func:`repogym.envs.wrappers.read_trajectory`.

    Args:
        traj: ``{"header", "steps", "summary"}``.
        agent: The agent's name (``agent.name``; default the header's, else
            ``repogym-agent``).
        model: The model (``agent.model_name``); default the header's ``model``, if any.
        agent_version: ``agent.version`` (default the header's, else repogym's version).
    """
    header, summary = traj["header"], traj.get("summary") or {}
    agent = agent or header.get("atif_agent") or "repogym-agent"
    agent_version = agent_version or header.get("atif_agent_version") or __version__
    steps: list[dict[str, Any]] = [
        _some(
            {
                "step_id": 1,
                "timestamp": header.get("started_at"),
                "source": "user",
                "message": header.get("observation") or "",
            }
        )
    ]
    context: list[int] = []
    for rec in traj["steps"]:
        steps.append(_agent_step(rec, len(steps) + 1, context))
        if "completion_ids" in rec:
            context = context + list(rec.get("prompt_ids") or []) + list(rec["completion_ids"])
    final: dict[str, Any] = {
        "total_steps": len(steps),
        "extra": _some({k: summary.get(k) for k in _GRADE_KEYS}) or {},
    }
    tokens = [s["metrics"] for s in steps[1:] if "completion_token_ids" in s.get("metrics", {})]
    if tokens:
        final["total_prompt_tokens"] = sum(m["prompt_tokens"] for m in tokens)
        final["total_completion_tokens"] = sum(m["completion_tokens"] for m in tokens)
    repogym = _some(
        {
            **{k: header.get(k) for k in _HEADER_KEYS},
            "diff": summary.get("diff"),
            "ended_at": summary.get("ended_at"),
            "final_ids": summary.get("final_ids"),
            "final_obs_mask": summary.get("final_obs_mask"),
        }
    )
    return _some(
        {
            "schema_version": SCHEMA_VERSION,
            "session_id": header.get("session_id")
            or f"{header.get('task')}-{header.get('started_at') or header.get('train_step')}",
            "agent": _some(
                {
                    "name": agent,
                    "version": agent_version,
                    "model_name": model or header.get("model"),
                    "tool_definitions": tool_definitions(),
                }
            ),
            "steps": steps,
            "final_metrics": final,
            "extra": {"repogym": repogym or {}},
        }
    )


# -- ATIF in --------------------------------------------------------------------------------
class AtifError(ValueError):
    """A document that is not an ATIF trajectory (the message says what is wrong)."""


def is_atif(doc: Any) -> bool:
    """True if ``doc`` looks like an ATIF trajectory (a ``schema_version`` of ``ATIF-v1.x``)."""
    return isinstance(doc, dict) and str(doc.get("schema_version", "")).startswith("ATIF-v1.")


def _text(content: Any) -> str:
    """Text of a message or result content (a string, or ContentParts: text parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(p.get("text", f"[{p.get('type')}]")) for p in content if isinstance(p, dict)
    )


def _step_record(step: dict[str, Any], t: int, context: list[int], ours: bool) -> dict[str, Any]:
    """A step record of an agent step (``ours``: a repogym export, whose keys are kept as
    they were; a foreign step's tool is its first tool call's)."""
    results = (step.get("observation") or {}).get("results") or []
    first = results[0] if results else {}
    extra = step.get("extra") or {}
    metrics = step.get("metrics") or {}
    calls = step.get("tool_calls") or []
    rec: dict[str, Any] = {
        "type": "step",
        "t": t,
        "action": _text(step.get("message")),
        "observation": "\n".join(_text(r.get("content")) for r in results),
        "reward": float((metrics.get("extra") or {}).get("reward") or 0.0),
        "terminated": bool(extra.get("terminated", False)),
        "truncated": bool(extra.get("truncated", False)),
        "tool": extra.get("tool") if ours or not calls else calls[0]["function_name"],
        **{k: (first.get("extra") or {}).get(k) for k in _RESULT_KEYS},
    }
    if not rec["action"] and calls:  # a tool call with no text: its JSON form
        rec["action"] = json.dumps(
            {"tool": calls[0]["function_name"], "args": calls[0]["arguments"]}
        )
    for key in ("env_action", "finish_reason", "progress", "labels"):
        if key in extra:
            rec[key] = extra[key]
    if "completion_token_ids" in metrics:
        prompt = list(metrics.get("prompt_token_ids") or [])
        rec.update(
            prompt_ids=prompt[len(context) :] if prompt[: len(context)] == context else prompt,
            completion_ids=list(metrics["completion_token_ids"]),
            logprobs=list(metrics.get("logprobs") or []),
            prompt_obs_mask=list((metrics.get("extra") or {}).get("prompt_obs_mask") or []),
        )
    return rec


def from_atif(doc: dict[str, Any]) -> dict[str, Any]:
    """A repogym trajectory (``{"header", "steps", "summary"}``) from an ATIF document.

    ``to_atif(from_atif(doc)) == doc`` for repogym's own exports. A foreign trajectory maps as
    well as it can: the system and user steps before the first agent step make the first
    observation; each agent step is one step record (its text, else its first tool call as
    a JSON call; its results joined as the observation); a later system or user step is
    appended to the observation before it, labelled with its source.

    Raises:
        AtifError: ``doc`` is not an ATIF trajectory.
    """
    if not is_atif(doc) or not isinstance(doc.get("steps"), list) or not doc["steps"]:
        raise AtifError(
            "not an ATIF trajectory (no schema_version 'ATIF-v1.x' or no steps). "
            "Fix: pass a trajectory.json in ATIF"
        )
    repo = (doc.get("extra") or {}).get("repogym") or {}
    agent = doc.get("agent") or {}
    steps = doc["steps"]
    lead = []
    while steps and steps[0].get("source") != "agent":
        lead.append(steps[0])
        steps = steps[1:]
    header = {
        "type": "header",
        "schema": SCHEMA,
        **{k: repo.get(k) for k in _HEADER_KEYS},
        "started_at": lead[0].get("timestamp") if lead else None,
        "observation": "\n\n".join(_text(s.get("message")) for s in lead),
        "session_id": doc.get("session_id"),
        "model": agent.get("model_name"),
        "atif_agent": agent.get("name"),
        "atif_agent_version": agent.get("version"),
    }
    if not header["task"]:
        header["task"] = doc.get("session_id") or "atif"
    records: list[dict[str, Any]] = []
    context: list[int] = []
    for step in steps:
        if step.get("source") != "agent":
            if records:
                records[-1]["observation"] += (
                    f"\n\n[{step.get('source')}] {_text(step.get('message'))}"
                )
            continue
        rec = _step_record(step, len(records) + 1, context, bool(repo))
        if step.get("timestamp"):
            rec["at"] = step["timestamp"]
        if "completion_ids" in rec:
            context = context + rec["prompt_ids"] + rec["completion_ids"]
        records.append(rec)
    final = doc.get("final_metrics") or {}
    summary = {"type": "summary", "steps": len(records), **(final.get("extra") or {})}
    for key in ("diff", "ended_at", "final_ids", "final_obs_mask"):
        if key in repo:
            summary[key] = repo[key]
    return {
        "header": {k: v for k, v in header.items() if v is not None},
        "steps": records,
        "summary": summary,
    }


def read_atif(path: str | Path) -> dict[str, Any]:
    """:func:`from_atif` of a ``trajectory.json`` file.

    Raises:
        OSError: unreadable. AtifError: not JSON, or not ATIF.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as e:
        raise AtifError(f"{path}: not JSON ({e})") from e
    return from_atif(doc)
