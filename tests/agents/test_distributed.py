"""Data parallelism: ``repogym train --nproc 2`` (torchrun, FSDP2 over gloo on the CPU) trains
the same weights as ``--nproc 1`` at the same global batch, for the policy, a separate critic
and the KL reference; the helpers are no-ops in a world of one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from repogym.agents.distributed import Parallel
from repogym.agents.metrics import reduce_ranks
from repogym.agents.policy import load_policy
from repogym.cli import main

# PPO with a separate critic (its own FSDP root), a KL reference (a third) and an entropy
# bonus; the overlong shaping gives every episode a return of -1, so the critic learns too.
# Three groups of two tasks a step: rank 0 runs two groups of two episodes, rank 1 one (and
# pads its micro-batches), so per-rank means must be weighted by their counts.
ARGS = [
    "--algo",
    "ppo",
    "--steps",
    "2",
    "--task",
    "retry-zero",
    "--task",
    "empty-mean",
    "--tasks-per-step",
    "3",
    "--set",
    "rollout.group_size=2",
    "--set",
    "rollout.max_new_tokens=8",
    "--set",
    "rollout.max_steps=1",
    "--set",
    "lr=1e-3",
    "--set",
    "micro_batch=1",
    "--set",
    "critic=separate",
    "--set",
    "beta=0.1",
    "--set",
    "ent_coef=0.01",
    "--set",
    'shaping={"env": 1, "overlong": 1, "max_action_tokens": 4, "overlong_cache": 2}',
]


def _start(model: Path, out: Path, nproc: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "repogym.cli",
        "train",
        "--model",
        str(model),
        "--out",
        str(out),
        "--nproc",
        str(nproc),
        *ARGS,
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )


def _finish(proc: subprocess.Popen, out: Path) -> dict:
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    return torch.load(out / "checkpoint-2" / "trainer_state.pt", weights_only=False)


def test_nproc_2_trains_the_same_weights_as_nproc_1(qwen_dir: Path, tmp_path: Path) -> None:
    # Both runs at once (they share nothing but the model folder, read-only): their
    # sandboxed episodes wait on I/O, so together they take less than one after the other.
    runs = [(_start(qwen_dir, tmp_path / f"n{n}", n), tmp_path / f"n{n}") for n in (1, 2)]
    try:
        one, two = (_finish(proc, out) for proc, out in runs)
    finally:
        for proc, _ in runs:
            if proc.poll() is None:
                proc.kill()
    start = load_file(qwen_dir / "model.safetensors")
    for name in ("policy", "critic"):
        a, b = one[name], two[name]
        assert sorted(a) == sorted(b)
        # Tolerance: 1e-4 = a tenth of one AdamW step at lr 1e-3. Sums run in another order
        # over two ranks (~1e-7 relative), and AdamW's m/sqrt(v) turns that into up to ~2e-5
        # on weights whose gradient is near zero; the weights moved by ~100x more.
        for key in a:
            torch.testing.assert_close(a[key], b[key], atol=1e-4, rtol=0, msg=key)
    moved = max(float((one["policy"][f"model.{k}"] - v).abs().max()) for k, v in start.items())
    assert moved > 5e-3
    rows = {n: _metric_rows(tmp_path / f"n{n}") for n in (1, 2)}
    assert [r["step"] for r in rows[2]] == [1, 2] and rows[2][-1]["loss/value"] > 0
    # The same metric rows (times and rates aside): each rank's means weighted by its counts.
    assert [sorted(r) for r in rows[1]] == [sorted(r) for r in rows[2]]
    for a, b in zip(rows[1], rows[2], strict=True):
        assert a["reward/mean"] == b["reward/mean"] and a["entropy"] > 0
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
    saved = load_policy(tmp_path / "n2" / "checkpoint-2", device="cpu").model.state_dict()
    assert all(torch.equal(v, two["policy"][f"model.{k}"]) for k, v in saved.items())
    assert len(list((tmp_path / "n2" / "rollouts").glob("step-00001-r*-*.jsonl"))) == 6


def _metric_rows(out: Path) -> list[dict[str, float]]:
    """A run's metric rows without what depends on the clock (times, rates)."""
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    timed = ("time", "time/", "throughput/")
    return [{k: v for k, v in r.items() if not k.startswith(timed)} for r in rows]


def test_metrics_reduce_by_counts_and_a_rank_without_groups_adds_nothing() -> None:
    # Rank 0 ran 4 valid episodes (reward mean 0.25) over 2 micro-batches; rank 1 had no
    # group: its rollout means are placeholders (0) and its only pass was padding.
    rank0 = (
        {
            "reward/mean": 0.25,
            "entropy": 3.0,
            "loss/policy": 0.5,
            "is_weight/max": 1.2,
            "lr": 1e-3,
            "time/step_s": 2.0,
        },
        {"reward/mean": 4, "entropy": 2, "loss/policy": 2, "is_weight/max": 2},
    )
    rank1 = (
        {
            "reward/mean": 0.0,
            "entropy": 0.0,
            "loss/policy": 0.0,
            "is_weight/max": 9.0,
            "lr": 1e-3,
            "time/step_s": 3.0,
        },
        {"reward/mean": 0, "entropy": 0, "loss/policy": 0, "is_weight/max": 0},
    )
    assert reduce_ranks([rank0, rank1]) == {
        "reward/mean": 0.25,
        "entropy": 3.0,
        "loss/policy": 0.5,
        "is_weight/max": 1.2,
        "lr": 1e-3,
        "time/step_s": 3.0,
    }
    # Uneven counts: the weighted mean is the mean over every item.
    got = reduce_ranks([({"entropy": 1.0}, {"entropy": 3}), ({"entropy": 4.0}, {"entropy": 1})])
    assert got == {"entropy": pytest.approx((3 * 1.0 + 4.0) / 4)}
    # No rank has an item: the placeholders, as one process with nothing reports them.
    assert reduce_ranks([({"reward/mean": 0.0}, {"reward/mean": 0})] * 2) == {"reward/mean": 0.0}


def test_a_world_of_one_changes_nothing() -> None:
    par = Parallel()
    assert (par.main, par.enabled, par.grad_scale) == (True, False, 1.0)
    assert par.mine(["a", "b", "c"]) == [(0, "a"), (1, "b"), (2, "c")]
    assert par.pad_micro_batches([1, 2]) == [(1, True), (2, True)]
    assert par.reduce_metrics({"loss/policy": 0.5}) == {"loss/policy": 0.5}
    assert float(par.sum(torch.tensor(3.0))) == 3.0
    assert Parallel(rank=1, world=2).mine(["a", "b", "c"]) == [(1, "b")]


@pytest.mark.parametrize("algo", ["distill", "opd", "async", "sb3-ppo"])
def test_data_parallelism_refuses_what_it_does_not_cover(tmp_path: Path, algo: str) -> None:
    with pytest.raises(SystemExit, match="data parallelism covers ppo, grpo.*Fix: drop --nproc"):
        main(["train", "--algo", algo, "--model", "tiny", "--out", str(tmp_path), "--nproc", "2"])
