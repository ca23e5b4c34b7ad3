"""The benchmarks run: the GPU check's CPU smoke path (real episodes, GRPO and PPO steps)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_gpu_train_smoke_on_the_cpu() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "gpu_train.py"), "--size", "smoke"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[2:]}
    assert set(rows) == {"grpo", "ppo"}
    for cols in rows.values():
        gen, update = float(cols[2]), float(cols[3])
        assert gen > 0 and update > 0
