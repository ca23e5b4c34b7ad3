"""Difficulty tiers measured by blind search: what the ``apr`` baseline can and cannot fix.

A run of ``repogym run --agent apr`` gives each task one tier (:func:`tier_of`):

- ``trivial``: the search found an edit set (one or two mutations of the mutation
  library) that resolves the task;
- ``search-resistant``: the search ran on the task's reproduction and found nothing that
  resolves it (it exhausted its edit sets or its budget, or its repair made the
  reproduction pass but not the hidden tests);
- ``unmeasured``: the search could not start (the statement has no reproduction, the
  reproduction does not fail or runs no repository code, the helper failed) or the episode had an
  infra or agent error.

:func:`summarize` counts them by package (the task id without its last ``-`` part:
``toolz-3`` and ``toolz-h1a2b3c4d`` are ``toolz``'s) and by split; the share of trivial tasks
is taken over the measured ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TIERS = ("trivial", "search-resistant", "unmeasured")
#: ``stop_reason`` prefixes of an episode whose search never ran on the task.
_UNMEASURED = ("no_reproduction", "reproduction_passes", "reproduction_broken", "helper_failed")


def tier_of(row: dict[str, Any]) -> str:
    """The tier of one apr episode (a results row)."""
    if row.get("resolved"):
        return "trivial"
    if (
        row.get("infra_error")
        or row.get("agent_error")
        or str(row.get("stop_reason") or "").startswith(_UNMEASURED)
    ):
        return "unmeasured"
    return "search-resistant"


def package_of(task_id: str) -> str:
    """The package a suite or history task comes from: its id less the last ``-`` part."""
    return task_id.rsplit("-", 1)[0] if "-" in task_id else task_id


def tiers(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Task id -> tier; a task with several samples is trivial when any sample resolved it."""
    out: dict[str, str] = {}
    rank = {t: i for i, t in enumerate(TIERS)}
    for row in rows:
        task, t = str(row["task"]), tier_of(row)
        if task not in out or rank[t] < rank[out[task]]:
            out[task] = t
    return dict(sorted(out.items()))


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per package, then per split (``split:train``, ``split:test``) and ``all``: task
    counts by tier and ``trivial_share`` (trivial / measured; None when none was
    measured)."""
    by_task = tiers(rows)
    split = {str(r["task"]): r.get("split") for r in rows}
    groups: dict[str, list[str]] = {}
    for task in by_task:
        for key in (package_of(task), f"split:{split.get(task)}", "all"):
            groups.setdefault(key, []).append(task)
    out = {}
    for key in sorted(groups, key=lambda k: (k == "all", k.startswith("split:"), k)):
        counts = {t: sum(by_task[x] == t for x in groups[key]) for t in TIERS}
        measured = counts["trivial"] + counts["search-resistant"]
        out[key] = {
            "tasks": len(groups[key]),
            **counts,
            "trivial_share": counts["trivial"] / measured if measured else None,
        }
    return out
