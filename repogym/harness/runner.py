"""Running an agent over a suite: plan, check the agent, run the episodes, record rows.

:func:`run` resumes: episodes already recorded in ``OUT/results.jsonl`` are skipped, except
those with an ``infra_error`` (always run again) and, with ``retry_errors``, those with an
``agent_error``. Before any episode starts, the agent is built once in this process and its
optional ``preflight()`` is called, so a wrong model name, a rejected argument or a bad key
stops the run at once (:class:`~repogym.harness.baselines.AgentConfigError`) instead of turning
every episode into an agent error. The episodes run on the backend the config names
(:mod:`repogym.harness.backends`); rows are appended as they finish
(:mod:`repogym.harness.results`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from repogym.harness.backends import iter_episodes
from repogym.harness.baselines import Agent, AgentConfigError, AgentError, make_agent
from repogym.harness.config import RunConfig
from repogym.harness.results import (
    RESULTS,
    ResultsLog,
    read_results,
    read_run_meta,
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
    """

    tasks: list[Task]
    todo: list[EpisodeRef]
    done: int
    kept_errors: int


def select_run_tasks(cfg: RunConfig) -> list[Task]:
    """The suite's tasks that ``cfg``'s split, tags and task ids select."""
    # a task withheld under the seal floor runs when asked for by name
    pool = suite_tasks(cfg.suite, withheld=cfg.task_ids is not None)
    return select_tasks(pool, split=cfg.split, tags=cfg.tags, task_ids=cfg.task_ids)


def _recorded(cfg: RunConfig) -> list[dict[str, Any]]:
    if not (cfg.out / RESULTS).is_file():
        return []
    rows = read_results(cfg.out)
    other = sorted({str(r.get("agent")) for r in rows} - {cfg.label})
    if other:
        was = read_run_meta(cfg.out)
        settings = {k: was.get(k) for k in ("agent", "agent_args") if k in was}
        raise ValueError(
            f"{cfg.out} holds results of {other}{f' ({settings})' if settings else ''}, and "
            f"this run is labelled {cfg.label!r} (agent {cfg.agent!r}, args {cfg.agent_args}). "
            "Fix: use another --out folder for these settings, or --name "
            f"{other[0]!r} to continue that run on purpose")
    return rows


def plan(cfg: RunConfig) -> Plan:
    """The tasks and the episodes still to run (resume), without running anything.

    Raises:
        ValueError: the task filters select nothing, or ``cfg.out`` holds another run.
        TaskError: a task folder is malformed.
        EnvironmentUnavailable: a task's environment is not built here (the fix: build it),
            checked before any episode rather than failing each one.
    """
    tasks = select_run_tasks(cfg)
    if not cfg.env_server:
        for t in tasks:
            t.sandbox_environment()
    keep = {}
    for r in _recorded(cfg):
        if r.get("infra_error") or (cfg.retry_errors and r.get("agent_error")):
            continue
        keep[(r["task"], r["sample"])] = r
    episodes = [(t.id, s) for t in tasks for s in range(cfg.samples)]
    todo = [e for e in episodes if e not in keep]
    kept_errors = sum(bool(keep[e].get("agent_error")) for e in episodes if e in keep)
    return Plan(tasks, todo, len(episodes) - len(todo), kept_errors)


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
            raise AgentConfigError(f"agent {cfg.label!r} failed its preflight check: "
                                   f"{type(e).__name__}: {e}") from e
    return agent


def run(cfg: RunConfig, on_row: Callable[[dict], None] | None = None,
        *, agent: Agent | None = None) -> list[dict[str, Any]]:
    """Run (or resume) ``cfg``: append rows to ``OUT/results.jsonl``; return all its rows.

    Args:
        cfg: The run.
        on_row: Called with each row as it is recorded.
        agent: An agent :func:`prepare_agent` already built and checked (else built here).

    Raises:
        AgentConfigError: the agent's settings are wrong (before any episode, or as soon as
            an episode shows it); episodes it interrupted are not recorded.
        ValueError, TaskError: bad task selection or another run in ``cfg.out``.
    """
    p = plan(cfg)
    if p.todo and agent is None:
        agent = prepare_agent(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    write_run_meta(cfg.out, cfg.meta())
    refs = [task_ref(t) for t in p.tasks]
    with ResultsLog(cfg.out) as log:
        rows = iter_episodes(cfg, refs, p.todo, agent)
        try:
            for row in rows:
                log.write(row)
                if on_row:
                    on_row(row)
        finally:
            close = getattr(rows, "close", None)
            if close:
                close()  # stop the workers now, not when the generator is collected
    return read_results(cfg.out)
