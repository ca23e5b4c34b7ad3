"""Median reset / step / grade latency: bwrap, docker, process backends vs a plain subprocess.

Usage: python bench/env_latency.py [--n 20] [--task retry-zero] [--backends bwrap,docker,process]
       [--shells persistent,fresh]

Each backend gets a column per shell mode: ``persistent`` (the default: one bash per
episode, so a step is a line written to it) and ``fresh`` (a new sandboxed process per
command). Reset and grading do not depend on the shell and are measured in one column.
The docker columns start the private dockerd and build its image if needed (see
repogym/sandbox/docker_setup.py, root only) and are left out, with the reason, otherwise.

Prints one table with medians (ms) and ratios to the plain-subprocess baseline (a new
``bash -c`` per command). Targets: reset <= 50 ms; step overhead over a plain subprocess
<= 5 ms for bwrap's persistent shell, <= 25 ms for its fresh processes; grading <= 1.5x
plain pytest on the same tests. Machines here are shared and noisy: read medians and ratios.
"""

from __future__ import annotations

import argparse
import json
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


def measure_backend(task: repogym.Task, backend: str, n: int, shell: str,
                    grade: bool) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(task.env_id, sandbox=backend, shell=shell, max_episode_steps=10**6)
    try:
        row = {"reset": median_ms(lambda: env.reset(seed=0), n)} if grade else {}
        row["reset + step `true`"] = median_ms(
            lambda: (env.reset(seed=0), env.step(bash("true"))), n)  # a shell starts here
        env.reset(seed=0)
        for name, cmd in STEP_COMMANDS.items():
            row[name] = median_ms(lambda c=cmd: env.step(bash(c)), n)
        if grade:
            gold = task.solution_patch.read_text()
            session = env.unwrapped.session
            row["grade (gold)"] = median_ms(
                lambda: session.grade(gold, mode="binary"), max(3, n // 4))
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

        row = {"reset": median_ms(reset, n),
               "reset + step `true`": median_ms(lambda: (reset(), step("true")), n)}
        for name, cmd in STEP_COMMANDS.items():
            row[name] = median_ms(lambda c=cmd: step(c), n)
        subprocess.run(["git", "apply", str(task.solution_patch)], cwd=work, check=True)
        shutil.copytree(task.tests_dir, work / task.verifier.tests_dest, dirs_exist_ok=True)
        cmd = task.verifier.command.replace("python ", f"{sys.executable} ", 1) + " -rA"
        row["grade (gold)"] = median_ms(
            lambda: subprocess.run(cmd, shell=True, cwd=work, capture_output=True, check=False),
            max(3, n // 4))
        return row
    finally:
        shutil.rmtree(root, ignore_errors=True)


def docker_ready() -> bool | None:
    """Start an engine and build the image if needed: True if started here, None if none."""
    try:
        from repogym.sandbox import docker_setup

        return docker_setup.ensure().started
    except Exception as e:  # noqa: BLE001 - report why the column is missing, then go on
        print(f"docker column left out: {e}", file=sys.stderr)
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20, help="repetitions per measurement")
    p.add_argument("--task", default="retry-zero")
    p.add_argument("--backends", default="bwrap,docker,process")
    p.add_argument("--shells", default="persistent,fresh")
    args = p.parse_args()
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
        cells = "".join(f"{col[row]:>12.1f} ({col[row] / base[row]:5.2f}x)" if row in col
                        else f"{'-':>24}" for col in columns.values())
        print(f"{row:26}{cells}")
    for name, col in columns.items():
        if name != "plain subprocess":
            over = col["step `true`"] - base["step `true`"]
            grade = (f"; grade / plain pytest = {col['grade (gold)'] / base['grade (gold)']:.2f}x"
                     if "grade (gold)" in col else "")
            print(f"{name}: step overhead over plain = {over:.1f} ms{grade}")


if __name__ == "__main__":
    main()
