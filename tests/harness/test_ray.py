"""The runner on Ray actors (a local Ray instance), each actor owning its env."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.harness.config import RunConfig
from repogym.harness.runner import run

from .conftest import TASKS, run_cli

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'repogym[ray]'")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_oracle_resolves_and_noop_does_not_on_ray_actors(local_ray: None, tmp_path: Path) -> None:
    oracle = run(
        RunConfig(agent="oracle", out=tmp_path / "o", task_ids=TASKS, workers=2, ray="local")
    )
    assert sorted(r["task"] for r in oracle) == TASKS
    assert all(r["resolved"] and not r["agent_error"] and not r["infra_error"] for r in oracle)
    assert all((tmp_path / "o" / r["trajectory"]).is_file() for r in oracle)
    noop = run(RunConfig(agent="noop", out=tmp_path / "n", task_ids=TASKS, workers=2, ray="local"))
    assert len(noop) == 2 and not any(r["resolved"] for r in noop)
    assert ray.is_initialized()  # a Ray instance the caller started is left running


def test_cli_ray_local_starts_and_stops_its_own_ray(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    proc = run_cli(
        "run",
        "--agent",
        "oracle",
        "--ray",
        "local",
        "--workers",
        "2",
        "--tasks",
        TASKS[0],
        "--out",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "100.0%" in proc.stdout
