"""Load of ``repogym serve`` on loopback: N concurrent WebSocket sessions, one episode each.

Starts a server (127.0.0.1 only, stops it with SIGTERM at the end), opens N RemoteEnv
sessions at once, plays ``bash`` steps then ``submit`` in each, and reports sessions held,
step latency p50/p99 over the wire and the same steps in-process (a local RepoEnv, run
alone), and what was left behind. Bounded: N sessions x S steps, a timeout per message.

    python bench/serve_load.py --sessions 64 --steps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import repogym  # noqa: F401  (registers the tasks)
from repogym.envs.remote import RemoteEnv
from tests.server.conftest import Server, leftovers

TASK = "retry-zero"
STEP = json.dumps({"tool": "bash", "args": {"command": "echo ok"}})


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def in_process(steps: int) -> list[float]:
    env = gym.make(f"repogym/{TASK}-v0", max_episode_steps=1000)
    times = []
    try:
        env.reset(seed=0)
        for _ in range(steps * 4):
            t = time.perf_counter()
            env.step(STEP)
            times.append(time.perf_counter() - t)
    finally:
        env.close()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    local = in_process(args.steps)
    srv = Server("--task", TASK, "--max-sessions", str(args.sessions))
    envs = [RemoteEnv(srv.url, step_timeout_s=600) for _ in range(args.sessions)]
    step_times: list[float] = []
    rewards: list[float] = []
    held = 0
    barrier = threading.Barrier(args.sessions)
    lock = threading.Lock()

    def play(env: RemoteEnv, seed: int) -> None:
        nonlocal held
        env.reset(seed=seed)
        barrier.wait(timeout=600)
        with lock:
            held = max(held, srv.health()["sessions"])
        for _ in range(args.steps):
            t = time.perf_counter()
            env.step(STEP)
            with lock:
                step_times.append(time.perf_counter() - t)
        rewards.append(env.step(json.dumps({"tool": "submit"}))[1])

    start = time.perf_counter()
    threads = [threading.Thread(target=play, args=(e, i)) for i, e in enumerate(envs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for env in envs:
        env.close()
    srv.wait_sessions(0, timeout=120)
    code = srv.stop()
    print(
        f"sessions held at once: {held}/{args.sessions}; episodes finished: {len(rewards)} "
        f"in {wall:.1f}s (noop rewards {set(rewards)})"
    )
    print(
        f"step latency over WebSocket, {args.sessions} concurrent: p50 "
        f"{pct(step_times, 0.5):.1f} ms  p99 {pct(step_times, 0.99):.1f} ms"
    )
    print(
        f"step latency in-process, alone:              p50 {pct(local, 0.5):.1f} ms  "
        f"p99 {pct(local, 0.99):.1f} ms  (mean {statistics.mean(local) * 1000:.1f} ms)"
    )
    print(f"server exit {code}; left behind: {leftovers(srv.pid) or 'nothing'}")


if __name__ == "__main__":
    main()
