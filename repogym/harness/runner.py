"""Running an agent over a suite: plan, check the agent, run the episodes, record rows.

:func:`run` resumes: episodes already recorded in ``OUT/results.jsonl`` are skipped, except
those with an ``infra_error`` or an ``endpoint_error`` (always run again) and, with
``retry_errors``, those with an ``agent_error``. A folder holds one run: a resume must have
the folder's result settings (:func:`~repogym.harness.config.result_settings`: the agent
and its options less the URL and other transport options, the scoring settings); without
``--name`` it continues under the folder's label, so runs labelled by older versions (which
hashed the URL into the label) resume too.

An *outage* is told from failures: when ``max_endpoint_errors`` episodes in a row end with
an ``endpoint_error`` (the model's server refused connections or answered 5xx even after the
agent's retries), the run stops with :class:`EndpointOutage`; what was recorded is kept,
and those episodes are not scored and are run again by a resume.

Before any episode starts, the agent is built once in this process and its optional
``preflight()`` is called, so a wrong model name, a rejected argument or a bad key
stops the run at once (:class:`~repogym.harness.baselines.AgentConfigError`) instead of turning
every episode into an agent error. The episodes run on the executor the config names
(:mod:`repogym.harness.executors`); rows are appended as they finish
(:mod:`repogym.harness.results`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from repogym.harness.baselines import Agent, AgentConfigError, AgentError, make_agent
from repogym.harness.config import RunConfig, recorded_settings
from repogym.harness.executors import iter_episodes
from repogym.harness.provenance import provenance
from repogym.harness.results import (
    RESULTS,
    ResultsLog,
    read_results,
    read_run_meta,
    unscored,
    write_run_meta,
)
from repogym.harness.worker import EpisodeRef, call_with_timeout, task_ref
from repogym.scenarios.registry import suite_tasks
from repogym.scenarios.task import Task, select_tasks


@dataclasses.dataclass
class Plan:
    """What a run (or its resume) will do.

    Attributes:
        tasks: The selected tasks, sorted by id.
        todo: Episodes to run now.
        done: Episodes already recorded and kept.
        kept_errors: Of ``done``, episodes recorded with an agent error (run again only with
            ``retry_errors``).
        notes: What the reader should know (e.g. the run continues under the folder's label).
    """

    tasks: list[Task]
    todo: list[EpisodeRef]
    done: int
    kept_errors: int
    notes: list[str] = dataclasses.field(default_factory=list)


class EndpointOutage(RuntimeError):
    """The model's endpoint failed ``max_endpoint_errors`` episodes in a row: the run stopped.

    Attributes:
        failures: The consecutive endpoint errors that stopped it.
        last_error: The last one's message.
    """

    def __init__(self, failures: int, last_error: str) -> None:
        super().__init__(
            f"the model endpoint failed {failures} episodes in a row (last: {last_error})"
        )
        self.failures, self.last_error = failures, last_error


def select_run_tasks(cfg: RunConfig) -> list[Task]:
    """The suite's tasks that ``cfg``'s split, tags and task ids select."""
    # a task withheld under the seal floor runs when asked for by name
    pool = suite_tasks(cfg.suite, withheld=cfg.task_ids is not None)
    return select_tasks(pool, split=cfg.split, tags=cfg.tags, task_ids=cfg.task_ids)


def _diff(was: dict[str, Any], now: dict[str, Any]) -> str:
    keys = sorted(set(was) | set(now))
    return ", ".join(
        f"{k}: {was.get(k)!r} -> {now.get(k)!r}" for k in keys if was.get(k) != now.get(k)
    )


def _recorded(cfg: RunConfig, notes: list[str]) -> list[dict[str, Any]]:
    """The rows already in ``cfg.out``, after checking they are this run's.

    Without ``--name``, a folder whose one run has the same result settings under another
    label (an older label scheme, or a URL spelled differently) is continued under that label:
    ``cfg.label`` is set to it and a note says so.
    """
    if not (cfg.out / RESULTS).is_file():
        return []
    rows = read_results(cfg.out)
    was = read_run_meta(cfg.out)
    labels = sorted({str(r.get("agent")) for r in rows})
    same = not was or recorded_settings(was) == cfg.result_settings()
    if labels and labels != [cfg.label] and len(labels) == 1 and same and was and not cfg.named:
        notes.append(
            f"{cfg.out} holds the run {labels[0]!r} with these settings: continuing "
            f"it under that label (this command's default label is {cfg.label!r})"
        )
        cfg.label = labels[0]
    other = [label for label in labels if label != cfg.label]
    if other:
        settings = {k: was.get(k) for k in ("agent", "agent_args") if k in was}
        raise ValueError(
            f"{cfg.out} holds results of {other}{f' ({settings})' if settings else ''}, and "
            f"this run is labelled {cfg.label!r} (agent {cfg.agent!r}, args "
            f"{cfg.meta()['agent_args']}). Fix: use another --out folder for these settings, "
            f"or --name {other[0]!r} to continue that run on purpose"
        )
    if not same:
        change = _diff(recorded_settings(was), cfg.result_settings())
        if not cfg.named:
            raise ValueError(
                f"{cfg.out} holds the run {cfg.label!r} with other settings ({change}). Fix: "
                "use another --out folder for these settings, or --name "
                f"{cfg.label!r} to continue that run with them on purpose"
            )
        notes.append(f"continuing {cfg.label!r} with changed settings, as --name asks: {change}")
    return rows


def plan(cfg: RunConfig) -> Plan:
    """The tasks and the episodes still to run (resume), without running anything.

    Raises:
        ValueError: the task filters select nothing, or ``cfg.out`` holds another run (or
            this run with other settings, unless ``--name`` continues it on purpose).
        TaskError: a task folder is malformed.
        DependenciesUnavailable: a task's dependencies are not built here (the fix: build it),
            checked before any episode rather than failing each one.
    """
    tasks = select_run_tasks(cfg)
    if not cfg.env_server:
        for t in tasks:
            t.sandbox_dependencies()
    keep, notes = {}, []
    for r in _recorded(cfg, notes):
        if unscored(r) or (cfg.retry_errors and r.get("agent_error")):
            continue
        keep[(r["task"], r["sample"])] = r
    episodes = [(t.id, s) for t in tasks for s in range(cfg.samples)]
    todo = [e for e in episodes if e not in keep]
    kept_errors = sum(bool(keep[e].get("agent_error")) for e in episodes if e in keep)
    return Plan(tasks, todo, len(episodes) - len(todo), kept_errors, notes)


def prepare_agent(cfg: RunConfig) -> Agent:
    """Build the agent here and run its ``preflight()`` if it has one (fail fast).

    Raises:
        AgentConfigError: the agent cannot be built or its settings do not work; the message
            names the cause and the fix.
    """
    try:
        agent = make_agent(cfg.agent, **cfg.agent_args)
    except AgentError as e:
        raise AgentConfigError(str(e)) from e
    preflight = getattr(agent, "preflight", None)
    if callable(preflight):
        try:
            call_with_timeout(preflight, timeout_s=cfg.act_timeout_s)
        except AgentConfigError:
            raise
        except Exception as e:  # any failure here means the run cannot work
            raise AgentConfigError(
                f"agent {cfg.label!r} failed its preflight check: {type(e).__name__}: {e}"
            ) from e
    return agent


def run_meta(cfg: RunConfig, tasks: list[Task]) -> dict[str, Any]:
    """What ``run.json`` records: the settings (:meth:`RunConfig.meta`) and the run's
    :func:`~repogym.harness.provenance.provenance`, its first start kept across resumes."""
    meta = cfg.meta()
    started = (read_run_meta(cfg.out).get("provenance") or {}).get("started_at")
    task_set = {
        k: meta[k]
        for k in (
            "suite",
            "split",
            "tags",
            "task_ids",
            "samples",
            "seed",
            "reward_mode",
            "max_steps",
        )
    }
    task_set["count"] = len(tasks)
    return {**meta, "provenance": provenance(cfg.agent, cfg.agent_args, task_set, started)}


def run(
    cfg: RunConfig, on_row: Callable[[dict], None] | None = None, *, agent: Agent | None = None
) -> list[dict[str, Any]]:
    """Run (or resume) ``cfg``: append rows to ``OUT/results.jsonl``; return all its rows.

    Args:
        cfg: The run.
        on_row: Called with each row as it is recorded.
        agent: An agent :func:`prepare_agent` already built and checked (else built here).

    Raises:
        AgentConfigError: the agent's settings are wrong (before any episode, or as soon as
            an episode shows it); episodes it interrupted are not recorded.
        EndpointOutage: ``cfg.max_endpoint_errors`` episodes in a row hit endpoint errors;
            they are recorded (unscored), episodes in flight are not.
        ValueError, TaskError: bad task selection or another run in ``cfg.out``.
    """
    p = plan(cfg)
    if p.todo and agent is None:
        agent = prepare_agent(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_run_meta(cfg.out, run_meta(cfg, p.tasks))
    refs = [task_ref(t) for t in p.tasks]
    in_a_row = 0
    with ResultsLog(cfg.out) as log:
        rows = iter_episodes(cfg, refs, p.todo, agent)
        try:
            for row in rows:
                log.write(row)
                if on_row:
                    on_row(row)
                in_a_row = in_a_row + 1 if row.get("endpoint_error") else 0
                if cfg.max_endpoint_errors and in_a_row >= cfg.max_endpoint_errors:
                    raise EndpointOutage(in_a_row, str(row["endpoint_error"]))
        finally:
            close = getattr(rows, "close", None)
            if close:
                close()  # stop the workers now, not when the generator is collected
    return read_results(cfg.out)
