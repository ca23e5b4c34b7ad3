"""Test discovery of ``repogym synth --pypi`` at two versions of repogym, side by side.

Usage: python bench/discovery.py --baseline REV [--current REV] [--package NAME==VERSION
       ...] [--rounds 1] [--json FILE]

Discovery is what synthesis does once per package before its first mutant
(:meth:`repogym.quality.sandboxed_tests.SandboxRunner.collect`): a traced run of every
test in the sandbox (which functions of the repository each test calls, which tests start
another process, what runs at import), a run with the test files masked and sealed as the
grader plants them, and a listing. The traced run is the costly one: a suite that large
packages run in minutes runs several times slower traced (nameparser's 12,938 tests, lark,
asttokens).

Fetches each package once (sdist, dependencies built and pinned: shared by both), then
runs discovery with the code of the baseline ``REV`` and with the current code (the
working tree unless ``--current REV``; each a git worktree), alternating, ``--rounds``
times, one at a time. Prints the wall time of each and the ratio, and checks that both
found the same tests, and that for a change in each function of the package (its last
statement's line) the current code's mutant run would rerun every test the baseline's
would (:meth:`~repogym.quality.sandboxed_tests.SandboxRunner.selected`): a faster way of
finding what each test reaches may only save time, never miss a test a mutant fails.
Functions for which the current code selects more tests are counted (a test rerun for
nothing costs time, not correctness). Exit status 1 when a selection is narrower.

Timing noise on shared machines is large: compare the ratio within one run, never a time
across machines.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from revisions import compared, parser  # bench/ is on sys.path when a script of it runs

#: Run in a child with ``PYTHONPATH`` set to one version's code: discovery of the unpacked
#: package ``argv[1]`` (its built dependencies' hash in ``argv[2]``), a JSON line out.
CHILD = """
import ast, json, sys, time
from pathlib import Path
from repogym.quality.sandboxed_tests import SandboxRunner
from repogym.quality.synth_pypi import prepare, plugins_of
from repogym.scenarios.patches import is_test_file

project, work = sys.argv[1], Path(sys.argv[2])
sdist, repo, spec, built, ini = prepare(project, work, say=lambda m: None)
plugins = plugins_of(repo, sdist.name, built)
with SandboxRunner(built.sandbox, ini, plugins=plugins) as runner:
    start = time.monotonic()
    listed = runner.collect(repo, 600.0)
    wall = time.monotonic() - start
    # what a mutant's run would select for a change in each function of the package
    selection = {}
    for path in sorted(repo.rglob("*.py")):
        rel = str(path.relative_to(repo))
        if is_test_file(rel) or path.name == "conftest.py" or "__pycache__" in rel:
            continue
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines(keepends=True)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.body[-1].lineno
                changed = lines[: n - 1] + [lines[n - 1].rstrip("\\n") + " \\n"] + lines[n:]
                chosen = runner.selected({rel: "".join(changed)})
                selection[f"{rel}:{n}"] = None if chosen is None else sorted(chosen)
print(json.dumps({"wall_s": round(wall, 1), "found": {"listed": listed, "selection": selection}}))
"""


def one(code: Path, package: str, work: Path) -> dict:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code), "HOME": str(Path.home())}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, package, str(work)],
        env=env,
        capture_output=True,
        text=True,
        cwd=work,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{package} at {code}: discovery failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    args = parser(__doc__.split("\n\n")[0]).parse_args()
    rows, same = [], True
    for package, runs in compared(args, "discovery", one):
        walls = {k: statistics.median(x["wall_s"] for x in v) for k, v in runs.items()}
        first = runs["baseline"][0]["found"]
        # every function: the tests current selects hold those baseline selects (None:
        # every test); wider is safe (a test rerun for nothing), narrower is a bug
        narrower, wider = [], []
        for x in runs["current"]:
            for k, a in first["selection"].items():
                b = x["found"]["selection"].get(k, ())
                if b is None or a == b:
                    continue
                (narrower if a is None or not set(a) <= set(b) else wider).append(k)
        agree = not narrower and all(
            x["found"]["listed"] == first["listed"] for x in runs["current"]
        )
        same &= agree
        for k in sorted(set(narrower))[:10]:
            print(f"{package} {k}: current selects fewer tests than baseline")
        rows.append(
            {
                "package": package,
                "tests": len(first["listed"]),
                "wall_s": walls,
                "speedup": round(walls["baseline"] / walls["current"], 2),
                "same_selection": agree,
                "wider": sorted(set(wider)),
                "runs": {k: [x["wall_s"] for x in v] for k, v in runs.items()},
            }
        )
    current = args.current or "the working tree"
    print(f"baseline {args.baseline} against {current}; discovery, one at a time")
    print(f"{'package':24s} {'tests':>6s} {'baseline s':>11s} {'current s':>10s} {'speedup':>8s}")
    for r in rows:
        print(
            f"{r['package']:24s} {r['tests']:6d} {r['wall_s']['baseline']:11.1f} "
            f"{r['wall_s']['current']:10.1f} {r['speedup']:7.2f}x"
            + ("" if r["same_selection"] else "  NARROWER SELECTION")
            + (f"  ({len(r['wider'])} functions select more tests)" if r["wider"] else "")
        )
    if args.json:
        args.json.write_text(
            json.dumps({"baseline": args.baseline, "current": current, "rows": rows}, indent=1)
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
