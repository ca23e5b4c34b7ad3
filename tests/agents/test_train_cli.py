"""``repogym train --algo X --model tiny`` for every LM algorithm, and ``repogym plot``:
real environments, metrics with repogym's metric names, checkpoints, curves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.harness.cli import main
from repogym.harness.cmd_train import ALGOS

COMMON = {
    "loss/policy", "loss/kl", "loss/entropy", "clip/low_frac", "clip/high_frac",
    "is_weight/max", "is_weight/mean", "approx_kl", "entropy", "frac_zero_std_groups",
    "reward/mean", "resolve_rate", "throughput/tokens_per_s", "infra_error_frac",
}  # fmt: skip


def train(algo: str, out: Path) -> list[dict]:
    """Two steps on one task, warm-started so that groups have reward variance."""
    argv = [
        "train",
        "--algo",
        algo,
        "--model",
        "tiny",
        "--steps",
        "2",
        "--out",
        str(out),
        "--task",
        "retry-zero",
        "--set",
        "warm_start_steps=30",
        "--set",
        "rollout.group_size=4",
        "--set",
        "rollout.max_new_tokens=6",
    ]
    assert main(argv) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["ppo", "grpo", "gspo", "dapo", "cispo", "dr_grpo"])
def test_train_writes_metrics_checkpoint_and_curves(tmp_path: Path, algo: str) -> None:
    assert algo in ALGOS
    rows = train(algo, tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    names = set().union(*rows)
    assert COMMON <= names
    assert ("loss/value" in names) == (algo == "ppo")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["tasks"] == ["retry-zero"] and config["rollout"]["group_size"] == 4
    if algo != "ppo":
        assert config["variant"] == algo
    assert (tmp_path / "checkpoint-2" / "config.json").is_file()
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_plot_command_and_errors(tmp_path: Path) -> None:
    rows = [{"step": s, "reward/mean": s / 10, "loss/policy": -s / 100} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.harness.cli",
            "plot",
            str(tmp_path),
            "-o",
            str(tmp_path / "c.png"),
        ],
        capture_output=True,
        check=False,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(FileNotFoundError, match="Fix: pass the --out folder"):
        main(["plot", str(tmp_path / "missing")])


def test_bad_flags_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown rollout field"):
        main(["train", "--algo", "grpo", "--out", str(tmp_path), "--set", "rollout.nope=1"])
    with pytest.raises(ValueError, match="unknown tasks"):
        main(["train", "--algo", "grpo", "--out", str(tmp_path), "--task", "no-such-task"])
