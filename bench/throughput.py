"""Episodes per second of the oracle over the built-in suite: process pool vs Ray.

Runs every built-in task once per configuration (1, 2 and 4 workers; the process pool, where 1
worker runs in-process, and Ray actors on a local Ray instance started once, outside the timed
region) and prints a table with the ratios. The oracle's episode is reset + write + git apply +
submit (grading), so this measures the harness and the sandbox, not a model.

    python bench/throughput.py [--workers 1 2 4] [--tasks N] [--json FILE]

Timing noise on shared machines is large (3-8x): compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from repogym.harness.config import RunConfig
from repogym.harness.runner import run
from repogym.scenarios.registry import builtin_tasks


def measure(task_ids: list[str], workers: int, ray: str | None, root: Path) -> dict:
    """Run the oracle once over ``task_ids``; return episodes/s and resolve count."""
    out = root / f"{'ray' if ray else 'pool'}-{workers}"
    cfg = RunConfig(agent="oracle", out=out, task_ids=task_ids, workers=workers, ray=ray)
    start = time.perf_counter()
    rows = run(cfg)
    wall = time.perf_counter() - start
    return {
        "backend": "ray" if ray else "pool",
        "workers": workers,
        "episodes": len(rows),
        "wall_s": wall,
        "eps_per_s": len(rows) / wall,
        "resolved": sum(bool(r["resolved"]) for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tasks", type=int, help="only the first N built-in tasks")
    parser.add_argument("--no-ray", action="store_true", help="process pool only")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()

    task_ids = [t.id for t in builtin_tasks()][: args.tasks]
    results = []
    with tempfile.TemporaryDirectory(prefix="repogym-bench-") as tmp:
        root = Path(tmp)
        for w in args.workers:
            results.append(measure(task_ids, w, None, root))
            print(f"pool  workers={w}: {results[-1]['eps_per_s']:.2f} episodes/s", flush=True)
        if not args.no_ray:
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
            print(f"ray.init: {time.perf_counter() - t0:.1f}s (not timed below)", flush=True)
            try:
                for w in args.workers:
                    results.append(measure(task_ids, w, "local", root))
                    print(
                        f"ray   workers={w}: {results[-1]['eps_per_s']:.2f} episodes/s", flush=True
                    )
            finally:
                ray.shutdown()
    print_table(results, len(task_ids))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def print_table(results: list[dict], n_tasks: int) -> None:
    """Workers x backend, episodes/s with speedups over 1 worker and the Ray/pool ratio."""
    by = {(r["backend"], r["workers"]): r for r in results}
    base = {b: by.get((b, min(w for bb, w in by if bb == b))) for b in ("pool", "ray")}
    print(f"\noracle over {n_tasks} built-in tasks (episodes/s; speedup vs fewest workers)")
    print(
        f"{'workers':>7} | {'pool eps/s':>10} {'speedup':>7} | {'ray eps/s':>9} {'speedup':>7}"
        f" | {'ray/pool':>8} | resolved (pool, ray)"
    )
    for w in sorted({w for _, w in by}):
        p, r = by.get(("pool", w)), by.get(("ray", w))
        cells = []
        for x, b in ((p, "pool"), (r, "ray")):
            cells.append(
                f"{x['eps_per_s']:>10.2f} {x['eps_per_s'] / base[b]['eps_per_s']:>6.2f}x"
                if x
                else f"{'-':>10} {'-':>7}"
            )
        ratio = f"{r['eps_per_s'] / p['eps_per_s']:>7.2f}x" if p and r else f"{'-':>8}"
        res = f"{p['resolved'] if p else '-'}, {r['resolved'] if r else '-'}"
        print(f"{w:>7} | {cells[0]} | {cells[1][1:]} | {ratio} | {res}")


if __name__ == "__main__":
    main()
