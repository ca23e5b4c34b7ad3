"""Scores of result rows: resolve rate, mean reward, pass@k, costs.

Infra-error episodes are excluded from every rate (the sandbox or grader failed, not the
agent; trainers mask them the same way) and counted apart; agent errors count as failures.
pass@k is the unbiased estimator of Chen et al. (2021) averaged over tasks, and one ``k`` is
used for every agent being compared (:func:`common_ks`), so the numbers line up.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): ``1 - C(n-c, k) / C(n, k)``.

    Args:
        n: Samples of the task.
        c: Correct samples.
        k: Budget (``k <= n``).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def default_ks(max_n: int) -> list[int]:
    """1, 2, 4, ... up to ``max_n``, plus ``max_n`` itself."""
    ks = [k for k in (2**i for i in range(20)) if k <= max_n]
    return ks + ([max_n] if max_n not in ks else [])


def scored(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that count in the rates (no infra error)."""
    return [r for r in rows if not r.get("infra_error")]


def samples_per_task(rows: Iterable[dict[str, Any]]) -> dict[str, list[bool]]:
    """Task id -> resolved flag of each scored sample."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in scored(rows):
        per_task[r["task"]].append(bool(r.get("resolved")))
    return dict(per_task)


def common_k(groups: Iterable[Iterable[dict[str, Any]]]) -> int:
    """The largest k every group supports: the fewest scored samples of any of its tasks.

    0 when some group has no scored episode.
    """
    ns = [min((len(v) for v in samples_per_task(g).values()), default=0) for g in groups]
    return min(ns, default=0)


def common_ks(groups: Iterable[Iterable[dict[str, Any]]]) -> list[int]:
    """The pass@k budgets shown for a set of runs: :func:`default_ks` of :func:`common_k`."""
    k = common_k(groups)
    return default_ks(k) if k else []


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(rows: Iterable[dict[str, Any]], ks: list[int] | None = None) -> dict[str, Any]:
    """Aggregate one run's rows.

    Args:
        rows: The run's results rows.
        ks: pass@k budgets; each averages the estimator over the tasks with at least k scored
            samples. Default: :func:`common_ks` of this run alone (every task counts).

    Returns:
        Counts (``episodes``, ``tasks``, ``scored``, ``resolved``, ``hack_flagged``,
        ``infra_errors``, ``agent_errors``), rates (``resolve_rate``, ``mean_reward``,
        ``pass_at_k`` as {k: value}), ``mean_steps`` and costs (``tokens``, ``mean_tokens``,
        ``wall_s`` total and ``mean_wall_s`` per episode).
    """
    rows = list(rows)
    ok = scored(rows)
    per_task = samples_per_task(rows)
    pass_k = {}
    for k in common_ks([rows]) if ks is None else ks:
        vals = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
        if vals:
            pass_k[k] = sum(vals) / len(vals)
    walls = [float(r.get("wall_s") or 0.0) for r in rows]
    tokens = [int(r.get("tokens") or 0) for r in rows]
    return {
        "episodes": len(rows),
        "tasks": len({r["task"] for r in rows}),
        "scored": len(ok),
        "resolved": sum(bool(r.get("resolved")) for r in ok),
        "resolve_rate": _mean([float(bool(r.get("resolved"))) for r in ok]),
        "mean_reward": _mean([float(r.get("reward") or 0.0) for r in ok]),
        "pass_at_k": pass_k,
        "mean_steps": _mean([float(r.get("steps") or 0) for r in ok]),
        "wall_s": sum(walls),
        "mean_wall_s": _mean(walls),
        "tokens": sum(tokens),
        "mean_tokens": _mean([float(t) for t in tokens]),
        "hack_flagged": sum(bool(r.get("hack_flags")) for r in rows),
        "infra_errors": sum(bool(r.get("infra_error")) for r in rows),
        "agent_errors": sum(bool(r.get("agent_error")) for r in rows),
    }


def jsonable(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Summaries with their pass@k keys as strings, as JSON wants them."""
    return {name: {**s, "pass_at_k": {str(k): v for k, v in s["pass_at_k"].items()}}
            for name, s in summaries.items()}


def summarize_groups(groups: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """:func:`summarize` per named group (a run, an agent), with one set of pass@k budgets."""
    ks = common_ks(groups.values())
    return {name: summarize(rows, ks) for name, rows in groups.items()}


def group_by_agent(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows per agent label, labels sorted."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r.get("agent"))].append(r)
    return {a: groups[a] for a in sorted(groups)}
