"""Running an agent over a suite of tasks: episodes in parallel, results, pass@k.

One *episode* is ``(task id, sample index)``. An :class:`EpisodeWorker` owns one environment
(a :class:`~repogym.envs.SuiteEnv` wrapped in a TrajectoryLogger) and one agent and runs
episodes one after another. Workers run

- in the calling process (``workers=1``),
- in a process pool (``workers>1``; ``spawn`` processes), or
- as Ray actors (``ray="local"`` or a cluster address), each owning its env.

Only the driver writes ``OUT/results.jsonl`` (one row per episode, appended as episodes
finish, so a run can be resumed: episodes already recorded are skipped; rows with an
``infra_error`` are retried). Trajectories go to ``OUT/trajectories/``.

Failures are data: an agent that raises, or whose ``act`` exceeds ``act_timeout_s``, is
recorded as ``agent_error`` for that episode (reward 0) and the run goes on; a sandbox or
grader failure is ``infra_error`` (excluded from the rates, as trainers mask it). Ctrl-C
closes every env (finally blocks; worker processes get SIGTERM, which runs them too).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import math
import os
import signal
import threading
import time
import warnings
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from repogym.scenarios.task import Task, TaskError, find_task_dirs, load_task, load_tasks

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories"
ROW_KEYS = ("agent", "task", "split", "sample", "seed", "reward", "resolved", "steps", "wall_s",
            "tokens", "usage", "hack_flags", "infra_error", "agent_error", "truncated",
            "trajectory")


# -- configuration and task selection ---------------------------------------------------------
@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; picklable so workers (processes, Ray actors) can rebuild it.

    Attributes:
        agent: Built-in agent name or ``module:Class``.
        out: Output folder (results.jsonl, trajectories/, run.json).
        agent_args: Keyword arguments for the agent.
        label: Name of the agent in results and tables (default: ``agent``).
        suite: ``builtin`` or a folder of task folders.
        split: Keep only tasks of this split.
        task_ids: Keep only these task ids.
        samples: Episodes per task (for pass@k).
        workers: Episodes in parallel.
        ray: None (process pool), ``local`` (start Ray here) or a Ray cluster address.
        seed: Base seed; each episode's seed derives from it, the task id and the sample.
        sandbox: Sandbox backend.
        reward_mode: ``binary``, ``partial`` or ``f2p``.
        max_steps: Override every task's step budget.
        act_timeout_s: Per-``act`` limit; past it the episode is an agent error.
        env_server: URL of a ``repogym serve`` holding the sandboxes (None: local envs).
    """

    agent: str
    out: Path
    agent_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    label: str | None = None
    suite: str = "builtin"
    split: str | None = None
    task_ids: list[str] | None = None
    samples: int = 1
    workers: int = 1
    ray: str | None = None
    seed: int = 0
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    max_steps: int | None = None
    act_timeout_s: float = 300.0
    env_server: str | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.label = self.label or self.agent
        if self.samples < 1 or self.workers < 1:
            raise ValueError(f"samples={self.samples}, workers={self.workers}: both must be >= 1."
                             " Fix: pass positive numbers")


def _builtin_tasks() -> list[Task]:
    from repogym.scenarios.registry import BUILTIN_DIR

    tasks = []
    for folder in find_task_dirs(BUILTIN_DIR):
        try:
            tasks.append(load_task(folder))
        except TaskError as e:
            warnings.warn(f"skipping built-in task: {e}", RuntimeWarning, stacklevel=2)
    return tasks


def select_tasks(suite: str, split: str | None = None,
                 task_ids: list[str] | None = None) -> list[Task]:
    """The suite's tasks, filtered and sorted by id.

    Raises:
        TaskError: the suite folder is malformed.
        ValueError: unknown task ids, or nothing left after filtering (with the fix).
    """
    tasks = _builtin_tasks() if suite == "builtin" else load_tasks(suite)
    if split:
        tasks = [t for t in tasks if t.split == split]
    if task_ids:
        unknown = sorted(set(task_ids) - {t.id for t in tasks})
        if unknown:
            raise ValueError(f"unknown task ids {unknown} in suite {suite!r} (split {split}). "
                             f"Fix: pick from {sorted(t.id for t in tasks)}")
        tasks = [t for t in tasks if t.id in set(task_ids)]
    if not tasks:
        raise ValueError(f"no task in suite {suite!r} matches split={split!r}. Fix: relax "
                         "--split/--tasks (see `repogym tasks`)")
    return sorted(tasks, key=lambda t: t.id)


def episode_seed(base: int, task_id: str, sample: int) -> int:
    """A stable seed per (base seed, task, sample)."""
    return (base * 1_000_003 + zlib.crc32(f"{task_id}:{sample}".encode())) % (2**31)


# -- one worker: an env and an agent ----------------------------------------------------------
class AgentTimeout(Exception):
    """``act`` (or ``reset``) ran past the per-act limit."""


def call_with_timeout(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """Call ``fn(*args)`` in a daemon thread; raise AgentTimeout if it runs past ``timeout_s``.

    A hung call cannot be killed from Python: its thread is abandoned (daemon) and the caller
    drops the agent, building a fresh one for the next episode. SIGINT/SIGTERM are blocked in
    the agent's thread and the wait polls, so Ctrl-C always reaches the caller at once (a
    signal delivered to another thread would not wake a long ``join``).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="repogym-agent")
    thread.start()
    deadline = time.monotonic() + timeout_s
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
    if thread.is_alive():
        raise AgentTimeout(f"{getattr(fn, '__qualname__', fn)} did not return within "
                           f"{timeout_s:g}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class _AgentFailed(Exception):
    """Wraps whatever the agent raised, to tell it apart from env failures."""


class _EnvFailed(Exception):
    """The env raised (it should not): recorded as an infra error."""


class EpisodeWorker:
    """Owns one env (with trajectory logging) and one agent; runs episodes in turn.

    Args:
        cfg: The run configuration.
        task_refs: ``"builtin:<id>"`` or task folder paths (resolved where the worker runs,
            so built-ins work on every Ray node).
    """

    def __init__(self, cfg: RunConfig, task_refs: list[str]) -> None:
        self.cfg = cfg
        self.tasks = {t.id: t for t in (_load_ref(r) for r in task_refs)}
        self._env: Any = None
        self._agent: Any = None
        self._stop = threading.Event()

    def _get_env(self) -> Any:
        if self._env is None:
            from repogym.envs import make_suite_env

            local = {} if self.cfg.env_server else {"tasks": list(self.tasks.values()),
                                                    "sandbox": self.cfg.sandbox}
            self._env = make_suite_env(
                log_dir=self.cfg.out / TRAJECTORIES, remote=self.cfg.env_server,
                reward_mode=self.cfg.reward_mode, max_steps=self.cfg.max_steps, **local)
        return self._env

    def _get_agent(self) -> Any:
        if self._agent is None:
            from repogym.harness.agents import make_agent

            self._agent = make_agent(self.cfg.agent, **self.cfg.agent_args)
        return self._agent

    def _agent_call(self, fn_name: str, *args: Any) -> Any:
        try:
            agent = self._get_agent()
            return call_with_timeout(getattr(agent, fn_name), *args,
                                     timeout_s=self.cfg.act_timeout_s)
        except Exception as e:
            self._agent = None  # unknown state (or a hung thread): build a fresh one next time
            raise _AgentFailed(f"{type(e).__name__} in {fn_name}: {e}") from e

    def run(self, task_id: str, sample: int) -> dict[str, Any]:
        """Run one episode and return its results row."""
        try:
            return self._run(task_id, sample)
        except BaseException:
            self.close()
            raise

    def _run(self, task_id: str, sample: int) -> dict[str, Any]:
        task = self.tasks[task_id]
        seed = episode_seed(self.cfg.seed, task_id, sample)
        row: dict[str, Any] = {k: None for k in ROW_KEYS}
        row.update(agent=self.cfg.label, task=task_id, split=task.split, sample=sample,
                   seed=seed, reward=0.0, resolved=False, steps=0, tokens=0, hack_flags=[])
        start = time.monotonic()
        env = self._get_env()
        try:
            obs, _ = env.reset(seed=seed, options={"task": task_id})
        except Exception as e:  # noqa: BLE001 - sandbox failed to start: infrastructure
            row.update(infra_error=f"reset: {type(e).__name__}: {e}",
                       wall_s=round(time.monotonic() - start, 3))
            return row
        row["trajectory"] = os.path.relpath(env.path, self.cfg.out)
        info: dict[str, Any] = {}
        try:
            agent = self._get_agent() if self._agent is None else self._agent
            if getattr(agent, "wants_gold_patch", False):
                agent.set_gold_patch(task.solution_patch.read_text())
            self._agent_call("reset", {**task.info(), "seed": seed, "sample": sample})
            done = False
            while not done:
                if self._stop.is_set():
                    raise KeyboardInterrupt("run stopped")
                action = self._agent_call("act", obs)
                try:
                    obs, reward, terminated, truncated, info = env.step(action)
                except Exception as e:  # a bug or failure below the agent: not its fault
                    raise _EnvFailed(f"step: {type(e).__name__}: {e}") from e
                row["steps"] += 1
                done = terminated or truncated
            row.update(reward=float(reward), resolved=bool(info.get("resolved")),
                       hack_flags=list(info.get("hack_flags") or []),
                       infra_error=info.get("infra_error"), truncated=info.get("truncated"))
        except _AgentFailed as e:
            row["agent_error"] = str(e)
        except _EnvFailed as e:
            row["infra_error"] = str(e)
        except Exception as e:  # noqa: BLE001 - agent construction errors are agent errors
            row["agent_error"] = f"{type(e).__name__}: {e}"
        usage = getattr(self._agent, "usage", None)
        if isinstance(usage, dict):
            row["usage"] = dict(usage)
            row["tokens"] = int(usage.get("prompt_tokens", 0)) + int(
                usage.get("completion_tokens", 0))
        row["wall_s"] = round(time.monotonic() - start, 3)
        return row

    def stop(self) -> None:
        """Ask a running episode to stop at its next step (from another thread)."""
        self._stop.set()

    def close(self) -> None:
        """Close the env (its sandbox and temp folders). Idempotent."""
        env, self._env = self._env, None
        if env is not None:
            env.close()


def _load_ref(ref: str) -> Task:
    if ref.startswith("builtin:"):
        from repogym.scenarios.registry import BUILTIN_DIR

        return load_task(BUILTIN_DIR / ref.split(":", 1)[1])
    return load_task(ref)


def _task_ref(task: Task) -> str:
    from repogym.scenarios.registry import BUILTIN_DIR

    if task.path.parent == BUILTIN_DIR.resolve():
        return f"builtin:{task.path.name}"
    return str(task.path)


# -- backends: in-process, process pool, Ray ---------------------------------------------------
Episode = tuple[str, int]


def _run_inline(cfg: RunConfig, refs: list[str], todo: list[Episode]) -> Iterator[dict]:
    worker = EpisodeWorker(cfg, refs)
    try:
        for task_id, sample in todo:
            yield worker.run(task_id, sample)
    finally:
        worker.close()


_WORKER: EpisodeWorker | None = None


def _raise_interrupt(signum: int, frame: Any) -> None:
    """First SIGINT/SIGTERM: interrupt the episode; later ones are ignored so that the
    clean-up the first one started (closing the env) is not itself interrupted."""
    signal.signal(signal.SIGINT, _ignore_signal)
    signal.signal(signal.SIGTERM, _ignore_signal)
    raise KeyboardInterrupt(f"signal {signum}")


def _ignore_signal(signum: int, frame: Any) -> None:
    """A Python-level no-op (SIG_IGN would race with a signal already pending)."""


def _pool_init(cfg: RunConfig, refs: list[str]) -> None:
    global _WORKER
    _WORKER = EpisodeWorker(cfg, refs)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    atexit.register(_WORKER.close)
    from multiprocessing import util

    util.Finalize(None, _WORKER.close, exitpriority=100)


def _pool_run(task_id: str, sample: int) -> dict[str, Any]:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.run(task_id, sample)


def _run_pool(cfg: RunConfig, refs: list[str], todo: list[Episode]) -> Iterator[dict]:
    import concurrent.futures as cf
    import multiprocessing as mp

    pool = cf.ProcessPoolExecutor(max_workers=min(cfg.workers, len(todo)),
                                  mp_context=mp.get_context("spawn"),
                                  initializer=_pool_init, initargs=(cfg, refs))
    futures = [pool.submit(_pool_run, t, s) for t, s in todo]
    try:
        for fut in cf.as_completed(futures):
            yield fut.result()
        pool.shutdown(wait=True)
    finally:
        _stop_pool(pool, futures)


def _stop_pool(pool: Any, futures: list[Any]) -> None:
    """Cancel queued episodes; SIGTERM the workers (their handler closes the env), then kill."""
    for fut in futures:
        fut.cancel()
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 30
    killed = False
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
            killed = True
    if killed:
        _collect_garbage()


def _collect_garbage() -> None:
    """Remove sandbox folders of killed processes (they carry the dead owner's pid)."""
    try:
        from repogym.sandbox.leases import collect_garbage
    except ImportError:
        return
    collect_garbage()


def _run_ray(cfg: RunConfig, refs: list[str], todo: list[Episode]) -> Iterator[dict]:
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("--ray needs Ray. Fix: pip install 'repogym[ray]'") from e
    started = not ray.is_initialized()
    if started:
        if cfg.ray == "local":
            ray.init(num_cpus=cfg.workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=cfg.ray, log_to_driver=False)
    actor_cls = ray.remote(num_cpus=1, max_concurrency=2)(EpisodeWorker)
    actors = [actor_cls.remote(cfg, refs) for _ in range(min(cfg.workers, len(todo)))]
    queue, pending = list(todo), {}
    try:
        for actor in actors:
            if queue:
                pending[actor.run.remote(*queue.pop(0))] = actor
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            actor = pending.pop(ref)
            yield ray.get(ref)
            if queue:
                pending[actor.run.remote(*queue.pop(0))] = actor
    finally:
        _stop_ray(ray, actors, list(pending), started)


def _stop_ray(ray: Any, actors: list[Any], pending: list[Any], started: bool) -> None:
    """Stop running episodes, close every actor's env, then release the actors."""
    for actor in actors:
        actor.stop.remote()
    if pending:
        ray.wait(pending, num_returns=len(pending), timeout=60)
    closing = [actor.close.remote() for actor in actors]
    ray.wait(closing, num_returns=len(closing), timeout=60)
    for actor in actors:
        ray.kill(actor)
    if started:
        ray.shutdown()
        _collect_garbage()  # local actors that had to be killed left their folders


def iter_episodes(cfg: RunConfig, tasks: list[Task], todo: list[Episode]) -> Iterator[dict]:
    """Run ``todo`` episodes on the configured backend, yielding rows as they finish."""
    refs = [_task_ref(t) for t in tasks]
    if not todo:
        return iter(())
    if cfg.ray:
        return _run_ray(cfg, refs, todo)
    if cfg.workers == 1:
        return _run_inline(cfg, refs, todo)
    return _run_pool(cfg, refs, todo)


# -- results ------------------------------------------------------------------------------------
def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a results.jsonl (or of ``DIR/results.jsonl``); the last row per episode wins."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no results. Fix: point at a folder written by "
                                "`repogym run --out DIR`")
    rows: dict[tuple, dict] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e}). Fix: delete the broken line") from e
        rows[(row.get("agent"), row.get("task"), row.get("sample"))] = row
    return list(rows.values())


def _done_episodes(cfg: RunConfig) -> set[Episode]:
    path = cfg.out / RESULTS
    if not path.is_file():
        return set()
    rows = read_results(path)
    other = sorted({r.get("agent") for r in rows} - {cfg.label})
    if other:
        raise ValueError(f"{cfg.out} holds results of agent(s) {other}, not {cfg.label!r}. "
                         "Fix: use another --out folder per agent (or --name to match)")
    return {(r["task"], r["sample"]) for r in rows if not r.get("infra_error")}


def plan(cfg: RunConfig) -> tuple[list[Task], list[Episode], int]:
    """Tasks, the episodes still to run, and how many were already done (resume)."""
    tasks = select_tasks(cfg.suite, cfg.split, cfg.task_ids)
    done = _done_episodes(cfg)
    episodes = [(t.id, s) for t in tasks for s in range(cfg.samples)]
    todo = [e for e in episodes if e not in done]
    return tasks, todo, len(episodes) - len(todo)


def run(cfg: RunConfig, on_row: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Run (or resume) ``cfg``: append rows to ``OUT/results.jsonl``; return all its rows."""
    tasks, todo, _ = plan(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    meta = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(cfg).items()}
    (cfg.out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    with (cfg.out / RESULTS).open("a") as f:
        for row in iter_episodes(cfg, tasks, todo):
            f.write(json.dumps(row) + "\n")
            f.flush()
            if on_row:
                on_row(row)
    return read_results(cfg.out)


# -- metrics --------------------------------------------------------------------------------------
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


def summarize(rows: Iterable[dict[str, Any]], ks: list[int] | None = None) -> dict[str, Any]:
    """Aggregate one agent's rows.

    Infra-error episodes are excluded from the rates (counted apart); agent errors count as
    failures. pass@k averages the unbiased estimator over tasks with at least k scored samples.
    """
    rows = list(rows)
    scored = [r for r in rows if not r.get("infra_error")]
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in scored:
        per_task[r["task"]].append(bool(r.get("resolved")))
    max_n = max((len(v) for v in per_task.values()), default=0)
    pass_k = {}
    for k in ks or default_ks(max_n):
        vals = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
        if vals:
            pass_k[k] = sum(vals) / len(vals)

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return {
        "episodes": len(rows),
        "tasks": len({r["task"] for r in rows}),
        "scored": len(scored),
        "resolved": sum(bool(r.get("resolved")) for r in scored),
        "resolve_rate": mean([float(bool(r.get("resolved"))) for r in scored]),
        "mean_reward": mean([float(r.get("reward") or 0.0) for r in scored]),
        "pass_at_k": pass_k,
        "mean_steps": mean([float(r.get("steps") or 0) for r in scored]),
        "wall_s": sum(float(r.get("wall_s") or 0.0) for r in rows),
        "mean_wall_s": mean([float(r.get("wall_s") or 0.0) for r in rows]),
        "tokens": sum(int(r.get("tokens") or 0) for r in rows),
        "hack_flagged": sum(bool(r.get("hack_flags")) for r in rows),
        "infra_errors": sum(bool(r.get("infra_error")) for r in rows),
        "agent_errors": sum(bool(r.get("agent_error")) for r in rows),
    }


def summarize_by_agent(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``summarize`` per agent label, agents sorted by name."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r.get("agent"))].append(r)
    return {agent: summarize(groups[agent]) for agent in sorted(groups)}
