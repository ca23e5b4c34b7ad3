"""Scores of result rows: resolve rate, mean reward, pass@k, costs.

Infra-error and endpoint-error episodes are excluded from every rate (the sandbox, the
grader or the model's server failed, not the agent; trainers mask them the same way) and
counted apart; agent errors count as failures. pass@k is the unbiased estimator of Chen et
al. (2021) averaged over tasks, and one ``k`` is used for every agent being compared
(:func:`common_ks`), so the numbers line up.

Uncertainty: the resolve rate gets a 95 % Wilson score interval whose trials are the *tasks*
(:func:`wilson_interval` with ``n`` = scored tasks): with one sample per task that is the
usual binomial interval; with several, the samples of a task are not independent trials, so
counting episodes would overstate the precision. Two runs are compared on their common tasks
with an exact sign test (:func:`paired_comparison`), which is McNemar's exact test when each
task has one sample.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from repogym.harness.results import ResultRow, unscored


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


def scored(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """The rows that count in the rates (no infra or endpoint error)."""
    return [r for r in rows if not unscored(r)]


def samples_per_task(rows: Iterable[ResultRow]) -> dict[str, list[bool]]:
    """Task id -> resolved flag of each scored sample."""
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in scored(rows):
        per_task[r["task"]].append(bool(r.get("resolved")))
    return dict(per_task)


def common_k(groups: Iterable[Iterable[ResultRow]]) -> int:
    """The largest k every group supports: the fewest scored samples of any of its tasks.

    0 when some group has no scored episode.
    """
    ns = [min((len(v) for v in samples_per_task(g).values()), default=0) for g in groups]
    return min(ns, default=0)


def common_ks(groups: Iterable[Iterable[ResultRow]]) -> list[int]:
    """The pass@k budgets shown for a set of runs: :func:`default_ks` of :func:`common_k`."""
    k = common_k(groups)
    return default_ks(k) if k else []


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


#: The normal quantile of a two-sided 95 % interval.
Z95 = 1.959963984540054


def wilson_interval(p: float | None, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion ``p`` observed over ``n`` trials.

    Returns:
        ``(low, high)``, or None when ``p`` is None or ``n`` is 0.
    """
    if p is None or n <= 0:
        return None
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign test (binomial, p = 1/2) of ``wins`` against ``losses``; ties are
    left out by the caller. With one sample per task this is McNemar's exact test."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_comparison(rows_a: Iterable[ResultRow], rows_b: Iterable[ResultRow]) -> dict[str, Any]:
    """Compare two runs task by task on the tasks both scored.

    Each task's score in a run is the fraction of its scored samples that resolved it (0 or 1
    with one sample). A task counts for A when A's score is higher, for B when B's is; ties
    (both resolved, both failed, equal fractions) carry no information and are left out of
    the exact sign test (:func:`sign_test_p`).

    Returns:
        ``common_tasks``, ``a_better`` and ``b_better`` (task counts; with one sample: only A
        resolved, only B resolved), ``both``/``neither`` (ties at 1 and at 0), ``a_rate`` and
        ``b_rate`` (resolve rates on the common tasks), ``p_value`` and the task ids
        ``a_only``/``b_only``.
    """
    a, b = samples_per_task(rows_a), samples_per_task(rows_b)
    common = sorted(set(a) & set(b))
    score_a = {t: sum(a[t]) / len(a[t]) for t in common}
    score_b = {t: sum(b[t]) / len(b[t]) for t in common}
    a_only = [t for t in common if score_a[t] > score_b[t]]
    b_only = [t for t in common if score_b[t] > score_a[t]]
    return {
        "common_tasks": len(common),
        "a_better": len(a_only),
        "b_better": len(b_only),
        "both": sum(score_a[t] == score_b[t] == 1.0 for t in common),
        "neither": sum(score_a[t] == score_b[t] == 0.0 for t in common),
        "a_rate": _mean(list(score_a.values())),
        "b_rate": _mean(list(score_b.values())),
        "p_value": sign_test_p(len(a_only), len(b_only)),
        "a_only": a_only,
        "b_only": b_only,
    }


def summarize(rows: Iterable[ResultRow], ks: list[int] | None = None) -> dict[str, Any]:
    """Aggregate one run's rows.

    Args:
        rows: The run's results rows.
        ks: pass@k budgets; each averages the estimator over the tasks with at least k scored
            samples. Default: :func:`common_ks` of this run alone (every task counts).

    Returns:
        Counts (``episodes``, ``tasks``, ``scored``, ``scored_tasks``, ``resolved``,
        ``hack_flagged``, ``infra_errors``, ``agent_errors``, ``endpoint_errors``), rates
        (``resolve_rate`` with ``resolve_ci``, its 95 % Wilson interval over the scored tasks,
        ``mean_reward``, ``pass_at_k`` as {k: value}), ``mean_steps`` and costs (``tokens``,
        ``mean_tokens``, ``wall_s`` total and ``mean_wall_s`` per episode).
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
    rate = _mean([float(bool(r.get("resolved"))) for r in ok])
    ci = wilson_interval(rate, len(per_task))
    return {
        "episodes": len(rows),
        "tasks": len({r["task"] for r in rows}),
        "scored": len(ok),
        "scored_tasks": len(per_task),
        "resolved": sum(bool(r.get("resolved")) for r in ok),
        "resolve_rate": rate,
        "resolve_ci": list(ci) if ci else None,
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
        "endpoint_errors": sum(bool(r.get("endpoint_error")) for r in rows),
    }


def jsonable(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Summaries with their pass@k keys as strings, as JSON wants them."""
    return {
        name: {**s, "pass_at_k": {str(k): v for k, v in s["pass_at_k"].items()}}
        for name, s in summaries.items()
    }


def summarize_groups(groups: dict[str, list[ResultRow]]) -> dict[str, dict[str, Any]]:
    """:func:`summarize` per named group (a run, an agent), with one set of pass@k budgets."""
    ks = common_ks(groups.values())
    return {name: summarize(rows, ks) for name, rows in groups.items()}


def group_by_agent(rows: Iterable[ResultRow]) -> dict[str, list[ResultRow]]:
    """Rows per agent label, labels sorted."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r.get("agent"))].append(r)
    return {a: groups[a] for a in sorted(groups)}
