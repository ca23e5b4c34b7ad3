"""Release-history mining with and without ``--for-suite``: suite-ready tasks per hour.

Usage: python bench/history_mining.py [--package semver] [--last 8] [--workers 2]
       [--reruns 2] [--json FILE]

Runs :func:`repogym.quality.synth_history.mine_history` twice over the same release pairs:
as ``repogym history`` does by default (every candidate validated and written), then with
``for_suite=True`` (a candidate a suite would not serve, one with no verified reproduction
or reverting a feature, speed-up or deprecation by its changelog, is skipped before its
validation). Prints, for each, the wall time, the candidates validated, the tasks written,
the suite-ready ones (a reproduction and a bug fix: what ``suite add-history`` takes and
serves) and suite-ready tasks per hour, then the ratio; and checks that both runs give the
same suite-ready tasks (the same functions of the same releases, with the same
fail_to_pass lists): skipping may only save work. Exit status 1 when they differ.

The first run downloads the sdists and builds the environments into repogym's cache; both
then find them there, so run it once before timing if the cache is cold (``--warm``).
Timing noise on shared machines is large: compare the ratio within one run, never a time
across machines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from repogym.quality.synth_history import mine_history
from repogym.scenarios import history


def suite_ready(out: Path) -> dict[str, list[str]]:
    """``fixed-release file::function`` -> fail_to_pass, of the written tasks a suite
    serves (a reproduction, a bug fix by the statement's changelog entry)."""
    found = {}
    for toml in sorted(out.glob("*/task.toml")):
        data = tomllib.loads(toml.read_text())
        statement = (toml.parent / "STATEMENT.md").read_text()
        if not (toml.parent / "reproduction.py").is_file():
            continue
        if history.change_of(statement) != "bug":
            continue
        h = data["history"]
        found[f"{h['fixed']} {h['file']}::{h['function']}"] = data["verifier"]["fail_to_pass"]
    return found


def one(args, for_suite: bool, out: Path) -> dict:
    start = time.monotonic()
    res = mine_history(
        args.package,
        out,
        last=args.last,
        extra=args.requirement,
        workers=args.workers,
        reruns=args.reruns,
        for_suite=for_suite,
        say=lambda m: None,
        on_report=lambda r: None,
    )
    wall = time.monotonic() - start
    ready = suite_ready(out)
    return {
        "for_suite": for_suite,
        "wall_s": round(wall, 1),
        "candidates_validated": sum(len(p.candidates) for p in res.pairs),
        "written": len(res.written),
        "suite_ready": len(ready),
        "suite_ready_per_hour": round(len(ready) / wall * 3600, 1) if wall else 0.0,
        "tasks": ready,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="semver")
    ap.add_argument("--last", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reruns", type=int, default=2)
    ap.add_argument("--requirement", action="append", default=["pytest<9"])
    ap.add_argument("--warm", action="store_true", help="mine once first, untimed")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rg-bench-history-"))
    try:
        if args.warm:
            one(args, True, tmp / "warm")
        runs = [one(args, False, tmp / "all"), one(args, True, tmp / "for-suite")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'run':<12} {'wall s':>8} {'validated':>10} {'written':>8} {'ready':>6} {'ready/h':>8}")
    for r in runs:
        name = "for-suite" if r["for_suite"] else "every"
        print(
            f"{name:<12} {r['wall_s']:>8} {r['candidates_validated']:>10} {r['written']:>8} "
            f"{r['suite_ready']:>6} {r['suite_ready_per_hour']:>8}"
        )
    base, fast = runs
    ratio = fast["suite_ready_per_hour"] / base["suite_ready_per_hour"] if base["tasks"] else 0
    same = base["tasks"] == fast["tasks"]
    print(f"suite-ready tasks per hour: {ratio:.2f}x; same suite-ready tasks: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps({"package": args.package, "runs": runs}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
