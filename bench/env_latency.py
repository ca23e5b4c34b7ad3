"""Median reset / step / grade latency: bwrap, docker, process backends vs a plain subprocess.

Usage: python bench/env_latency.py [--n 20] [--task retry-zero] [--backends bwrap,docker,process]
       [--shells persistent,fresh]
       python bench/env_latency.py --env-task DIR [--env-builds realpy|PKG,PKG]
       python bench/env_latency.py --fork [--n 20] [--backends bwrap,docker]

``--env-task DIR`` adds a table for a real-code task whose environment is bound (e.g. a
RealPy task fetched by ``repogym suite fetch``) next to the built-in ``--task`` in bwrap;
``--env-builds`` times building each package's environment of the RealPy manifest from
scratch (in a temporary cache; pip's own download cache stays warm, as on a second machine
of a cluster that shares it).

Each backend gets a column per shell mode: ``persistent`` (the default: one bash per
episode, so a step is a line written to it) and ``fresh`` (a new sandboxed process per
command). Reset and grading do not depend on the shell and are measured in one column.
The docker columns start the private dockerd and build its image if needed (see
repogym/sandbox/docker_setup.py, root only) and are left out, with the reason, otherwise.

``--fork`` compares branching an episode with starting one: ``env.unwrapped.fork()`` (and
closing the fork), the fork's first ``bash`` command (its shell starts and takes the
original's state), ``snapshot()``/``restore()``, side by side with ``reset()`` and a reset
episode's first command, on an episode that changed little (one ``cd``/``export``) and one
that wrote 200 files; with the median ratio fork / reset.

Prints one table with medians (ms) and ratios to the plain-subprocess baseline (a new
``bash -c`` per command). Targets: reset <= 50 ms; step overhead over a plain subprocess
<= 5 ms for bwrap's persistent shell, <= 25 ms for its fresh processes; grading <= 1.6x
plain pytest on the same tests. Machines here are shared and noisy: read medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

import repogym
from repogym.scenarios.registry import registered_tasks

STEP_COMMANDS = {"step `true`": "true", "step `python3 -c pass`": "python3 -c pass"}


def median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def bash(command: str) -> str:
    return json.dumps({"tool": "bash", "args": {"command": command}})


def measure_backend(
    task: repogym.Task, backend: str, n: int, shell: str, grade: bool
) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(task.env_id, sandbox=backend, shell=shell, max_episode_steps=10**6)
    try:
        row = {"reset": median_ms(lambda: env.reset(seed=0), n)} if grade else {}
        row["reset + step `true`"] = median_ms(
            lambda: (env.reset(seed=0), env.step(bash("true"))), n
        )  # a shell starts here
        env.reset(seed=0)
        for name, cmd in STEP_COMMANDS.items():
            row[name] = median_ms(lambda c=cmd: env.step(bash(c)), n)
        if grade:
            gold = task.solution_patch.read_text()
            session = env.unwrapped.session
            row["grade (gold)"] = median_ms(
                lambda: session.grade(gold, mode="binary"), max(3, n // 4)
            )
        return row
    finally:
        env.close()


def measure_plain(task: repogym.Task, n: int) -> dict[str, float]:
    """The baseline: copy the repo, run commands and pytest as plain host subprocesses."""
    root = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        work = root / "w"

        def reset() -> None:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(task.repo_dir, work)

        def step(command: str) -> None:
            host_cmd = command.replace("python3", sys.executable)  # not a pyenv shim
            subprocess.run(["bash", "-c", host_cmd], cwd=work, check=False)

        row = {
            "reset": median_ms(reset, n),
            "reset + step `true`": median_ms(lambda: (reset(), step("true")), n),
        }
        for name, cmd in STEP_COMMANDS.items():
            row[name] = median_ms(lambda c=cmd: step(c), n)
        subprocess.run(["git", "apply", str(task.solution_patch)], cwd=work, check=True)
        shutil.copytree(task.tests_dir, work / task.test_spec.tests_dest, dirs_exist_ok=True)
        cmd = task.test_spec.command.replace("python ", f"{sys.executable} ", 1) + " -rA"
        # Without the host environment's third-party pytest plugins (the sandbox has none),
        # so the baseline is not slowed by plugins the grading never loads.
        lean = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        row["grade (gold)"] = median_ms(
            lambda: subprocess.run(
                cmd, shell=True, cwd=work, capture_output=True, check=False, env=lean
            ),
            max(3, n // 4),
        )
        return row
    finally:
        shutil.rmtree(root, ignore_errors=True)


def docker_ready() -> bool | None:
    """Start an engine and build the image if needed: True if started here, None if none."""
    try:
        from repogym.sandbox import docker_setup

        return docker_setup.ensure().started
    except Exception as e:  # report why the column is missing, then go on
        print(f"docker column left out: {e}", file=sys.stderr)
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20, help="repetitions per measurement")
    p.add_argument("--task", default="retry-zero")
    p.add_argument("--backends", default="bwrap,docker,process")
    p.add_argument("--shells", default="persistent,fresh")
    p.add_argument(
        "--env-task",
        type=Path,
        metavar="DIR",
        help="also compare a real-code task (environment bound) with --task in bwrap",
    )
    p.add_argument(
        "--env-builds",
        metavar="realpy|PKG,PKG",
        help="also time building these RealPy packages' environments",
    )
    p.add_argument(
        "--fork",
        action="store_true",
        help="compare fork()/snapshot()/restore() with reset() instead",
    )
    args = p.parse_args()
    if args.fork:
        print_fork_table(
            registered_tasks()[args.task],
            args.n,
            [b for b in args.backends.split(",") if b != "process"],
        )
        return
    if args.env_task or args.env_builds:
        if args.env_task:
            print_env_tables(
                registered_tasks()[args.task], repogym.load_task(args.env_task), args.n
            )
        if args.env_builds:
            print_env_builds(args.env_builds.split(","))
        return
    task = registered_tasks()[args.task]
    shells = args.shells.split(",")
    columns = {"plain subprocess": measure_plain(task, args.n)}
    for backend in args.backends.split(","):
        started = docker_ready() if backend == "docker" else False
        if started is None:
            continue
        for i, shell in enumerate(shells):
            name = backend if shell == "persistent" else f"{backend} {shell}"
            columns[name] = measure_backend(task, backend, args.n, shell, grade=i == 0)
        if started:
            from repogym.sandbox import docker_setup

            docker_setup.stop_daemon()
    print_table(task, args.n, columns)


def print_table(task: repogym.Task, n: int, columns: dict[str, dict[str, float]]) -> None:
    base = columns["plain subprocess"]
    print(f"task {task.id}, n={n}, medians in ms (ratio to plain subprocess)")
    print(f"{'':26}" + "".join(f"{c:>24}" for c in columns))
    for row in base:
        cells = "".join(
            f"{col[row]:>12.1f} ({col[row] / base[row]:5.2f}x)" if row in col else f"{'-':>24}"
            for col in columns.values()
        )
        print(f"{row:26}{cells}")
    for name, col in columns.items():
        if name != "plain subprocess":
            over = col["step `true`"] - base["step `true`"]
            grade = (
                f"; grade / plain pytest = {col['grade (gold)'] / base['grade (gold)']:.2f}x"
                if "grade (gold)" in col
                else ""
            )
            print(f"{name}: step overhead over plain = {over:.1f} ms{grade}")


# -- forks ---------------------------------------------------------------------------------
FORK_STATES = {
    "small change": "mkdir -p sub && cd sub && export K=v && echo x > f.txt",
    "200 files written": "mkdir -p gen && for i in $(seq 200); do echo $i > gen/f$i.py; done; "
    "cd gen && export K=v",
}


def measure_fork(task: repogym.Task, backend: str, n: int, setup: str) -> dict[str, float]:
    """Reset vs fork (and snapshot/restore) of an episode in the state ``setup`` leaves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(task.env_id, sandbox=backend, max_episode_steps=10**6)
    try:
        env.reset(seed=0)
        env.step(bash(setup))
        env.step(bash("true"))
        base = env.unwrapped

        def fork_close() -> None:
            base.fork().close()

        def fork_step() -> None:
            f = base.fork()
            f.step(bash("true"))
            f.close()

        snap = base.snapshot()
        try:
            restore = median_ms(lambda: base.restore(snap), n)
            snapshot = median_ms(lambda: base.snapshot().close(), n)
        finally:
            snap.close()
        row = {
            "fork + close": median_ms(fork_close, n),
            "fork + step `true` + close": median_ms(fork_step, n),
            "snapshot + close": snapshot,
            "restore": restore,
        }
        other = gym.make(task.env_id, sandbox=backend, max_episode_steps=10**6)
        try:
            row["reset"] = median_ms(lambda: other.reset(seed=0), n)
            row["reset + step `true`"] = median_ms(
                lambda: (other.reset(seed=0), other.step(bash("true"))), n
            )
        finally:
            other.close()
        return row
    finally:
        env.close()


def print_fork_table(task: repogym.Task, n: int, backends: list[str]) -> None:
    print(f"task {task.id}, n={n}, medians in ms; fork / reset = median ratio")
    for backend in backends:
        started = docker_ready() if backend == "docker" else False
        if started is None:
            continue
        for state, setup in FORK_STATES.items():
            row = measure_fork(task, backend, n, setup)
            print(f"\n{backend}, episode after: {state}")
            for name, ms in row.items():
                print(f"  {name:30}{ms:>10.1f}")
            print(
                f"  fork + close / reset                = {row['fork + close'] / row['reset']:.2f}x"
            )
            print(
                f"  fork + step / reset + step          = "
                f"{row['fork + step `true` + close'] / row['reset + step `true`']:.2f}x"
            )
            print(f"  restore / reset                     = {row['restore'] / row['reset']:.2f}x")
        if started:
            from repogym.sandbox import docker_setup

            docker_setup.stop_daemon()


# -- real-code tasks (an [environment] bound) ---------------------------------------------
def measure_env_task(task: repogym.Task, n: int) -> dict[str, float]:
    """Reset, steps and gold grading of ``task`` in bwrap (its environment built first)."""
    from repogym.envs import RepoEnv
    from repogym.scenarios.dependencies import build

    if task.dependencies is not None:
        build(task.dependencies)
    env = RepoEnv(task, max_steps=10**6)
    try:
        row = {"reset": median_ms(lambda: env.reset(seed=0), n)}
        for name, cmd in {
            **STEP_COMMANDS,
            "step `import pytest`": "python3 -c 'import pytest'",
        }.items():
            row[name] = median_ms(lambda c=cmd: env.step(bash(c)), n)
        gold = task.solution_patch.read_text()
        row["grade (gold)"] = median_ms(
            lambda: env.session.grade(gold, mode="binary"), max(3, n // 4)
        )
        return row
    finally:
        env.close()


def print_env_tables(builtin: repogym.Task, real: repogym.Task, n: int) -> None:
    cols = {builtin.id: measure_env_task(builtin, n), real.id: measure_env_task(real, n)}
    print(
        f"\nbwrap, n={n}, medians in ms: built-in {builtin.id} vs real-code {real.id} "
        f"(environment bound: {real.dependencies.summary() if real.dependencies else 'none'})"
    )
    print(f"{'':26}" + "".join(f"{c:>24}" for c in cols) + f"{'ratio':>10}")
    base, other = cols[builtin.id], cols[real.id]
    for name in base:
        print(f"{name:26}{base[name]:>24.1f}{other[name]:>24.1f}{other[name] / base[name]:>9.2f}x")


def print_env_builds(packages: list[str]) -> None:
    """Build each RealPy package's environment from scratch, in a temporary cache."""
    import os

    from repogym.scenarios.dependencies import build
    from repogym.scenarios.suites import load_suite

    suite = load_suite("realpy")
    chosen = [p for p in suite.packages if packages == ["realpy"] or p.name in packages]
    old = os.environ.get("REPOGYM_CACHE")
    with tempfile.TemporaryDirectory(prefix="bench-envs-") as tmp:
        os.environ["REPOGYM_CACHE"] = tmp
        try:
            print("\nenvironment build from scratch (pip download cache warm)")
            print(f"{'package':20}{'seconds':>10}{'packages':>10}  requirements")
            for entry in chosen:
                t0 = time.perf_counter()
                env, _ = build(entry.environment)
                print(
                    f"{entry.name:20}{time.perf_counter() - t0:>10.1f}"
                    f"{len(env.distributions):>10}  {entry.environment.summary()}"
                )
        finally:
            if old is None:
                os.environ.pop("REPOGYM_CACHE", None)
            else:
                os.environ["REPOGYM_CACHE"] = old


if __name__ == "__main__":
    main()
