"""RealPy: the committed manifest, and a sample of it fetched, validated and run for real.

The sample (two small packages, two tasks each, one package per split) is downloaded with
pip, hash-checked, its environments built (the shared cache keeps them) and validated in
the bwrap sandbox. The whole suite validates with `repogym suite fetch realpy` (docs/suites.md).
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repogym.sandbox.limits import default_signals
from repogym.sandbox.runtime import cache_dir
from repogym.scenarios.patches import split_diff
from repogym.scenarios.suites import load_suite, read_index

# A train package and a test package, both quick to validate (webcolors: 15 s for two tasks
# on 2 cores; inflection, graded in three passes, took 85 s).
SAMPLE = ("schema", "webcolors")
HELD_OUT = "test_synthetic"  # webcolors' split: its tasks are mutations, held out from training
HISTORY_PACKAGES = 5  # packages the release-history tasks come from (docs/suites.md)
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*-\d+$")


@pytest.fixture(scope="module")
def suite():
    return load_suite("realpy")


def test_manifest_reaches_300_tasks_from_10_packages(suite):
    packages = {p.distribution for p in suite.packages}  # a release's entry is its package's
    assert len(packages) >= 10 and suite.tasks >= 300, (packages, suite.tasks)


def test_manifest_holds_40_packages_and_300_release_history_tasks_none_above_15_percent(suite):
    """The scale RealPy 2 reached (docs/suites.md): packages, shipped bugs, and no package
    holding more than 15 % of the suite."""
    by_package = collections.Counter(p.distribution for p in suite.packages for _ in p.tasks)
    history = sum(t.origin == "history" for p in suite.packages for t in p.tasks)
    assert len(by_package) >= 40 and history >= 300, (len(by_package), history)
    top, count = by_package.most_common(1)[0]
    assert count <= 0.15 * suite.tasks, (top, count, suite.tasks)


def test_manifest_is_packages_of_many_kinds_split_by_package(suite):
    packages = suite.packages
    assert suite.env_id == "repogym/RealPy-v0"
    assert len(packages) >= 8 and suite.tasks >= 150, (len(packages), suite.tasks)
    assert len({p.kind for p in packages}) >= 5
    splits = {p.split for p in packages}
    assert (
        "train" in splits and splits - {"train"} and splits <= {"train", "test", "test_synthetic"}
    )
    # no package is both trained on and held out
    by_package: dict[str, set[str]] = {}
    for p in packages:
        by_package.setdefault(p.distribution, set()).add(p.split)
    assert not [d for d, s in by_package.items() if "train" in s and len(s) > 1]
    # the evaluation split is bugs that shipped: release history only
    assert {t.origin for p in packages if p.split == "test" for t in p.tasks} <= {"history"}
    assert {t.origin for p in packages if p.split == "test_synthetic" for t in p.tasks} <= {
        "mutation",
        "combined",
    }
    ids = [t.id for p in packages for t in p.tasks]
    assert len(ids) == len(set(ids)) and all(_ID.match(i) for i in ids)
    for p in packages:
        # the sdist of the entry's distribution at its version (``docstring_parser-0.11``)
        dist = (p.pypi or p.name).lower().replace("_", "-")
        assert re.fullmatch(r"[0-9a-f]{64}", p.sha256)
        assert p.sdist.lower().replace("_", "-").startswith(f"{dist}-{p.version}"), p.sdist
        assert all("==" in r for r in p.environment.requirements)  # pinned
        assert p.name not in {r.split("==")[0] for r in p.environment.requirements}
        assert p.hidden and all(t.id.startswith(p.name + "-") for t in p.tasks)


def test_each_task_is_bugs_in_the_packages_code_with_a_clean_statement(suite):
    for p in suite.packages:
        for t in p.tasks:
            files = {fp.new for fp in split_diff(t.gold)}
            # 2-3 bugs in different functions; one fix whose functions sit in 2-3 modules
            most = 3 if t.origin in ("combined", "history") else 1
            assert 1 <= len(files) <= most and not files & set(p.hidden), (t.id, files)
            assert t.fail_to_pass and not set(t.fail_to_pass) & set(t.pass_to_pass), t.id
            assert not re.search(r"0x[0-9a-fA-F]{6,}", t.statement), t.id
            for leak in ("/workspace", "/tmp/", "repogym-", "/run/repogym"):
                assert leak not in t.statement, (t.id, leak)
            fix = [
                ln[1:].strip()
                for ln in t.gold.splitlines()
                if ln[:1] in "+-" and ln[:3] not in ("+++", "---") and len(ln[1:].strip()) > 7
            ]
            assert not any(line in t.statement for line in fix), t.id
            assert "delete_failing_tests_0.patch" not in t.decoys  # made at fetch time


def test_no_two_statements_are_the_same(suite):
    """Different bugs get different reports (five semver operators once shared one)."""
    by: dict[str, list[str]] = {}
    for p in suite.packages:
        for t in p.tasks:
            by.setdefault(t.statement, []).append(t.id)
    assert [ids for ids in by.values() if len(ids) > 1] == []


def _rebuilt(suite):
    """Packages built since bug reports: every task has a reproduction script."""
    return [p for p in suite.packages if all(t.reproduction for t in p.tasks)]


def test_rebuilt_packages_are_graded_whole_and_described_by_bug_reports(suite):
    """A rebuilt package: pass_to_pass is every other passing test (no sample); each
    statement is a bug report of at most 2,000 characters holding its reproduction
    script and no test id; no task fails 20 or more tests; at most a quarter of a
    package's bugs are a `return None` or a removed call."""
    from repogym.scenarios.bug_reports import MAX_CHARS, reproduction_of
    from repogym.scenarios.suites import all_others

    rebuilt = _rebuilt(suite)
    assert [p.name for p in rebuilt] == [p.name for p in suite.packages]  # every package
    for p in rebuilt:
        assert p.tests
        cheap = 0
        for t in p.tasks:
            assert t.p2p_scope == "all" and t.pass_to_pass == all_others(p.tests, t.fail_to_pass)
            assert (
                len(t.statement) <= MAX_CHARS and reproduction_of(t.statement) == t.reproduction
            ), t.id
            names = {i.split("::")[-1].split("[")[0] for i in p.tests}
            assert not any(n in t.statement for n in names if len(n) > 6), t.id
            assert 1 <= len(t.fail_to_pass) < 20, t.id
            cheap += any(
                m.split("::")[-1].startswith(("return_value", "remove_call")) for m in t.mutants
            )
        assert cheap <= len(p.tasks) / 4, (p.name, cheap, len(p.tasks))


def test_release_history_tasks_are_real_fixes_reported_with_a_reproduction(suite):
    """Tasks mined from consecutive releases (`repogym history`, `suite add-history`): the
    functions of one fix of release N+1 put back to release N's code (in at most 3
    modules), graded by N+1's tests, the
    statement a bug report (N+1's changelog entry or the failures) holding a reproduction
    verified in the sandbox; at least 50 of them, from several packages."""
    from repogym.scenarios.bug_reports import MAX_CHARS, reproduction_of

    history = [(p, t) for p in suite.packages for t in p.tasks if t.origin == "history"]
    assert len(history) >= 50, len(history)
    assert len({p.distribution for p, _ in history}) >= HISTORY_PACKAGES
    assert len({t.statement for _, t in history}) == len(history)  # no report given twice
    for _, t in history:
        assert 1 <= len(split_diff(t.gold)) <= 3 and not t.mutants, t.id
        assert t.reproduction and reproduction_of(t.statement) == t.reproduction, t.id
        assert len(t.statement) <= MAX_CHARS and 1 <= len(t.fail_to_pass) < 20, t.id


def test_combined_tasks_hold_two_or_three_bugs_each_left_by_a_partial_fix(suite):
    from repogym.scenarios.bug_reports import MAX_CHARS

    combined = [t for p in suite.packages for t in p.tasks if t.origin == "combined"]
    assert combined
    for t in combined:
        assert 2 <= len(t.mutants) <= 3, t.id
        functions = {m.split("::")[1] for m in t.mutants}
        assert len(functions) == len(t.mutants), t.id  # different functions
        assert sum(n.startswith("partial_fix_") for n in t.decoys) == len(t.mutants), t.id
        assert 1 <= len(t.fail_to_pass) < 20 and len(t.statement) <= MAX_CHARS, t.id


def _cache(tmp_path: Path) -> dict[str, str]:
    """An environment whose cache is fresh for suites, shared for sdists, environments and
    the sandbox's root file system and interpreter copy (built once by `make setup`)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for shared in ("envs", "sdists", "rootfs", "python"):
        (cache_dir() / shared).mkdir(parents=True, exist_ok=True)
        (cache / shared).symlink_to(cache_dir() / shared)
    return {**os.environ, "REPOGYM_CACHE": str(cache), "COLUMNS": "200"}


def _cli(args: list[str], env: dict[str, str], timeout: float = 900):
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


FETCH = [
    "suite",
    "fetch",
    "realpy",
    "--packages",
    ",".join(SAMPLE),
    "--per-package",
    "2",
    "--workers",
    "2",
    "--reruns",
    "1",
]


def test_sample_fetch_resumes_validates_registers_and_runs(tmp_path, suite):
    env = _cache(tmp_path)
    root = Path(env["REPOGYM_CACHE"]) / "suites" / "realpy"
    # Interrupted as soon as one task is validated: the next fetch resumes from there.
    proc = subprocess.Popen(
        [sys.executable, "-m", "repogym.cli", *FETCH],
        env=env,
        preexec_fn=default_signals,  # signals only
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 900
    while not read_index(root) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    done_before = len(read_index(root))
    assert done_before >= 1
    res = _cli(FETCH, env)
    assert res.returncode == 0, res.stdout + res.stderr
    m = re.search(r"(\d+)/(\d+) tasks validated \((\d+) now, (\d+) before, 0 failed\)", res.stdout)
    assert m and m.group(1) == m.group(2) == "4", res.stdout
    assert int(m.group(4)) >= done_before
    if int(m.group(3)):  # the tasks validated now were checked against the forger
        assert re.search(
            r"adversarial check \(the forger, every reward mode\): beat noop on \d+ of "
            rf"{m.group(3)} tasks checked now",
            res.stdout,
        ), res.stdout
    again = _cli(FETCH, env)  # idempotent: nothing left to do
    assert "4/4 tasks validated (0 now, 4 before, 0 failed)" in again.stdout, again.stdout
    index = read_index(root)
    assert {i["package"] for i in index.values()} == set(SAMPLE)
    test_ids = sorted(t for t, i in index.items() if i["split"] == HELD_OUT)
    assert test_ids and all(t.startswith("webcolors-") for t in test_ids)

    # The fetched tasks are registered with Gymnasium, and the suite id draws from them.
    probe = (
        "import gymnasium as gym, repogym\n"
        f"assert 'repogym/{test_ids[0]}-v0' in gym.registry\n"
        f"env = gym.make('repogym/RealPy-v0', split='{HELD_OUT}')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(info['task'], info['split'])\nenv.close()\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert res.returncode == 0 and res.stdout.split()[1:] == [HELD_OUT], res.stdout + res.stderr

    res = _cli(
        [
            "validate",
            "--suite",
            "realpy",
            "--split",
            HELD_OUT,
            "--reruns",
            "1",
            "--workers",
            "2",
            "-q",
        ],
        env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for agent, resolved in (("oracle", len(test_ids)), ("noop", 0)):
        out = tmp_path / agent
        res = _cli(
            [
                "run",
                "--agent",
                agent,
                "--suite",
                "realpy",
                "--split",
                HELD_OUT,
                "--workers",
                "2",
                "--out",
                str(out),
            ],
            env,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert sorted(r["task"] for r in rows) == test_ids
        assert sum(bool(r["resolved"]) for r in rows) == resolved, rows
        assert not any(r["infra_error"] for r in rows)

    # Every test task: no compiled file or packaging file list in its workspace, its fix
    # readable nowhere in its sandbox, its reproduction failing without the fix and passing
    # with it, and its gold patch plus another covered function's bug scoring below 1.
    res = _cli(["suite", "audit", "realpy", "--split", HELD_OUT], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"audited {len(test_ids)} tasks" in res.stdout and ": 0 problems" in res.stdout, (
        res.stdout
    )
    m = re.search(r"sabotage: (\d+) of (\d+) tasks graded .* highest reward ([\d.]+)", res.stdout)
    # pass_to_pass is every other passing test, so each task's gold patch can be given
    # another task's bug, and none of those earns full reward
    assert m and m.group(1) == m.group(2) == str(len(test_ids)), res.stdout
    assert float(m.group(3)) < 1.0, res.stdout


def test_leaderboard_breaks_results_down_by_suite_and_package(tmp_path):
    from repogym.harness.leaderboard import build
    from repogym.harness.results import ROW_KEYS

    def run(name: str, suite: str, rows: list[tuple[str, list[str], bool]]) -> None:
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"suite": suite, "label": name}))
        lines = [
            json.dumps(
                {
                    **dict.fromkeys(ROW_KEYS),
                    "agent": name,
                    "task": task,
                    "split": "test",
                    "tags": tags,
                    "sample": 0,
                    "reward": float(ok),
                    "resolved": ok,
                    "steps": 3,
                    "hack_flags": [],
                }
            )
            for task, tags, ok in rows
        ]
        (d / "results.jsonl").write_text("\n".join(lines) + "\n")

    run(
        "agent-a",
        "realpy",
        [
            ("toolz-1", ["realpy", "toolz"], True),
            ("toolz-2", ["realpy", "toolz"], False),
            ("parse-1", ["realpy", "parse"], True),
        ],
    )
    run("agent-b", "builtin", [("retry-zero", ["bugfix"], True)])
    build([tmp_path / "runs"], tmp_path / "board")
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    suites = md.split("## Resolve rate by suite")[1].split("##")[0]
    assert "| agent | builtin | realpy |" in suites, suites
    assert "| agent-a | - | 66.7% |" in suites and "| agent-b | 100.0% | - |" in suites
    packages = md.split("## Resolve rate by package")[1].split("##")[0]
    assert "| toolz | 2 | - | 50.0% |" in packages, packages
    assert "| parse | 1 | - | 100.0% |" in packages, packages
    page = (tmp_path / "board" / "index.html").read_text()
    assert "Resolve rate by package" in page and "Resolve rate by suite" in page
